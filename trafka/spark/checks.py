"""The audit checks: compare replicas, offsets, indexes and metadata (`ktool audit check`).

Every check yields `Violation`s naming topic, partition, broker and offset:

==================================  =========================================================
check                               violation when
==================================  =========================================================
`corrupt_batch`                     a batch's stored CRC does not match its bytes, or the
                                    entry cannot be framed/decoded (torn tail, bad codec)
`replica_divergence`                below the high watermark, the batch at a base offset
                                    differs (whole-batch CRC-32C digest) from the majority of
                                    replicas; `offset` is the first record that differs.
                                    Compacted topics: per record (cleaners run per broker)
`offset_overlap`                    a batch starts at or below the previous batch's last
                                    offset in the same replica (duplicate / non-monotonic)
`offset_gap`                        a batch starts above previous last offset + 1 on a topic
                                    that is not compacted (`cleanup.policy` from metadata;
                                    `__consumer_offsets`/`__transaction_state` always are)
`segment_base_offset`               a segment's first batch starts below the file's name
`index_mismatch`                    an offset index entry's position is not a batch boundary,
                                    or the batch there does not hold the entry's offset
`time_index_mismatch`               a time index entry's offset is in no batch, or (v2) that
                                    batch's maxTimestamp is not the entry's timestamp
`isr_below_high_watermark`          an ISR member (metadata) whose log ends below the HW
`replica_below_high_watermark`      (warning) any replica whose log ends below the HW
`committed_offset_beyond_log_end`   (warning) a group's latest committed offset is above the
                                    log end of that partition (largest across the replicas
                                    found): client data, legal in Kafka, not a broker fault
`under_replicated`                  (metadata) a replica that is not in the ISR
==================================  =========================================================

The high watermark of a partition is the one in the leader's `replication-offset-checkpoint`
(leader from metadata), else the largest across the replicas' checkpoints, else the
smallest log end offset of the replicas (so replicas are compared on their common prefix).
Checkpoints lag the live HW (Kafka writes them every 5 s), which only makes the check
compare fewer offsets, never report a false divergence.

The heavy work (decoding, digests, grouping, ordering) runs in Spark over the
`trafka_batches` table; the driver sees per-replica summaries and the violating groups only.

Not implemented: leader-epoch checkpoint files
are not compared; divergence above the HW is not reported (it is legal: KIP-101 truncates).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, BinaryIO

from trafka.log.batch import HEADER_SIZE, parse_header
from trafka.log.errors import CorruptRecordError
from trafka.spark.columns import decode_entry
from trafka.spark.logdir import (
    REPLICATION_OFFSET_CHECKPOINT,
    LogDir,
    SegmentFile,
    batch_positions,
    read_offset_checkpoint,
    read_offset_index,
    read_time_index,
)

_OFFSET_AND_SIZE = struct.Struct(">qi")

ERROR = "error"
WARNING = "warning"

ALWAYS_COMPACTED = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True, slots=True)
class Violation:
    check: str
    severity: str
    topic: str
    partition: int
    broker: int | None
    offset: int | None
    detail: str

    def line(self) -> str:
        broker = "?" if self.broker is None else str(self.broker)
        offset = "?" if self.offset is None else str(self.offset)
        return (
            f"{self.severity.upper():7} {self.check}: {self.topic}-{self.partition} "
            f"broker {broker} offset {offset}: {self.detail}"
        )


@dataclass(frozen=True, slots=True)
class ReplicaSummary:
    topic: str
    partition: int
    broker: int
    log_start_offset: int | None
    log_end_offset: int | None
    batches: int
    records: int


@dataclass(slots=True)
class AuditReport:
    log_dirs: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    checks_skipped: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == ERROR]

    def to_json_object(self) -> dict[str, Any]:
        counts = Counter(v.check for v in self.violations)
        return {
            "ok": not self.errors,
            "error_count": len(self.errors),
            "warning_count": len(self.violations) - len(self.errors),
            "violation_counts": dict(sorted(counts.items())),
            "violations": [asdict(v) for v in self.violations],
            "checks_skipped": self.checks_skipped,
            "log_dirs": self.log_dirs,
            "partitions": self.partitions,
        }

    def summary(self) -> str:
        replicas = sum(len(p["replicas"]) for p in self.partitions)
        lines = [
            f"audit check: {len(self.log_dirs)} log dir(s), {len(self.partitions)} partition(s),"
            f" {replicas} replica(s): {len(self.errors)} error(s),"
            f" {len(self.violations) - len(self.errors)} warning(s)"
        ]
        lines.extend("  " + v.line() for v in self.violations[:200])
        if len(self.violations) > 200:
            lines.append(f"  ... and {len(self.violations) - 200} more (see the JSON report)")
        lines.extend(f"  skipped: {reason}" for reason in self.checks_skipped)
        return "\n".join(lines)


# --------------------------------------------------------------------------- pure helpers


def checkpoint_high_watermarks(log_dirs: Iterable[LogDir]) -> dict[tuple[str, int], dict[int, int]]:
    """`{(topic, partition): {broker: high watermark}}` from each log dir's checkpoint."""
    result: dict[tuple[str, int], dict[int, int]] = {}
    for log_dir in log_dirs:
        checkpoint = read_offset_checkpoint(
            os.path.join(log_dir.path, REPLICATION_OFFSET_CHECKPOINT)
        )
        for key, offset in checkpoint.items():
            result.setdefault(key, {})[int(log_dir.broker)] = offset
    return result


def choose_high_watermark(
    checkpoints: dict[int, int], leader: int | None, log_ends: list[int]
) -> tuple[int | None, str]:
    """The HW to compare below, and where it came from."""
    if leader is not None and leader in checkpoints:
        return checkpoints[leader], f"checkpoint of leader {leader}"
    if checkpoints:
        broker, hw = max(checkpoints.items(), key=lambda item: item[1])
        return hw, f"checkpoint of broker {broker} (largest)"
    if log_ends:
        return min(log_ends), "smallest log end offset (no checkpoint)"
    return None, "unknown"


@dataclass(frozen=True, slots=True)
class ReplicaBatch:
    """One replica's copy of the batch at a base offset (from the batches table)."""

    broker: int
    digest: int | None
    last_offset: int | None
    crc_valid: bool
    record_offsets: tuple[int, ...] | None
    record_digests: tuple[int, ...] | None


def divergent_replicas(
    copies: list[ReplicaBatch], leader: int | None
) -> list[tuple[ReplicaBatch, ReplicaBatch]]:
    """(divergent copy, reference copy) pairs: the reference digest is the majority's,
    ties broken by a valid CRC, then the leader's copy, then the lowest broker id."""
    counts = Counter(c.digest for c in copies)
    if len(counts) <= 1:
        return []

    def rank(copy: ReplicaBatch) -> tuple[int, int, int, int]:
        return (
            -counts[copy.digest],
            0 if copy.crc_valid else 1,
            0 if copy.broker == leader else 1,
            copy.broker,
        )

    reference = min(copies, key=rank)
    return [(c, reference) for c in copies if c.digest != reference.digest]


def first_divergent_offset(copy: ReplicaBatch, reference: ReplicaBatch, base_offset: int) -> int:
    """The first offset whose record differs between two copies of a batch; the base
    offset when either copy did not decode or the record lists do not line up."""
    if copy.record_offsets is None or reference.record_offsets is None:
        return base_offset
    if copy.record_digests is None or reference.record_digests is None:
        return base_offset
    pairs = zip(
        zip(copy.record_offsets, copy.record_digests, strict=True),
        zip(reference.record_offsets, reference.record_digests, strict=True),
        strict=False,
    )
    for (offset, digest), (ref_offset, ref_digest) in pairs:
        if offset != ref_offset or digest != ref_digest:
            return min(offset, ref_offset)
    if len(copy.record_offsets) != len(reference.record_offsets):
        shorter = min(len(copy.record_offsets), len(reference.record_offsets))
        longer = (
            copy.record_offsets if len(copy.record_offsets) > shorter else reference.record_offsets
        )
        return longer[shorter]
    return base_offset


def index_violations(segment: SegmentFile) -> Iterator[dict[str, Any]]:
    """`index_mismatch` violations (as dicts) of one segment's offset index.

    Kafka's index entry is (the last offset of a batch, the batch's position) since 0.11;
    we accept any offset inside the batch at that position.
    """
    entries = read_offset_index(segment.index_path, segment.base_offset)
    if not entries:
        return
    positions, _end = batch_positions(segment.path, segment.size_bytes)
    if not positions and entries == [(segment.base_offset, 0)]:
        return  # a preallocated (all-zero) index of an empty segment
    known = set(positions)
    with open(segment.path, "rb") as handle:
        for offset, position in entries:
            base: dict[str, Any] = {
                "check": "index_mismatch",
                "severity": ERROR,
                "topic": segment.topic,
                "partition": segment.partition,
                "broker": int(segment.broker),
                "offset": offset,
            }
            if position not in known:
                yield base | {
                    "detail": f"{segment.name}: index entry position {position} is not a "
                    "batch boundary"
                }
                continue
            holds = _offsets_at(handle, position)
            if holds is None:
                yield base | {"detail": f"{segment.name}: no readable batch at position {position}"}
            elif not holds[0] <= offset <= holds[1]:
                yield base | {
                    "detail": f"{segment.name}: index entry points at position {position}, "
                    f"whose batch holds offsets {holds[0]}..{holds[1]}"
                }


def time_index_violations(segment: SegmentFile) -> Iterator[dict[str, Any]]:
    """`time_index_mismatch` violations (as dicts) of one segment's time index.

    Kafka's entry is (max timestamp so far, an offset of the batch holding it): the offset
    must lie in a batch of this segment, and for a v2 batch its maxTimestamp must be the
    entry's timestamp.
    """
    entries = read_time_index(segment.time_index_path, segment.base_offset)
    if not entries:
        return
    positions, _end = batch_positions(segment.path, segment.size_bytes)
    batches: list[tuple[int, int, int | None]] = []
    with open(segment.path, "rb") as handle:
        for position in positions:
            holds = _offsets_at(handle, position, with_timestamp=True)
            if holds is not None:
                batches.append(holds)
    starts = [base for base, _last, _ts in batches]
    for timestamp, offset in entries:
        base: dict[str, Any] = {
            "check": "time_index_mismatch",
            "severity": ERROR,
            "topic": segment.topic,
            "partition": segment.partition,
            "broker": int(segment.broker),
            "offset": offset,
        }
        index = bisect.bisect_right(starts, offset) - 1
        if index < 0 or not batches[index][0] <= offset <= batches[index][1]:
            yield base | {
                "detail": f"{segment.name}: time index entry ({timestamp}, {offset}) names an "
                "offset in no batch of the segment"
            }
            continue
        max_timestamp = batches[index][2]
        if max_timestamp is not None and max_timestamp != timestamp:
            yield base | {
                "detail": f"{segment.name}: time index entry timestamp {timestamp}, but the "
                f"batch holding offset {offset} has maxTimestamp {max_timestamp}"
            }


def _offsets_at(handle: BinaryIO, position: int, *, with_timestamp: bool = False) -> Any:
    """(base offset, last offset) of the entry at `position` (plus its v2 maxTimestamp, or
    None for v0/v1, when `with_timestamp`); None if it cannot be read."""
    handle.seek(position)
    head = handle.read(HEADER_SIZE)
    if len(head) < 17:
        return None
    if head[16] == 2:
        try:
            header = parse_header(head)
        except CorruptRecordError:
            return None
        if with_timestamp:
            return header.base_offset, header.last_offset, header.max_timestamp
        return header.base_offset, header.last_offset
    size = _OFFSET_AND_SIZE.unpack_from(head)[1] + 12
    handle.seek(position)
    entry = decode_entry(handle.read(size), 0)
    if entry.header is None:
        return None
    if with_timestamp:
        return entry.header.base_offset, entry.header.last_offset, None
    return entry.header.base_offset, entry.header.last_offset
