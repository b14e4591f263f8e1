"""`ktool topics`: create, list, describe, delete and alter topics over the Kafka protocol.

Output follows `kafka-topics.sh` (TopicCommand.java, REFERENCE.md §6.1):

    ktool topics create orders --partitions 6 --replication-factor 3   # Created topic orders.
    ktool topics list                                                  # one name per line
    ktool topics describe orders     # tab-separated, as kafka-topics.sh prints it:
    Topic: orders  TopicId: <id>  PartitionCount: 6  ReplicationFactor: 3  Configs: k=v,...
        Topic: orders  Partition: 0  Leader: 1  Replicas: 1,2,3  Isr: 1,2,3  Elr: N/A ...
    ktool topics alter orders --partitions 8
    ktool topics delete orders

`--bootstrap-server` (default localhost:9092) names any broker; requests go over
`trafka.net.client.KafkaConnection` with versions negotiated by ApiVersions. `--json` prints
one JSON document instead. Failures print one line (`Error while executing topic command :
<message>`) on stderr and exit with status 1.

Not implemented: `--topic` regular expressions, `--at-min-isr-partitions`,
`--exclude-internal` (internal topics are listed), `--command-config`.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import trio
import typer

from trafka.net import codec
from trafka.net.client import ClientError, KafkaConnection
from trafka.node.handlers.kio_shape import build
from trafka.node.topics import topic_id_text

topics_app = typer.Typer(
    name="topics",
    help="Create, list, describe, alter and delete topics (kafka-topics.sh).",
    no_args_is_help=True,
    add_completion=False,
)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", help="host:port of any broker")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON")]

DYNAMIC_TOPIC_CONFIG = 1
TOPIC_RESOURCE = 2


class TopicCommandError(Exception):
    pass


async def _connect(bootstrap: str) -> KafkaConnection:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise TopicCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    try:
        connection = await KafkaConnection.connect(host, int(port), client_id="ktool-topics")
        await connection.negotiate_api_versions()
    except ClientError as error:
        raise TopicCommandError(str(error)) from None
    return connection


async def _call(connection: KafkaConnection, api_key: int, data: dict[str, Any], high: int) -> Any:
    version = connection.version_for(api_key, 0, high)
    request_class = codec.request_class(api_key, version)
    assert request_class is not None
    return await connection.request(build(request_class, data), version)


def _error(code: Any, message: str | None) -> str:
    name = getattr(code, "name", str(code)).upper()
    return f"{name}: {message}" if message else name


async def _metadata(connection: KafkaConnection, topics: list[str] | None) -> Any:
    return await _call(
        connection,
        3,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        },
        12,
    )


def _run(command: Callable[[], Awaitable[None]]) -> None:
    try:
        trio.run(command)
    except TopicCommandError as error:
        print(f"Error while executing topic command : {error}", file=sys.stderr)
        raise typer.Exit(code=1) from None


def _parse_configs(items: list[str] | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TopicCommandError(f"invalid --config {item!r}: expected key=value")
        configs[key.strip()] = value.strip()
    return configs


def _parse_assignment(text: str | None) -> list[list[int]]:
    """kafka-topics' --replica-assignment: `1:2,3:4` = partition 0 on 1,2; partition 1 on 3,4."""
    if not text:
        return []
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise TopicCommandError(f"invalid --replica-assignment {text!r}") from None


@topics_app.command("create")
def create(
    topic: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[int, typer.Option(help="number of partitions (-1: broker default)")] = -1,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", help="replicas per partition (-1: default)")
    ] = -1,
    config: Annotated[list[str] | None, typer.Option(help="key=value topic config")] = None,
    replica_assignment: Annotated[
        str | None, typer.Option("--replica-assignment", help="1:2,2:3,... per partition")
    ] = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists")] = False,
    validate_only: Annotated[bool, typer.Option("--validate-only")] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Create a topic."""

    async def command() -> None:
        configs = _parse_configs(config)
        assignment = _parse_assignment(replica_assignment)
        connection = await _connect(bootstrap_server)
        try:
            response = await _call(
                connection,
                19,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": -1 if assignment else partitions,
                            "replication_factor": -1 if assignment else replication_factor,
                            "assignments": [
                                {"partition_index": i, "broker_ids": brokers}
                                for i, brokers in enumerate(assignment)
                            ],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()],
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": validate_only,
                },
                7,
            )
        finally:
            await connection.close()
        result = response.topics[0]
        code = int(result.error_code)
        if code == 36 and if_not_exists:
            code = 0
        if code != 0:
            raise TopicCommandError(_error(result.error_code, result.error_message))
        if as_json:
            print(json.dumps({"topic": topic, "created": not validate_only}))
        elif not validate_only:
            print(f"Created topic {topic}.")

    _run(command)


@topics_app.command("list")
def list_topics(bootstrap_server: Bootstrap = "localhost:9092", as_json: JsonFlag = False) -> None:
    """List topic names."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            response = await _metadata(connection, None)
        finally:
            await connection.close()
        names = sorted(str(t.name) for t in response.topics if int(t.error_code) == 0)
        print(json.dumps(names) if as_json else "\n".join(names))

    _run(command)


async def _topic_configs(
    connection: KafkaConnection, names: list[str]
) -> dict[str, dict[str, str]]:
    if not names:
        return {}
    response = await _call(
        connection,
        32,
        {
            "resources": [
                {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                for n in names
            ],
            "include_synonyms": False,
        },
        4,
    )
    result: dict[str, dict[str, str]] = {}
    for resource in response.results:
        result[str(resource.resource_name)] = {
            str(c.name): str(c.value)
            for c in resource.configs
            if int(getattr(c, "config_source", 0)) == DYNAMIC_TOPIC_CONFIG and c.value is not None
        }
    return result


@topics_app.command("describe")
def describe(
    topic: Annotated[str | None, typer.Argument(help="topic (default: all)")] = None,
    under_replicated_partitions: Annotated[
        bool, typer.Option("--under-replicated-partitions")
    ] = False,
    unavailable_partitions: Annotated[bool, typer.Option("--unavailable-partitions")] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Describe topics: ids, partitions, leaders, replicas, ISR, configs."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            response = await _metadata(connection, None if topic is None else [topic])
            topics = sorted(response.topics, key=lambda t: str(t.name))
            for entry in topics:
                if int(entry.error_code) != 0:
                    raise TopicCommandError(
                        f"Topic '{entry.name}' does not exist as expected"
                        if int(entry.error_code) == 3
                        else _error(entry.error_code, None)
                    )
            configs = await _topic_configs(connection, [str(t.name) for t in topics])
        finally:
            await connection.close()
        live = {int(b.node_id) for b in response.brokers}
        documents = []
        lines = []
        filtering = under_replicated_partitions or unavailable_partitions
        for entry in topics:
            name = str(entry.name)
            partitions = sorted(entry.partitions, key=lambda p: int(p.partition_index))
            factor = len(partitions[0].replica_nodes) if partitions else 0
            topic_id = getattr(entry, "topic_id", None) or uuid.UUID(int=0)
            topic_configs = configs.get(name, {})
            rows: list[dict[str, Any]] = []
            for p in partitions:
                leader = int(p.leader_id)
                replicas = [int(r) for r in p.replica_nodes]
                isr = [int(r) for r in p.isr_nodes]
                under = len(isr) < len(replicas)
                unavailable = leader < 0 or leader not in live
                if filtering and not (
                    (under_replicated_partitions and under)
                    or (unavailable_partitions and unavailable)
                ):
                    continue
                rows.append(
                    {
                        "partition": int(p.partition_index),
                        "leader": leader if leader >= 0 else None,
                        "replicas": replicas,
                        "isr": isr,
                    }
                )
            documents.append(
                {
                    "topic": name,
                    "topic_id": topic_id_text(topic_id),
                    "partition_count": len(partitions),
                    "replication_factor": factor,
                    "configs": topic_configs,
                    "partitions": rows,
                }
            )
            if not filtering:
                config_text = ",".join(f"{k}={v}" for k, v in sorted(topic_configs.items()))
                lines.append(
                    f"Topic: {name}\tTopicId: {topic_id_text(topic_id)}\t"
                    f"PartitionCount: {len(partitions)}\tReplicationFactor: {factor}\t"
                    f"Configs: {config_text}"
                )
            for row in rows:
                leader_text = "none" if row["leader"] is None else str(row["leader"])
                lines.append(
                    f"\tTopic: {name}\tPartition: {row['partition']}\tLeader: {leader_text}\t"
                    f"Replicas: {','.join(map(str, row['replicas']))}\t"
                    f"Isr: {','.join(map(str, row['isr']))}\tElr: N/A\tLastKnownElr: N/A"
                )
        if as_json:
            print(json.dumps(documents, indent=2))
        elif lines:
            print("\n".join(lines))

    _run(command)


@topics_app.command("delete")
def delete(
    topic: Annotated[str, typer.Argument(help="topic name")],
    if_exists: Annotated[bool, typer.Option("--if-exists")] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Delete a topic."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            version = connection.version_for(20, 1, 6)
            data: dict[str, Any] = {"timeout": 30000}
            if version >= 6:
                data["topics"] = [{"name": topic}]
            else:
                data["topic_names"] = [topic]
            response = await _call(connection, 20, data, version)
        finally:
            await connection.close()
        result = response.responses[0]
        code = int(result.error_code)
        if code == 3 and if_exists:
            code = 0
        elif code == 3:
            raise TopicCommandError(f"Topic '{topic}' does not exist as expected")
        if code != 0:
            raise TopicCommandError(
                _error(result.error_code, getattr(result, "error_message", None))
            )
        if as_json:
            print(json.dumps({"topic": topic, "deleted": True}))

    _run(command)


@topics_app.command("alter")
def alter(
    topic: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[int, typer.Option(help="the new total number of partitions")],
    replica_assignment: Annotated[
        str | None, typer.Option("--replica-assignment", help="for the new partitions")
    ] = None,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Increase the number of partitions of a topic."""

    async def command() -> None:
        assignment = _parse_assignment(replica_assignment)
        connection = await _connect(bootstrap_server)
        try:
            response = await _call(
                connection,
                37,
                {
                    "topics": [
                        {
                            "name": topic,
                            "count": partitions,
                            "assignments": [{"broker_ids": b} for b in assignment] or None,
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": False,
                },
                3,
            )
        finally:
            await connection.close()
        result = response.results[0]
        if int(result.error_code) != 0:
            raise TopicCommandError(_error(result.error_code, result.error_message))
        if as_json:
            print(json.dumps({"topic": topic, "partitions": partitions}))

    _run(command)
