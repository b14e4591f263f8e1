"""`ktool consume` and `ktool produce`: kafka-console-consumer.sh and kafka-console-producer.sh.

    ktool consume --bootstrap-server H:P --topic T [--partition N] [--offset earliest|latest|N]
        [--from-beginning] [--max-messages N] [--timeout-ms MS] [--property print.key=true ...]
        [--group G]

Records come from Fetch (v4-v12, by topic name, read-uncommitted) at each partition's leader,
partition by partition in turn; control batches and records below the fetch offset (inside a
compressed batch) are skipped. The line of each record is Kafka's DefaultMessageFormatter's:
`print.timestamp` (`CreateTime:ms`, `LogAppendTime:ms`), `print.partition` (`Partition:N`),
`print.offset` (`Offset:N`), `print.headers` (`k:v,k2:v2`, `NO_HEADERS`), `print.key`,
`print.value` (default true), joined by `key.separator` (a tab), `null` for a missing key,
value or header value; `headers.separator`, `headers.key.separator`, `null.literal` change
those. "Processed a total of N messages" goes to stderr at the end, as Kafka's does.

`--group G` starts each partition at G's committed offset (else where `--from-beginning` or
the default latest says, like `auto.offset.reset`; an explicit `--offset` wins) and commits
the next offset after the last record printed every 5 s and at the end (also on Ctrl-C or an
error), with OffsetCommit as a standalone consumer (generation -1, no member id): what
Kafka's console consumer commits for `--partition`, and offsets Kafka's tools and clients
resume from. ktool does NOT join the group (no JoinGroup/SyncGroup/heartbeats): two ktool
consumers of one group both read every partition, and a group with active members refuses
the commit (UNKNOWN_MEMBER_ID/ILLEGAL_GENERATION, printed). Kafka's tool commits its
consumer's position, which may lie past the last record printed with `--max-messages`;
ktool commits exactly after the last one printed.

Differences from Kafka's tool: without `--partition` the partitions are read in turn, not
through a consumer group membership, so records of different partitions interleave
differently; `--timeout-ms` ends quietly (exit 0) after that long without a record.
Not implemented: `--include` regex, `--isolation-level read_committed`, custom formatters
and deserializers.

    ktool produce --bootstrap-server H:P --topic T [--reader-property parse.key=true
        --reader-property key.separator=:] < lines

    ktool produce ... [--reader-property parse.headers=true] [--compression-codec zstd]
        [--batch-size BYTES]

Each stdin line is a record, read as Kafka's LineMessageReader reads it (`LineReader`):
`[headers<headers.delimiter>][key<key.separator>]value`, with `parse.headers`,
`headers.delimiter` (tab), `headers.separator` (`,`, a regular expression as in Java),
`headers.key.separator` (`:`), `parse.key`, `key.separator` (tab), `null.marker` and
`ignore.error`; a line missing a separator is refused with Kafka's message. A keyed record
goes to Kafka's default partition, murmur2(key) & 0x7fffffff modulo the partition count (the
Java client's hash, so the same keys land where Kafka's tool puts them); a record without
key goes round robin. Records are grouped per partition into batches of up to
`--batch-size` bytes (Kafka's `batch.size`, 16384), compressed with `--compression-codec`
(none, gzip, snappy, lz4, zstd; Kafka's tool also accepts the option without a value,
meaning gzip: ktool needs the value), one Produce (v3-v9, v7+ for zstd, acks=-1 like the
tool's default) per batch, each partition's records in input order.
Not implemented: Kafka's sticky partitioner for keyless records, `--sync`, `--timeout`
(linger: stdin is read to its end first), `--request-required-acks`.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Final

import trio
import typer

from trafka.log.batch import CompressionType, entry_size_at
from trafka.log.errors import CorruptRecordError
from trafka.log.record_model import NewRecord, Record, RecordHeader
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
    """A stdin line as (key, value), as LineMessageReader reads it (no headers)."""
    record = LineReader(parse_key=parse_key, key_separator=separator).read(line, number)
    assert record.value is not None
    return record.key, record.value


@dataclass(frozen=True, slots=True)
class LineReader:
    """kafka-console-producer.sh's LineMessageReader, from its --reader-property settings.

    A line is `[headers<headers.delimiter>][key<key.separator>]value`; headers are
    `k:v` pairs split by `headers.separator` (a regular expression, as Java's
    `Pattern.split`: trailing empty pieces dropped), key and value by
    `headers.key.separator`. A key, value, header list or header value equal to
    `null.marker` is null (a header key may not be). `ignore.error=true`: a missing
    separator leaves that part out instead of refusing the line."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, values: dict[str, str]) -> LineReader:
        def flag(name: str) -> bool:
            return values.get(name, "false").strip().lower() == "true"

        reader = cls(
            parse_key=flag("parse.key"),
            key_separator=_unescape(values.get("key.separator", "\t")),
            parse_headers=flag("parse.headers"),
            headers_delimiter=_unescape(values.get("headers.delimiter", "\t")),
            headers_separator=_unescape(values.get("headers.separator", ",")),
            headers_key_separator=_unescape(values.get("headers.key.separator", ":")),
            ignore_error=flag("ignore.error"),
            null_marker=None if "null.marker" not in values else _unescape(values["null.marker"]),
        )
        reader.check()
        return reader

    def check(self) -> None:
        """Kafka's refusals of separators that would make a line ambiguous."""
        pairs = [
            (
                "headers.delimiter",
                self.headers_delimiter,
                "headers.separator",
                self.headers_separator,
            ),
            (
                "headers.delimiter",
                self.headers_delimiter,
                "headers.key.separator",
                self.headers_key_separator,
            ),
            (
                "headers.separator",
                self.headers_separator,
                "headers.key.separator",
                self.headers_key_separator,
            ),
        ]
        for first, a, second, b in pairs:
            if a == b:
                raise OffsetsCommandError(f"{first} and {second} may not be equal")
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.separator", self.headers_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if value == self.null_marker:
                raise OffsetsCommandError(f"null.marker and {name} may not be equal")
        try:
            re.compile(self.headers_separator)
        except re.error as error:
            raise OffsetsCommandError(f"invalid headers.separator: {error}") from None

    def _part(
        self, enabled: bool, line: str, start: int, separator: str, name: str, number: int
    ) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise OffsetsCommandError(f"No {name} found on line number {number}: '{line}'")
        return line[start:index]

    def _text(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode()

    def read(self, line: str, number: int) -> NewRecord:
        """One line as a record (no timestamp: the caller stamps it)."""
        headers = self._part(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", number
        )
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(
            self.parse_key, line, header_end, self.key_separator, "key separator", number
        )
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        parsed: tuple[RecordHeader, ...] = ()
        if headers is not None and headers != self.null_marker:
            parsed = tuple(self._header(pair, line, number) for pair in self._pairs(headers))
        return NewRecord(value=self._text(value), key=self._text(key), headers=parsed)

    def _pairs(self, headers: str) -> list[str]:
        pieces = re.split(self.headers_separator, headers)
        while len(pieces) > 1 and pieces[-1] == "":
            pieces.pop()  # Java's String.split drops trailing empty strings
        return pieces

    def _header(self, pair: str, line: str, number: int) -> RecordHeader:
        name, found, value = pair.partition(self.headers_key_separator)
        if not found:
            if self.ignore_error:
                return RecordHeader(pair, None)
            raise OffsetsCommandError(
                f"No header key separator found in pair '{pair}' on line number {number}"
            )
        if name == self.null_marker:
            raise OffsetsCommandError(
                f"Header keys should not be equal to the null marker '{self.null_marker}' as "
                "they can't be null"
            )
        return RecordHeader(name, None if value == self.null_marker else value.encode())


COMPRESSION_CODECS: Final = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


def compression_of(codec: str) -> CompressionType:
    """`--compression-codec`: Kafka's names (case-insensitive)."""
    try:
        return COMPRESSION_CODECS[codec.strip().lower()]
    except KeyError:
        raise OffsetsCommandError(
            f"Unknown compression codec '{codec}': none, gzip, snappy, lz4 or zstd"
        ) from None


def batches_of(
    records: list[tuple[int, NewRecord]], batch_size_bytes: int
) -> list[tuple[int, list[NewRecord]]]:
    """(partition, record) in input order -> batches of up to `batch_size_bytes` (an
    estimate of the uncompressed record bytes; at least one record each), each partition's
    records in input order, batches ordered by their first record (as the Java producer's
    accumulator fills one open batch per partition, `batch.size`)."""
    open_batches: dict[int, tuple[int, list[NewRecord]]] = {}  # partition -> (first, records)
    sizes: dict[int, int] = {}
    done: list[tuple[int, int, list[NewRecord]]] = []
    for index, (partition, record) in enumerate(records):
        size = _record_size(record)
        if partition in open_batches and sizes[partition] + size > batch_size_bytes:
            first, full = open_batches.pop(partition)
            done.append((first, partition, full))
        if partition not in open_batches:
            open_batches[partition] = (index, [])
            sizes[partition] = 0
        open_batches[partition][1].append(record)
        sizes[partition] += size
    done += [(first, partition, batch) for partition, (first, batch) in open_batches.items()]
    return [(partition, batch) for _, partition, batch in sorted(done, key=lambda d: d[0])]


def _record_size(record: NewRecord) -> int:
    return (
        len(record.key or b"")
        + len(record.value or b"")
        + sum(len(h.key) + len(h.value or b"") for h in record.headers)
        + 8
    )


def produce(
    topic: Annotated[str, typer.Option("--topic", help="The topic to write.")],
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of brokers, comma separated.")
    ] = "localhost:9092",
    properties: Annotated[
        list[str] | None,
        typer.Option("--reader-property", "--property", help="Reader setting name=value."),
    ] = None,
    compression_codec: Annotated[
        str,
        typer.Option("--compression-codec", help="none, gzip, snappy, lz4 or zstd."),
    ] = "none",
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", help="Bytes of records per batch (per partition)."),
    ] = 16384,
) -> None:
    """Write stdin's lines as records, like kafka-console-producer.sh."""
    values: dict[str, str] = {}
    for item in properties or []:
        name, equals, value = item.partition("=")
        if not equals:
            typer.echo(f"Invalid property {item!r} (want name=value)", err=True)
            raise typer.Exit(1)
        values[name.strip()] = value
    try:
        reader = LineReader.from_properties(values)
        compression = compression_of(compression_codec)
    except OffsetsCommandError as error:
        typer.echo(f"ERROR {error}", err=True)
        raise typer.Exit(1) from None
    lines = sys.stdin.read().splitlines()

    async def body(cluster: ClusterClient) -> None:
        await cluster.load_metadata([topic])
        partitions = sorted(p for t, p in cluster.leaders if t == topic)
        if not partitions:
            raise OffsetsCommandError(f"topic '{topic}' does not exist")
        next_round_robin = 0
        routed: list[tuple[int, NewRecord]] = []
        for number, line in enumerate(lines, start=1):
            record = reader.read(line, number)
            if record.key is None:
                partition = partitions[next_round_robin % len(partitions)]
                next_round_robin += 1
            else:
                partition = key_partition(record.key, len(partitions))
            routed.append((partition, record))
        for partition, records in batches_of(routed, batch_size):
            now = int(time.time() * 1000)
            stamped = [
                NewRecord(value=r.value, key=r.key, headers=r.headers, timestamp=now)
                for r in records
            ]
            batch = build_batch(stamped, compression=compression)
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
                7 if compression is CompressionType.ZSTD else 3,  # zstd needs v7 (KIP-110)
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


AUTO_COMMIT_INTERVAL_S: Final = 5.0
"""`--group`: how often positions are committed while reading (the Java consumer's
`auto.commit.interval.ms` default), besides once at the end."""
COORDINATOR_WAIT_S: Final = 15.0
ACTIVE_MEMBERS_NOTE: Final = (
    " (the group has active members; ktool commits only to a group without)"
)
"""After ILLEGAL_GENERATION (22) or UNKNOWN_MEMBER_ID (25) to a standalone commit."""


class GroupOffsets:
    """`consume --group`: the group's committed offsets as start positions, and commits of
    the positions read, as a standalone consumer (OffsetCommit with generation -1 and no
    member id, what Kafka's consumer sends for `assign()`ed partitions). ktool does not join
    the group: a group with active members refuses the commit (Kafka's error is printed)."""

    def __init__(self, cluster: ClusterClient, group: str, topic: str) -> None:
        self.cluster, self.group, self.topic = cluster, group, topic
        self._address: tuple[str, int] | None = None

    async def coordinator(self) -> tuple[str, int]:
        if self._address is not None:
            return self._address
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            response = await self.cluster.call(
                self.cluster.bootstrap[0],
                ApiKey.FIND_COORDINATOR,
                {"key": self.group, "key_type": 0},
                3,
            )
            code = int(response.error_code)
            if code == 0:
                self._address = (str(response.host), int(response.port))
                return self._address
            if code != 15 or time.monotonic() > deadline:  # 15: COORDINATOR_NOT_AVAILABLE
                raise OffsetsCommandError(
                    f"cannot find the coordinator of group '{self.group}': error {code}"
                )
            await trio.sleep(0.2)

    async def committed(self, partitions: list[int]) -> dict[int, int]:
        response = await self.cluster.call(
            await self.coordinator(),
            ApiKey.OFFSET_FETCH,
            {
                "group_id": self.group,
                "topics": [{"name": self.topic, "partition_indexes": partitions}],
                "require_stable": False,
            },
            7,
            1,
        )
        if int(getattr(response, "error_code", 0)) != 0:
            raise OffsetsCommandError(
                f"cannot fetch the offsets of group '{self.group}': "
                f"error {int(response.error_code)}"
            )
        return {
            int(p.partition_index): int(p.committed_offset)
            for t in response.topics
            for p in t.partitions
            if int(p.error_code) == 0 and int(p.committed_offset) >= 0
        }

    async def commit(self, positions: dict[int, int]) -> None:
        if not positions:
            return
        response = await self.cluster.call(
            await self.coordinator(),
            ApiKey.OFFSET_COMMIT,
            {
                "group_id": self.group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": self.topic,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": offset,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                            for p, offset in sorted(positions.items())
                        ],
                    }
                ],
            },
            8,
            5,  # v5+: no retention time field (the broker's offsets.retention.minutes)
        )
        for topic in response.topics:
            for p in topic.partitions:
                if int(p.error_code) != 0:
                    raise OffsetsCommandError(
                        f"commit of {self.topic}-{int(p.partition_index)} for group "
                        f"'{self.group}' failed: error {int(p.error_code)}"
                        + (ACTIVE_MEMBERS_NOTE if int(p.error_code) in (22, 25) else "")
                    )


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
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            help="Start at the group's committed offsets and commit the positions read "
            "(standalone: ktool does not join the group).",
        ),
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
        await cluster.load_metadata([topic])
        partitions = sorted(p for t, p in cluster.leaders if t == topic)
        if not partitions:
            raise OffsetsCommandError(f"topic '{topic}' does not exist")
        if partition is not None:
            if partition not in partitions:
                raise OffsetsCommandError(f"partition {topic}-{partition} does not exist")
            partitions = [partition]
        offsets = None if group is None else GroupOffsets(cluster, group, topic)
        committed: dict[int, int] = {}
        if offsets is not None and offset is None:
            committed = await offsets.committed(partitions)
        positions = {
            p: committed[p] if p in committed else await _resolve(cluster, topic, p, start)
            for p in partitions
        }
        consumed = dict(positions)  # the next offset to commit per partition
        if offsets is None:
            await _read(cluster, positions, consumed, partitions)
            return
        try:
            await _read(cluster, positions, consumed, partitions, offsets)
        finally:
            with trio.CancelScope(shield=True):
                await offsets.commit(consumed)

    async def _read(
        cluster: ClusterClient,
        positions: dict[int, int],
        consumed: dict[int, int],
        partitions: list[int],
        offsets: GroupOffsets | None = None,
    ) -> None:
        nonlocal printed
        last_record = last_commit = time.monotonic()
        while max_messages is None or printed < max_messages:
            if offsets is not None and time.monotonic() - last_commit >= AUTO_COMMIT_INTERVAL_S:
                await offsets.commit(consumed)
                last_commit = time.monotonic()
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
                        consumed[p] = max(consumed[p], batch.header.next_offset)
                        continue
                    for record in batch.records:
                        if record.offset < fetched_from:
                            continue  # inside a compressed batch that starts earlier
                        if max_messages is not None and printed >= max_messages:
                            return
                        line = formatter.line(record, p, int(batch.header.timestamp_type))
                        sys.stdout.write(line + "\n")
                        printed += 1
                        consumed[p] = record.offset + 1
                        got = True
                    consumed[p] = max(consumed[p], batch.header.next_offset)
            sys.stdout.flush()
            if got:
                last_record = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                return

    run_on_cluster(body, bootstrap_server, "ERROR ")
    typer.echo(f"Processed a total of {printed} messages", err=True)
