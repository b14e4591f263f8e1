"""`ktool get-offsets` and `ktool delete-records`: kafka-get-offsets.sh and
kafka-delete-records.sh, line for line.

    ktool get-offsets --bootstrap-server HOST:PORT --topic orders --time -2
    orders:0:0
    orders:1:0
    ktool get-offsets ... --topic-partitions 'orders:1,events:0-3' [--exclude-internal-topics]
    ktool delete-records --bootstrap-server HOST:PORT --offset-json-file offsets.json
    Executing records delete operation
    Records delete operation completed:
    partition: orders-0	low_watermark: 60

get-offsets (GetOffsetShell): `--topic` is a regular expression matched against the whole
name (every topic when absent), `--partitions` a comma-separated list of ids, and
`--topic-partitions` a comma-separated list of `TOPIC_REGEX[:N|:N-M]` (M exclusive, either end
may be left out); `--time` is -1/latest, -2/earliest, -3/max-timestamp, -4/earliest-local,
-5/latest-tiered or a timestamp in ms. One `topic:partition:offset` line per partition,
sorted by topic then partition; a partition without an offset for the time (ListOffsets
answers -1) is left out, a partition whose leader answers an error is reported on stderr
("Skip getting offsets for topic-partition ...") and left out, as Kafka's tool does.

delete-records (DeleteRecordsCommand): the JSON file is `{"partitions": [{"topic": T,
"partition": P, "offset": O}], "version": 1}`; offset -1 means the high watermark. Each
partition's leader gets a DeleteRecords (21) request; a failed partition prints
`partition: T-P\terror: <Kafka's Java exception>: <message>`, as the Java tool prints the
ExecutionException's message.

`--command-config` (ktool's global option) secures every connection. `--json` prints one JSON
document instead (trafka's addition: Kafka's tools have no JSON output for these).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import trio
import typer

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.tools.output import JsonFlag, emit_json

Bootstrap = Annotated[
    str, typer.Option("--bootstrap-server", help="host:port of any broker (comma-separated list)")
]

# --time's names (OffsetSpec in Kafka's Admin API) -> ListOffsets timestamps
NAMED_TIMES: Final = {
    "latest": -1,
    "earliest": -2,
    "max-timestamp": -3,
    "earliest-local": -4,
    "latest-tiered": -5,
}
# the lowest ListOffsets version that knows each special timestamp (KIP-734, KIP-405, KIP-1005)
TIME_MIN_VERSION: Final = {-3: 7, -4: 8, -5: 9}
TIME_HELP: Final = (
    "-1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
    "-5 or latest-tiered, or a timestamp in ms"
)

# Kafka's default message for the error codes these tools meet (Errors.java)
ERROR_MESSAGES: Final = {
    "OFFSET_OUT_OF_RANGE": "The requested offset is not within the range of offsets maintained "
    "by the server.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "NOT_LEADER_OR_FOLLOWER": "For requests intended only for the leader, this error indicates "
    "that the broker is not the current leader. For requests intended for any replica, this "
    "error indicates that the broker is not a replica of the topic partition.",
    "LEADER_NOT_AVAILABLE": "There is no leader for this topic-partition as we are in the middle "
    "of a leadership election.",
    "TOPIC_AUTHORIZATION_FAILED": "Topic authorization failed.",
    "POLICY_VIOLATION": "Request parameters do not satisfy the configured policy.",
    "REQUEST_TIMED_OUT": "The request timed out.",
    "UNSUPPORTED_VERSION": "The version of API is not supported.",
}


# error codes whose Java exception is not CamelCase(name) + "Exception" (Errors.java)
CLASS_NAMES: Final = {
    "KAFKA_STORAGE_ERROR": "KafkaStorageException",
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
    "CORRUPT_MESSAGE": "CorruptRecordException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "GROUP_AUTHORIZATION_FAILED": "GroupAuthorizationException",
}


class OffsetsCommandError(Exception):
    pass


# ---- the sans-I/O part: arguments in, lines out -------------------------------------------------
def parse_time(text: str) -> int:
    """--time: a name, -1..-5, or a timestamp in ms."""
    named = NAMED_TIMES.get(text.strip().lower())
    if named is not None:
        return named
    try:
        value = int(text)
    except ValueError:
        raise OffsetsCommandError(
            f"Malformed time argument {text}. Please use {TIME_HELP}"
        ) from None
    if value < -5:
        raise OffsetsCommandError(f"Malformed time argument {text}. Please use {TIME_HELP}")
    return value


@dataclass(frozen=True)
class PartitionFilter:
    """One `TOPIC_REGEX[:N|:N-M]` of --topic-partitions (or --topic with --partitions)."""

    topic: re.Pattern[str]
    partitions: frozenset[int] | None = None  # an explicit list (--partitions)
    low: int = 0  # a range [low, high)
    high: int | None = None

    def matches(self, topic: str, partition: int) -> bool:
        if self.topic.fullmatch(topic) is None:
            return False
        if self.partitions is not None:
            return partition in self.partitions
        return partition >= self.low and (self.high is None or partition < self.high)


_SPEC: Final = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text or ".*")
    except re.error as error:
        raise OffsetsCommandError(f"Invalid regular expression {text!r}: {error}") from None


def parse_filters(
    topic: str | None, partitions: str | None, topic_partitions: str | None
) -> list[PartitionFilter]:
    """GetOffsetShell's createTopicPartitionFilter."""
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            raise OffsetsCommandError(
                "--topic-partitions cannot be used with --topic or --partitions"
            )
        filters = []
        for spec in topic_partitions.split(","):
            found = _SPEC.fullmatch(spec.strip())
            if found is None:
                raise OffsetsCommandError(
                    f"Invalid topic-partition rule: {spec}. Should be: "
                    "TOPIC_REGEX[:PARTITION|:LOWER-UPPER]"
                )
            name, single, low, high = found.groups()
            if single:
                filters.append(PartitionFilter(_regex(name), frozenset({int(single)})))
            elif low is not None or high is not None:
                filters.append(
                    PartitionFilter(_regex(name), None, int(low or 0), int(high) if high else None)
                )
            else:
                filters.append(PartitionFilter(_regex(name)))
        return filters
    ids: frozenset[int] | None = None
    if partitions is not None:
        try:
            ids = frozenset(int(p) for p in partitions.split(",") if p.strip())
        except ValueError:
            raise OffsetsCommandError(
                f"--partitions expects a comma-separated list of numbers, not {partitions!r}"
            ) from None
    return [PartitionFilter(_regex(topic or ".*"), ids)]


def select(
    available: Sequence[tuple[str, int]],
    filters: Sequence[PartitionFilter],
    internal: frozenset[str],
    exclude_internal: bool,
) -> list[tuple[str, int]]:
    """The partitions of the cluster that a filter matches, sorted by topic and partition."""
    return sorted(
        (topic, partition)
        for topic, partition in available
        if not (exclude_internal and topic in internal)
        and any(f.matches(topic, partition) for f in filters)
    )


def offset_lines(offsets: dict[tuple[str, int], int]) -> list[str]:
    """`topic:partition:offset`, partitions with no offset (-1) left out."""
    return [f"{t}:{p}:{o}" for (t, p), o in sorted(offsets.items()) if o >= 0]


def java_exception(error: str) -> str:
    """OFFSET_OUT_OF_RANGE -> org.apache.kafka.common.errors.OffsetOutOfRangeException: <msg>."""
    camel = "".join(word.capitalize() for word in error.lower().split("_")) + "Exception"
    message = ERROR_MESSAGES.get(error)
    name = f"org.apache.kafka.common.errors.{CLASS_NAMES.get(error, camel)}"
    return f"{name}: {message}" if message else name


def parse_offset_json(text: str) -> list[tuple[str, int, int]]:
    """DeleteRecordsCommand's offset JSON file -> [(topic, partition, offset)]."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise OffsetsCommandError(f"The input string is not a valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise OffsetsCommandError("Offset json file doesn't contain valid JSON data.")
    version = document.get("version", 1)
    if version != 1:
        raise OffsetsCommandError(f"Not supported version field value {version}")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        raise OffsetsCommandError("Offset json file doesn't contain valid JSON data.")
    result: list[tuple[str, int, int]] = []
    for entry in entries:
        try:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError):
            raise OffsetsCommandError(
                "Offset json file doesn't contain valid JSON data: each partition needs "
                "topic, partition and offset"
            ) from None
        if (
            not isinstance(topic, str)
            or not isinstance(partition, int)
            or not isinstance(offset, int)
        ):
            raise OffsetsCommandError("Offset json file doesn't contain valid JSON data.")
        result.append((topic, partition, offset))
    seen: set[tuple[str, int]] = set()
    duplicates = []
    for topic, partition, _ in result:
        if (topic, partition) in seen:
            duplicates.append(f"{topic}-{partition}")
        seen.add((topic, partition))
    if duplicates:
        raise OffsetsCommandError(
            "Offset json file contains duplicate topic partitions: " + ",".join(duplicates)
        )
    return result


# ---- the trio shell ------------------------------------------------------------------------------
def _address(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise OffsetsCommandError(f"invalid --bootstrap-server {text!r}: expected host:port")
    return host, int(port)


class ClusterClient:
    """Connections to one cluster's brokers, and who leads which partition."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = [_address(part) for part in bootstrap.split(",") if part.strip()]
        if not self.bootstrap:
            raise OffsetsCommandError("--bootstrap-server is required")
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.internal: frozenset[str] = frozenset()

    async def connection(self, address: tuple[str, int]) -> KafkaConnection:
        existing = self._connections.get(address)
        if existing is not None and not existing.closed:
            return existing
        connection = await KafkaConnection.connect(
            *address, client_id="ktool", security=command_config.current()
        )
        await connection.negotiate_api_versions()
        self._connections[address] = connection
        return connection

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()

    async def call(
        self,
        address: tuple[str, int],
        api_key: ApiKey,
        data: dict[str, Any],
        high: int,
        low: int = 0,
    ) -> Any:
        connection = await self.connection(address)
        version = connection.version_for(api_key, low, high)
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        return await connection.request(build(request_class, data), version)

    async def load_metadata(self, topics: Sequence[str] | None = None) -> None:
        last: Exception | None = None
        for address in self.bootstrap:
            try:
                response = await self.call(
                    address,
                    ApiKey.METADATA,
                    {
                        "topics": None if topics is None else [{"name": t} for t in topics],
                        "allow_auto_topic_creation": False,
                    },
                    12,
                )
                break
            except (ClientError, OSError) as error:
                last = error
        else:
            raise OffsetsCommandError(f"no broker of {self.bootstrap} answered: {last}")
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        internal = set()
        for topic in response.topics:
            if int(topic.error_code) != 0:
                continue
            if getattr(topic, "is_internal", False):
                internal.add(str(topic.name))
            for partition in topic.partitions:
                key = (str(topic.name), int(partition.partition_index))
                self.leaders[key] = int(partition.leader_id)
        self.internal = frozenset(internal)

    def by_leader(
        self, partitions: Sequence[tuple[str, int]]
    ) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[str, int]]]:
        """Partitions grouped by their leader, and those without a live leader."""
        grouped: dict[int, list[tuple[str, int]]] = {}
        leaderless = []
        for tp in partitions:
            leader = self.leaders.get(tp, -1)
            if leader in self.brokers:
                grouped.setdefault(leader, []).append(tp)
            else:
                leaderless.append(tp)
        return grouped, leaderless


def _topics_of(
    partitions: Sequence[tuple[str, int]], entry: Callable[[tuple[str, int]], dict[str, Any]]
) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in partitions:
        topics.setdefault(tp[0], []).append(entry(tp))
    return [{"name": name, "partitions": entries} for name, entries in topics.items()]


def _error_name(code: Any) -> str:
    return str(getattr(code, "name", code)).upper()


async def list_offsets(
    cluster: ClusterClient, partitions: Sequence[tuple[str, int]], timestamp: int
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    """ListOffsets (2) for `timestamp` at each partition's leader: offsets and error names."""
    grouped, leaderless = cluster.by_leader(partitions)
    offsets: dict[tuple[str, int], int] = {}
    errors = {tp: "LEADER_NOT_AVAILABLE" for tp in leaderless}
    low = TIME_MIN_VERSION.get(timestamp, 1)
    for leader, tps in sorted(grouped.items()):
        response = await cluster.call(
            cluster.brokers[leader],
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": _topics_of(
                    tps,
                    lambda tp: {
                        "partition_index": tp[1],
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                    },
                ),
            },
            10,
            low,
        )
        for topic in response.topics:
            for partition in topic.partitions:
                key = (str(topic.name), int(partition.partition_index))
                if int(partition.error_code) != 0:
                    errors[key] = _error_name(partition.error_code)
                else:
                    offsets[key] = int(partition.offset)
    return offsets, errors


async def delete_records(
    cluster: ClusterClient, targets: Sequence[tuple[str, int, int]]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    """DeleteRecords (21) at each partition's leader: low watermarks and error names."""
    offsets = {(t, p): o for t, p, o in targets}
    known = [tp for tp in offsets if tp in cluster.leaders]
    errors = {tp: "UNKNOWN_TOPIC_OR_PARTITION" for tp in offsets if tp not in cluster.leaders}
    grouped, leaderless = cluster.by_leader(known)
    errors.update({tp: "LEADER_NOT_AVAILABLE" for tp in leaderless})
    watermarks: dict[tuple[str, int], int] = {}
    for leader, tps in sorted(grouped.items()):
        response = await cluster.call(
            cluster.brokers[leader],
            ApiKey.DELETE_RECORDS,
            {
                "topics": _topics_of(
                    tps, lambda tp: {"partition_index": tp[1], "offset": offsets[tp]}
                ),
                "timeout": 30000,
            },
            2,
        )
        for topic in response.topics:
            for partition in topic.partitions:
                key = (str(topic.name), int(partition.partition_index))
                if int(partition.error_code) != 0:
                    errors[key] = _error_name(partition.error_code)
                else:
                    watermarks[key] = int(partition.low_watermark)
    return watermarks, errors


def run_on_cluster(
    body: Callable[[ClusterClient], Awaitable[None]], bootstrap: str, prefix: str
) -> None:
    async def main() -> None:
        cluster = ClusterClient(bootstrap)
        try:
            await body(cluster)
        finally:
            await cluster.close()

    try:
        trio.run(main)
    except (OffsetsCommandError, ClientError, OSError) as error:
        print(f"{prefix}{error}", file=sys.stderr)
        raise typer.Exit(1) from None


def get_offsets(
    bootstrap_server: Bootstrap = "localhost:9092",
    topic: Annotated[
        str | None,
        typer.Option("--topic", help="topic name or regular expression (all topics if absent)"),
    ] = None,
    partitions: Annotated[
        str | None,
        typer.Option("--partitions", help="comma-separated partition ids (all if absent)"),
    ] = None,
    topic_partitions: Annotated[
        str | None,
        typer.Option(
            "--topic-partitions",
            help="comma-separated TOPIC_REGEX[:N|:N-M] rules (not with --topic/--partitions)",
        ),
    ] = None,
    time: Annotated[str, typer.Option("--time", help=TIME_HELP)] = "-1",
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal-topics", help="leave out internal topics")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Offsets of partitions at a time (kafka-get-offsets.sh): topic:partition:offset."""

    async def body(cluster: ClusterClient) -> None:
        timestamp = parse_time(time)
        filters = parse_filters(topic, partitions, topic_partitions)
        await cluster.load_metadata()
        chosen = select(list(cluster.leaders), filters, cluster.internal, exclude_internal)
        if not chosen:
            raise OffsetsCommandError(
                "Could not match any topic-partitions with the specified filters"
            )
        offsets, errors = await list_offsets(cluster, chosen, timestamp)
        for (name, partition), error in sorted(errors.items()):
            print(
                f"Skip getting offsets for topic-partition {name}-{partition} due to error: "
                f"{java_exception(error)}",
                file=sys.stderr,
            )
        if as_json:
            emit_json(
                {
                    "partitions": [
                        {"topic": t, "partition": p, "offset": o}
                        for (t, p), o in sorted(offsets.items())
                        if o >= 0
                    ],
                    "errors": [
                        {"topic": t, "partition": p, "error": e}
                        for (t, p), e in sorted(errors.items())
                    ],
                }
            )
            return
        for line in offset_lines(offsets):
            typer.echo(line)

    run_on_cluster(body, bootstrap_server, "Error occurred: ")


def delete_records_command(
    bootstrap_server: Bootstrap = "localhost:9092",
    offset_json_file: Annotated[
        Path | None,
        typer.Option(
            "--offset-json-file",
            help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}',
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete records below an offset (kafka-delete-records.sh)."""

    async def body(cluster: ClusterClient) -> None:
        if offset_json_file is None:
            raise OffsetsCommandError('Missing required argument "[offset-json-file]"')
        try:
            text = offset_json_file.read_text()
        except OSError as error:
            raise OffsetsCommandError(f"cannot read {offset_json_file}: {error}") from None
        targets = parse_offset_json(text)
        if not as_json:
            typer.echo("Executing records delete operation")
        await cluster.load_metadata(sorted({t for t, _, _ in targets}))
        watermarks, errors = await delete_records(cluster, targets)
        if as_json:
            emit_json(
                {
                    "partitions": [
                        {"topic": t, "partition": p, "low_watermark": watermarks[(t, p)]}
                        if (t, p) in watermarks
                        else {"topic": t, "partition": p, "error": errors[(t, p)]}
                        for t, p, _ in targets
                    ]
                }
            )
            return
        typer.echo("Records delete operation completed:")
        for name, partition, _ in targets:
            key = (name, partition)
            if key in watermarks:
                typer.echo(f"partition: {name}-{partition}\tlow_watermark: {watermarks[key]}")
            else:
                typer.echo(f"partition: {name}-{partition}\terror: {java_exception(errors[key])}")

    run_on_cluster(body, bootstrap_server, "Error: ")


def register(app: typer.Typer) -> None:
    app.command("get-offsets")(get_offsets)
    app.command("delete-records")(delete_records_command)
