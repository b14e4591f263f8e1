"""Kafka's log-dir layout, read from disk for the audit jobs (no Spark in this module).

A log dir (`log.dirs` entry) looks like Kafka's::

    <logdir>/meta.properties                      node.id=1 / broker.id=1, cluster.id=...
    <logdir>/replication-offset-checkpoint        high watermarks (text, below)
    <logdir>/recovery-point-offset-checkpoint     same format
    <logdir>/<topic>-<partition>/<20-digit base offset>.log   record batches / message sets
    <logdir>/<topic>-<partition>/<20-digit base offset>.index offset index (8-byte entries)
    <logdir>/<topic>-<partition>/<20-digit base offset>.timeindex

Offset checkpoint files are text: a version line (`0`), a count line, then
`<topic> <partition> <offset>` per line (Kafka's `OffsetCheckpointFile`).

A time index entry is 12 bytes: the segment's max timestamp so far (int64) and the relative
offset (int32) of the batch holding it; entries increase in both.

An offset index entry is 8 bytes: relative offset (int32, offset - segment base offset) and
physical position (int32) of the batch holding that offset. Kafka preallocates index files
and trims them on close, so a live index can end in zero entries; reading stops at the first
entry that does not increase.

Directories of deleted topics (`<topic>-<partition>.<uuid>-delete`) and future replicas
(`...-future`) are skipped: they are not part of the live log.

This module only reads: the Spark data source (`trafka.spark.source`) and the checks
(`trafka.spark.checks`) build on it. The byte-range splitting here walks batch headers
(12 bytes each) only; records are decoded by `trafka.log.records` in the workers.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NewType

BrokerId = NewType("BrokerId", int)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
META_PROPERTIES = "meta.properties"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"

UNKNOWN_BROKER = BrokerId(-1)
"""The broker column when a log dir has no readable meta.properties."""

DEFAULT_SPLIT_BYTES = 32 << 20
"""Input partitions cut a segment into byte ranges of about this size, at batch boundaries."""

MAX_CHECKPOINT_BYTES = 64 << 20
MAX_PROPERTIES_BYTES = 1 << 20
MAX_INDEX_ENTRIES = 1 << 24

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT_NAME = re.compile(r"^(?P<base>\d{20})\.log$")
_OFFSET_AND_SIZE = struct.Struct(">qi")
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")
_LOG_OVERHEAD = 12


@dataclass(frozen=True, slots=True)
class LogDir:
    """One `log.dirs` entry and the broker it belongs to (from meta.properties)."""

    path: str
    broker: BrokerId
    cluster_id: str | None


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One `.log` file of one partition replica."""

    log_dir: str
    broker: BrokerId
    topic: str
    partition: int
    base_offset: int
    path: str
    size_bytes: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def index_path(self) -> str:
        return self.path[: -len(LOG_SUFFIX)] + INDEX_SUFFIX

    @property
    def time_index_path(self) -> str:
        return self.path[: -len(LOG_SUFFIX)] + TIME_INDEX_SUFFIX


@dataclass(frozen=True, slots=True)
class ByteRange:
    """`[start, end)` of a segment: whole batches, except that a torn tail stays in the
    last range so the reader reports it instead of silently dropping it."""

    segment: SegmentFile
    start: int
    end: int


def read_properties(path: str) -> dict[str, str]:
    """Java `.properties` (the subset Kafka writes: `key=value`, `#` comments)."""
    with open(path, "rb") as handle:
        text = handle.read(MAX_PROPERTIES_BYTES).decode("utf-8", errors="replace")
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


def open_log_dir(path: str) -> LogDir:
    """The log dir at `path` with its broker id (`node.id`, else `broker.id`) if known."""
    broker = UNKNOWN_BROKER
    cluster_id: str | None = None
    meta = os.path.join(path, META_PROPERTIES)
    if os.path.isfile(meta):
        props = read_properties(meta)
        raw = props.get("node.id", props.get("broker.id"))
        if raw is not None and raw.lstrip("-").isdigit():
            broker = BrokerId(int(raw))
        cluster_id = props.get("cluster.id")
    return LogDir(path=path, broker=broker, cluster_id=cluster_id)


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """`{(topic, partition): offset}` from an offset checkpoint file; {} if missing.

    Malformed lines are skipped (the checks report what they can rather than crash).
    """
    if not os.path.isfile(path):
        return {}
    with open(path, "rb") as handle:
        lines = handle.read(MAX_CHECKPOINT_BYTES).decode("utf-8", errors="replace").splitlines()
    result: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 3:
            continue
        topic, partition, offset = fields
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            continue
    return result


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything else (deleted/future dirs, files)."""
    if name.endswith(("-delete", "-future", "-stray")):
        return None
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))


def list_segments(
    log_dirs: Iterable[LogDir], topics: frozenset[str] | None = None
) -> list[SegmentFile]:
    """Every `.log` segment under the log dirs, sorted by (topic, partition, broker, base)."""
    segments: list[SegmentFile] = []
    for log_dir in log_dirs:
        if not os.path.isdir(log_dir.path):
            raise FileNotFoundError(f"log dir {log_dir.path} does not exist")
        for entry in sorted(os.listdir(log_dir.path)):
            parsed = parse_partition_dir(entry)
            partition_path = os.path.join(log_dir.path, entry)
            if parsed is None or not os.path.isdir(partition_path):
                continue
            topic, partition = parsed
            if topics is not None and topic not in topics:
                continue
            for name in sorted(os.listdir(partition_path)):
                match = _SEGMENT_NAME.match(name)
                if match is None:
                    continue
                path = os.path.join(partition_path, name)
                segments.append(
                    SegmentFile(
                        log_dir=log_dir.path,
                        broker=log_dir.broker,
                        topic=topic,
                        partition=partition,
                        base_offset=int(match.group("base")),
                        path=path,
                        size_bytes=os.path.getsize(path),
                    )
                )
    segments.sort(key=lambda s: (s.topic, s.partition, s.broker, s.log_dir, s.base_offset))
    return segments


def batch_positions(path: str, size_bytes: int) -> tuple[list[int], int]:
    """Start positions of the entries (batches or legacy messages) of a segment, and the
    position where framing ends (== size_bytes for a clean segment; less for a torn tail
    or a corrupt length field). Reads 12 bytes per entry."""
    positions: list[int] = []
    pos = 0
    with open(path, "rb") as handle:
        while pos + _LOG_OVERHEAD <= size_bytes:
            handle.seek(pos)
            head = handle.read(_LOG_OVERHEAD)
            if len(head) < _LOG_OVERHEAD:
                break
            length = _OFFSET_AND_SIZE.unpack(head)[1]
            # A legacy message is at least 14 bytes after the length field; v2 at least 49.
            if length < 14 or pos + _LOG_OVERHEAD + length > size_bytes:
                break
            positions.append(pos)
            pos += _LOG_OVERHEAD + length
    return positions, pos


def split_segment(segment: SegmentFile, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[ByteRange]:
    """Byte ranges of about `split_bytes`, cut at batch boundaries, covering the file."""
    if segment.size_bytes == 0:
        return []
    if segment.size_bytes <= split_bytes:
        return [ByteRange(segment, 0, segment.size_bytes)]
    positions, _framed_end = batch_positions(segment.path, segment.size_bytes)
    ranges: list[ByteRange] = []
    start = 0
    for pos in positions:
        if pos - start >= split_bytes:
            ranges.append(ByteRange(segment, start, pos))
            start = pos
    ranges.append(ByteRange(segment, start, segment.size_bytes))
    return ranges


def read_time_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """`(timestamp, absolute offset)` entries of a time index (12 bytes each: timestamp
    int64, relative offset int32), stopping at the first entry that does not increase both
    (preallocated zeros)."""
    if not os.path.isfile(path):
        return []
    with open(path, "rb") as handle:
        data = handle.read(MAX_INDEX_ENTRIES * _TIME_INDEX_ENTRY.size)
    entries: list[tuple[int, int]] = []
    usable = len(data) - len(data) % _TIME_INDEX_ENTRY.size
    for timestamp, relative in _TIME_INDEX_ENTRY.iter_unpack(data[:usable]):
        if timestamp == 0 and relative == 0:
            break
        if entries and (timestamp <= entries[-1][0] or base_offset + relative <= entries[-1][1]):
            break
        entries.append((timestamp, base_offset + relative))
    return entries


def read_offset_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """`(absolute offset, position)` entries of an offset index, stopping at preallocated
    zeros (an entry that does not increase the offset)."""
    if not os.path.isfile(path):
        return []
    with open(path, "rb") as handle:
        data = handle.read(MAX_INDEX_ENTRIES * _INDEX_ENTRY.size)
    entries: list[tuple[int, int]] = []
    usable = len(data) - len(data) % _INDEX_ENTRY.size
    for relative, position in _INDEX_ENTRY.iter_unpack(data[:usable]):
        if entries and relative + base_offset <= entries[-1][0]:
            break
        entries.append((base_offset + relative, position))
    return entries


def pack_ranges(ranges: Iterable[ByteRange], split_bytes: int) -> list[list[ByteRange]]:
    """Group consecutive ranges into input partitions of about `split_bytes`, so many small
    segments (or partitions) do not each cost a Spark task."""
    groups: list[list[ByteRange]] = []
    current: list[ByteRange] = []
    current_bytes = 0
    for byte_range in ranges:
        size = byte_range.end - byte_range.start
        if current and current_bytes + size > split_bytes:
            groups.append(current)
            current, current_bytes = [], 0
        current.append(byte_range)
        current_bytes += size
    if current:
        groups.append(current)
    return groups
