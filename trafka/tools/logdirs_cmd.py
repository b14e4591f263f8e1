"""`ktool log-dirs --describe`: kafka-log-dirs.sh line for line.

    ktool log-dirs --bootstrap-server HOST:PORT --describe [--topic-list t1,t2] [--broker-list 1,2]
    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t1-0","size":123,...

As LogDirsCommand: the brokers are the ones Metadata lists (or `--broker-list`, each of which
must exist), each is asked DescribeLogDirs (35) for all its log dirs and partitions, and the
report keeps the partitions of `--topic-list` (all when absent). The JSON is Kafka's, keys in
the order Kafka's tool prints them; a log dir's error is the name of Kafka's Java exception
class. `--json` prints only the JSON document (trafka's addition).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from trafka.net.api_keys import ApiKey
from trafka.tools.offsets_cmd import (
    Bootstrap,
    ClusterClient,
    OffsetsCommandError,
    java_exception,
    run_on_cluster,
)
from trafka.tools.output import JsonFlag, emit_json


def error_name(code: int) -> str:
    """Kafka's name of an error code (57 -> KAFKA_STORAGE_ERROR)."""
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise OffsetsCommandError(f"--broker-list expects broker ids, not {text!r}") from None


def report(answers: dict[int, list[Any]], topics: set[str] | None) -> dict[str, Any]:
    """{broker: DescribeLogDirs results} -> Kafka's JSON document (key order as Kafka prints)."""
    brokers = []
    for broker, results in answers.items():
        log_dirs = []
        for result in results:
            error = int(result.error_code)
            partitions = [
                {
                    "partition": f"{topic.name}-{partition.partition_index}",
                    "size": int(partition.partition_size),
                    "offsetLag": int(partition.offset_lag),
                    "isFuture": bool(partition.is_future_key),
                }
                for topic in result.topics
                if topics is None or str(topic.name) in topics
                for partition in topic.partitions
            ]
            log_dirs.append(
                {
                    "partitions": partitions,
                    "error": None
                    if error == 0
                    else java_exception(error_name(error)).split(":")[0],
                    "logDir": str(result.log_dir),
                }
            )
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return {"brokers": brokers, "version": 1}


def log_dirs(
    bootstrap_server: Bootstrap = "localhost:9092",
    describe: Annotated[bool, typer.Option("--describe", help="describe the log dirs")] = False,
    topic_list: Annotated[
        str | None, typer.Option("--topic-list", help="comma-separated topics (all if absent)")
    ] = None,
    broker_list: Annotated[
        str | None, typer.Option("--broker-list", help="comma-separated broker ids (all if absent)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Describe the log dirs of brokers (kafka-log-dirs.sh --describe)."""

    async def body(cluster: ClusterClient) -> None:
        if not describe:
            raise OffsetsCommandError("Command must include exactly one action: --describe")
        wanted = parse_ids(broker_list)
        topics = {t.strip() for t in topic_list.split(",") if t.strip()} if topic_list else None
        await cluster.load_metadata()
        existing = sorted(cluster.brokers)
        if wanted is not None:
            missing = sorted(set(wanted) - set(existing))
            if missing:
                raise OffsetsCommandError(
                    "ERROR: The given brokers do not exist from --broker-list: "
                    f"{','.join(map(str, missing))}. Current existent brokers: "
                    f"{','.join(map(str, existing))}"
                )
        brokers = existing if wanted is None else list(dict.fromkeys(wanted))
        if not as_json:
            typer.echo("Querying brokers for log directories information")
        answers: dict[int, list[Any]] = {}
        for broker in brokers:
            response = await cluster.call(
                cluster.brokers[broker], ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, 4, 1
            )
            answers[broker] = list(response.results)
        document = report(answers, topics)
        if as_json:
            emit_json(document)
            return
        typer.echo(
            "Received log directory information from brokers " + ",".join(str(b) for b in brokers)
        )
        typer.echo(json.dumps(document, separators=(",", ":")))

    run_on_cluster(body, bootstrap_server, "")


def register(app: typer.Typer) -> None:
    app.command("log-dirs")(log_dirs)
