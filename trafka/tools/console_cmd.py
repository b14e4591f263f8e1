"""`ktool consume` and `ktool produce`: kafka-console-consumer.sh and kafka-console-producer.sh.

    ktool consume --bootstrap-server H:P --topic T [--partition N] [--offset earliest|latest|N]
        [--from-beginning] [--max-messages N] [--timeout-ms MS] [--property print.key=true ...]

Records come from Fetch (v4-v12, by topic name, read-uncommitted) at each partition's leader,
partition by partition in turn; control batches and records below the fetch offset (inside a
compressed batch) are skipped. The line of each record is Kafka's DefaultMessageFormatter's:
`print.timestamp` (`CreateTime:ms`, `LogAppendTime:ms`), `print.partition` (`Partition:N`),
`print.offset` (`Offset:N`), `print.headers` (`k:v,k2:v2`, `NO_HEADERS`), `print.key`,
`print.value` (default true), joined by `key.separator` (a tab), `null` for a missing key,
value or header value; `headers.separator`, `headers.key.separator`, `null.literal` change
those. "Processed a total of N messages" goes to stderr at the end, as Kafka's does.

Differences from Kafka's tool: without `--partition` the partitions are read in turn, not
through a consumer group (no `--group`, no commits), so records of different partitions
interleave differently; `--timeout-ms` ends quietly (exit 0) after that long without a record.
Not implemented: `--group`, `--include` regex, `--isolation-level read_committed`, custom
formatters and deserializers.

    ktool produce --bootstrap-server H:P --topic T [--reader-property parse.key=true
        --reader-property key.separator=:] < lines

Each stdin line is a record (its value; with `parse.key=true` the text before the first
`key.separator`, a tab by default, is the key, and a line without it is refused as Kafka's
LineMessageReader refuses it). A keyed record goes to Kafka's default partition,
murmur2(key) & 0x7fffffff modulo the partition count (the Java client's hash, so the same
keys land where Kafka's tool puts them); a record without key goes round robin. Records are
sent one Produce (v3-v9, acks=-1, like the tool's default) per line, in order.
Not implemented: `parse.headers`, `--compression-codec`, `--sync`/batching settings,
`ignore.error`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

import typer

from trafka.log.batch import entry_size_at
from trafka.log.errors import CorruptRecordError
from trafka.log.record_model import NewRecord, Record
from trafka.log.records import build_batch, iter_batches
from trafka.net.api_keys import ApiKey
from trafka.tools.offsets_cmd import ClusterClient, OffsetsCommandError, run_on_cluster

_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Formatter:
    """kafka-console-consumer.sh's DefaultMessageFormatter, from its --property settings."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, properties: list[str]) -> Formatter:
        values: dict[str, str] = {}
        for item in properties:
            name, equals, value = item.partition("=")
            if not equals:
                raise OffsetsCommandError(f"Invalid property {item!r} (want name=value)")
            values[name.strip()] = value

        def flag(name: str, default: bool) -> bool:
            return values.get(name, str(default)).strip().lower() == "true"

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=_unescape(values.get("key.separator", "\t")),
            headers_separator=_unescape(values.get("headers.separator", ",")),
            headers_key_separator=_unescape(values.get("headers.key.separator", ":")),
            null_literal=values.get("null.literal", "null"),
        )

    def line(self, record: Record, partition: int, timestamp_type: int) -> str:
        parts: list[str] = []
        if self.print_timestamp:
            if record.timestamp < 0:
                parts.append("NO_TIMESTAMP")
            else:
                parts.append(
                    f"{_TIMESTAMP_TYPES.get(timestamp_type, 'CreateTime')}:{record.timestamp}"
                )
        if self.print_partition:
            parts.append(f"Partition:{partition}")
        if self.print_offset:
            parts.append(f"Offset:{record.offset}")
        if self.print_headers:
            if record.headers:
                parts.append(
                    self.headers_separator.join(
                        f"{h.key}{self.headers_key_separator}{self._text(h.value)}"
                        for h in record.headers
                    )
                )
            else:
                parts.append("NO_HEADERS")
        if self.print_key:
            parts.append(self._text(record.key))
        if self.print_value:
            parts.append(self._text(record.value))
        return self.key_separator.join(parts)

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", errors="replace")


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (the Java client's key hash), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def key_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def parse_line(
    line: str, number: int, parse_key: bool, separator: str
) -> tuple[bytes | None, bytes]:
    """A stdin line as (key, value), as LineMessageReader reads it."""
    if not parse_key:
        return None, line.encode()
    key, found, value = line.partition(separator)
    if not found:
        raise OffsetsCommandError(f"No key separator found on line number {number}: '{line}'")
    return key.encode(), value.encode()


def produce(
    topic: Annotated[str, typer.Option("--topic", help="The topic to write.")],
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of brokers, comma separated.")
    ] = "localhost:9092",
    properties: Annotated[
        list[str] | None,
        typer.Option("--reader-property", "--property", help="Reader setting name=value."),
    ] = None,
) -> None:
    """Write stdin's lines as records, like kafka-console-producer.sh."""
    values: dict[str, str] = {}
    for item in properties or []:
        name, equals, value = item.partition("=")
        if not equals:
            typer.echo(f"Invalid property {item!r} (want name=value)", err=True)
            raise typer.Exit(1)
        values[name.strip()] = value
    parse_key = values.get("parse.key", "false").strip().lower() == "true"
    separator = _unescape(values.get("key.separator", "\t"))
    lines = sys.stdin.read().splitlines()

    async def body(cluster: ClusterClient) -> None:
        await cluster.load_metadata([topic])
        partitions = sorted(p for t, p in cluster.leaders if t == topic)
        if not partitions:
            raise OffsetsCommandError(f"topic '{topic}' does not exist")
        next_round_robin = 0
        for number, line in enumerate(lines, start=1):
            key, value = parse_line(line, number, parse_key, separator)
            if key is None:
                partition = partitions[next_round_robin % len(partitions)]
                next_round_robin += 1
            else:
                partition = key_partition(key, len(partitions))
            now = int(time.time() * 1000)
            batch = build_batch([NewRecord(value=value, key=key, timestamp=now)])
            response = await cluster.call(
                _leader(cluster, topic, partition),
                ApiKey.PRODUCE,
                {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout": timedelta(seconds=30),
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
                    ],
                },
                9,
                3,
            )
            answer = response.responses[0].partition_responses[0]
            if int(answer.error_code) != 0:
                raise OffsetsCommandError(
                    f"producing to {topic}-{partition} failed: error {int(answer.error_code)}"
                )

    run_on_cluster(body, bootstrap_server, "ERROR ")


def _whole_entries(data: bytes) -> bytes:
    """`data` without the partial batch a Fetch answer may end with."""
    pos = 0
    while pos + 12 <= len(data):
        size = entry_size_at(data, pos)
        if pos + size > len(data):
            break
        pos += size
    return data[:pos]


def _unescape(text: str) -> str:
    return text.replace("\\t", "\t").replace("\\n", "\n")


def _start_offset(offset: str | None, from_beginning: bool) -> int:
    """-2 earliest, -1 latest, or an offset."""
    if offset is None:
        return -2 if from_beginning else -1
    if offset == "earliest":
        return -2
    if offset == "latest":
        return -1
    try:
        value = int(offset)
    except ValueError:
        raise OffsetsCommandError(
            f"The provided offset value '{offset}' is incorrect. Valid values are "
            "'earliest', 'latest', or a non-negative long."
        ) from None
    if value < 0:
        raise OffsetsCommandError(
            f"The provided offset value '{offset}' is incorrect. Valid values are "
            "'earliest', 'latest', or a non-negative long."
        )
    return value


def _leader(cluster: ClusterClient, topic: str, partition: int) -> tuple[str, int]:
    leader = cluster.leaders.get((topic, partition), -1)
    if leader not in cluster.brokers:
        raise OffsetsCommandError(f"{topic}-{partition} has no leader")
    return cluster.brokers[leader]


async def _resolve(cluster: ClusterClient, topic: str, partition: int, position: int) -> int:
    if position >= 0:
        return position
    leader = _leader(cluster, topic, partition)
    response = await cluster.call(
        leader,
        ApiKey.LIST_OFFSETS,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": position}],
                }
            ],
        },
        7,
        1,
    )
    answer = response.topics[0].partitions[0]
    if int(answer.error_code) != 0:
        raise OffsetsCommandError(
            f"cannot find the start of {topic}-{partition}: error {int(answer.error_code)}"
        )
    return int(answer.offset)


def consume(
    topic: Annotated[str, typer.Option("--topic", help="The topic to read.")],
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of brokers, comma separated.")
    ] = "localhost:9092",
    partition: Annotated[
        int | None, typer.Option("--partition", help="Only this partition.")
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option("--offset", help="earliest, latest or an offset (needs --partition)."),
    ] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest offset.")
    ] = False,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", help="Stop after this many records.")
    ] = None,
    timeout_ms: Annotated[
        int | None, typer.Option("--timeout-ms", help="Stop after this long without a record.")
    ] = None,
    properties: Annotated[
        list[str] | None,
        typer.Option("--property", "--formatter-property", help="Formatter setting name=value."),
    ] = None,
) -> None:
    """Print a topic's records, like kafka-console-consumer.sh."""
    if offset is not None and partition is None:
        typer.echo("The partition is required when offset is specified.", err=True)
        raise typer.Exit(1)
    if offset is not None and from_beginning:
        typer.echo("Options from-beginning and offset cannot be specified together.", err=True)
        raise typer.Exit(1)
    try:
        formatter = Formatter.from_properties(list(properties or []))
        start = _start_offset(offset, from_beginning)
    except OffsetsCommandError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    printed = 0

    async def body(cluster: ClusterClient) -> None:
        nonlocal printed
        await cluster.load_metadata([topic])
        partitions = sorted(p for t, p in cluster.leaders if t == topic)
        if not partitions:
            raise OffsetsCommandError(f"topic '{topic}' does not exist")
        if partition is not None:
            if partition not in partitions:
                raise OffsetsCommandError(f"partition {topic}-{partition} does not exist")
            partitions = [partition]
        positions = {p: await _resolve(cluster, topic, p, start) for p in partitions}
        last_record = time.monotonic()
        while max_messages is None or printed < max_messages:
            got = False
            for p in partitions:
                leader = _leader(cluster, topic, p)
                response = await cluster.call(
                    leader,
                    ApiKey.FETCH,
                    {
                        "replica_id": -1,
                        "max_wait": timedelta(milliseconds=500),
                        "min_bytes": 1,
                        "max_bytes": 52428800,
                        "isolation_level": 0,
                        "session_id": 0,
                        "session_epoch": -1,
                        "topics": [
                            {
                                "topic": topic,
                                "partitions": [
                                    {
                                        "partition": p,
                                        "current_leader_epoch": -1,
                                        "fetch_offset": positions[p],
                                        "last_fetched_epoch": -1,
                                        "log_start_offset": -1,
                                        "partition_max_bytes": 1048576,
                                    }
                                ],
                            }
                        ],
                        "forgotten_topics_data": [],
                        "rack_id": "",
                    },
                    12,
                    4,
                )
                answer = response.responses[0].partitions[0]
                if int(answer.error_code) != 0:
                    raise OffsetsCommandError(
                        f"fetching {topic}-{p} failed: error {int(answer.error_code)}"
                    )
                data = bytes(answer.records or b"")
                try:
                    batches = list(iter_batches(_whole_entries(data)))
                except CorruptRecordError as error:
                    raise OffsetsCommandError(f"corrupt records in {topic}-{p}: {error}") from None
                fetched_from = positions[p]
                for batch in batches:
                    positions[p] = max(positions[p], batch.header.next_offset)
                    if batch.header.is_control:
                        continue
                    for record in batch.records:
                        if record.offset < fetched_from:
                            continue  # inside a compressed batch that starts earlier
                        if max_messages is not None and printed >= max_messages:
                            return
                        line = formatter.line(record, p, int(batch.header.timestamp_type))
                        sys.stdout.write(line + "\n")
                        printed += 1
                        got = True
            sys.stdout.flush()
            if got:
                last_record = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                return

    run_on_cluster(body, bootstrap_server, "ERROR ")
    typer.echo(f"Processed a total of {printed} messages", err=True)
