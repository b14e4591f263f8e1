"""Log compaction: keep the latest record per key (SEEDS LOG-24..31, KIP-534 tombstones).

One pass of `clean_log` on a `cleanup.policy=compact` (or `compact,delete`) log:

1. Under the log's lock (briefly): snapshot the segment list, open our own descriptors on
   the cleanable segments, and compute the **first uncleanable offset** = min(active
   segment base, high watermark, first unstable (transactional) offset, base of the first
   segment newer than `min.compaction.lag.ms`). The active segment is never cleaned.
2. Without the lock: if the dirty part (from the cleaner checkpoint to the first
   uncleanable offset) is less than `min.cleanable.dirty.ratio` of the cleanable bytes,
   stop (unless forced: a tombstone horizon has passed or `max.compaction.lag.ms` is
   exceeded). Otherwise build the **offset map** key -> last offset over the dirty
   segments (whole segments, bounded by `max_map_entries`), then rewrite every cleanable
   segment from the log start into new segments in `<partition>/cleaner-tmp/`:
   * a record whose key has a later offset in the map is dropped (LOG-27, LOG-30);
   * a tombstone (null value) is kept, and its batch gets a delete horizon
     (`now + delete.retention.ms`, KIP-534: attribute bit 6, baseTimestamp = horizon); on a
     pass after the horizon it is dropped;
   * records without a key are dropped (a compacted topic cannot hold them);
   * offsets are preserved (LOG-26): rewritten batches keep their baseOffset,
     lastOffsetDelta, producer fields, codec and timestamp type; untouched batches are
     copied byte for byte; a batch left empty is kept (as an empty batch) only if it is
     its producer's latest batch, so idempotence survives compaction;
   * records of aborted transactions (from the segments' `.txnindex`) are removed, and
     kept out of the offset map so they never shadow a committed value (Kafka's cleaner);
     the `.txnindex` entries move with their ABORT markers to the output segments;
   * transaction markers (Kafka's second pass, `CleanedTransactionMetadata`): read in
     offset order, a COMMIT/ABORT marker whose transaction has no batch left in the log
     (its records were compacted or, aborted, removed by an earlier pass) can go. Its
     batch first gets a delete horizon (`now + delete.retention.ms`, as tombstones do, so
     a read_committed consumer that saw the transaction's data also sees its marker); a
     pass after the horizon removes it, with its `.txnindex` entry. A marker is kept
     while any batch of its transaction remains (a producer's latest data batch is kept,
     empty, for its producer state, and so keeps its marker too);
   * other control batches and legacy (magic 0/1) entries are copied unchanged.
   Source segments are grouped so an output stays within `segment.bytes`.
3. Under the lock again: if the segment layout is unchanged (no retention, truncation or
   DeleteRecords-driven removal in between; otherwise the pass is abandoned), swap the
   outputs in.
   Appends are blocked only for this rename step, never while records are copied.

Crash safety of the swap (see `PartitionLog.replace_segments`): outputs are fsynced, moved
next to the log as `<base>.log.swap` (+ `.index.swap`, `.timeindex.swap`), then a
`cleaner-swap` marker listing old and new base offsets is written atomically, old segments
are renamed `.deleted`, swaps renamed to their final names, and the marker removed. On
open, `.swap` files without a marker are discarded; with a marker the swap is completed.

Not implemented: `log.cleaner.io.max.bytes.per.second` throttling, several cleaner
threads; a marker whose horizon passed but that is its producer's latest batch is kept
whole (Kafka keeps it as an empty batch).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from trafka.log.batch import BatchHeader
from trafka.log.config import INT_MAX, LONG_MAX, LogConfig
from trafka.log.control import ControlRecordType, decode_control_key
from trafka.log.errors import CorruptRecordError, LogError
from trafka.log.partition_log import CLEANER_TMP_DIR, PartitionLog
from trafka.log.record_model import Record
from trafka.log.records import NewRecord, RecordBatch, build_batch, decode_batch
from trafka.log.segment import EntryInfo, LogSegment, entry_info_at, iter_entries_in
from trafka.log.txn_index import AbortedTxn

MAX_OFFSET_MAP_ENTRIES = 2_000_000
"""Keys per pass (Kafka bounds this by log.cleaner.dedupe.buffer.size, 128 MiB)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What a cleaning pass did."""

    first_dirty_offset: int
    """The new cleaner checkpoint: everything below it is clean."""
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int
    next_tombstone_horizon_ms: int | None
    """The earliest delete horizon of a tombstone or transaction marker still in the log
    (None if none): the next pass that can remove something."""
    markers_removed: int = 0


@dataclass(slots=True)
class _Counters:
    records_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    next_horizon_ms: int | None = None

    def horizon(self, horizon_ms: int) -> None:
        if self.next_horizon_ms is None or horizon_ms < self.next_horizon_ms:
            self.next_horizon_ms = horizon_ms


def first_uncleanable_offset(log: PartitionLog, segments: list[LogSegment], now_ms: int) -> int:
    """min(active base, HW, first unstable offset, first segment within the lag)."""
    bound = min(segments[-1].base_offset, log.high_watermark)
    unstable = log.producer_state.first_unstable_offset()
    if unstable is not None:
        bound = min(bound, unstable)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments[:-1]:
            if segment.max_timestamp >= 0 and segment.max_timestamp > now_ms - lag:
                bound = min(bound, segment.base_offset)
                break
    return bound


def clean_log(
    log: PartitionLog,
    *,
    now_ms: int,
    first_dirty_offset: int,
    force: bool = False,
    max_map_entries: int = MAX_OFFSET_MAP_ENTRIES,
) -> CleanResult | None:
    """One compaction pass over `log`; None if there was nothing (worth) cleaning."""
    config = log.config
    with log.lock:
        if log.closed:
            return None
        segments, generation = log.segments_snapshot()
        uncleanable = first_uncleanable_offset(log, segments, now_ms)
        cleanable = [
            segment
            for slot, segment in enumerate(segments[:-1])
            if segments[slot + 1].base_offset <= uncleanable
        ]
        if not cleanable:
            return None
        end = segments[len(cleanable)].base_offset
        first_dirty = max(first_dirty_offset, log.log_start_offset, cleanable[0].base_offset)
        producer_last_offsets = {
            pid: entry.batches[-1].last_offset
            for pid, entry in log.producer_state.producers.items()
            if entry.batches
        }
        aborted = _aborted_ranges(segments)
        fds = {id(segment): os.open(segment.log_path, os.O_RDONLY) for segment in cleanable}
    try:
        dirty = [s for s in cleanable if s.next_offset > first_dirty]
        clean_bytes = sum(s.size for s in cleanable if s.next_offset <= first_dirty)
        dirty_bytes = sum(s.size for s in dirty)
        ratio = dirty_bytes / max(1, clean_bytes + dirty_bytes)
        if config.max_compaction_lag_ms < LONG_MAX and any(
            0 <= s.rolling_based_timestamp() < now_ms - config.max_compaction_lag_ms for s in dirty
        ):
            force = True
        if not force and (not dirty or ratio < config.min_cleanable_dirty_ratio):
            return None
        offset_map, map_end = _build_offset_map(
            dirty, fds, first_dirty, end, max_map_entries, aborted
        )
        to_clean = [s for s in cleanable if s.base_offset < map_end]
        return _clean_segments(
            log,
            to_clean,
            fds,
            offset_map,
            map_end,
            now_ms,
            producer_last_offsets,
            generation,
            aborted,
        )
    except (OSError, LogError) as error:
        logger.warning("%s: cleaning abandoned: %s", log.directory, error)
        shutil.rmtree(log.directory / CLEANER_TMP_DIR, ignore_errors=True)
        return None
    finally:
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _iter_batches(segment: LogSegment, fd: int) -> list[tuple[EntryInfo, bytes]]:
    result = []
    for info in iter_entries_in(fd, 0, segment.size):
        result.append((info, os.pread(fd, info.size, info.position)))
    return result


def _decode(data: bytes) -> RecordBatch:
    return decode_batch(data, max_decompressed_bytes=max(64 << 20, len(data) * 4))


def _aborted_ranges(segments: list[LogSegment]) -> dict[int, list[tuple[int, int]]]:
    """producer id -> (first offset, ABORT marker offset) of its aborted transactions."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for segment in segments:
        for entry in segment.txn_index.entries:
            ranges.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
    return ranges


def _is_aborted(info: EntryInfo, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """A transactional data batch of a transaction that was aborted (Kafka's cleaner drops
    them, and keeps them out of the offset map so they never shadow a committed value)."""
    if not info.is_transactional or info.is_control:
        return False
    return any(
        first <= info.base_offset <= last for first, last in aborted.get(info.producer_id, ())
    )


@dataclass(slots=True)
class _TransactionScan:
    """Kafka's `CleanedTransactionMetadata`: fed every batch of a pass in offset order, it
    says whether a transaction marker still has batches of its transaction before it."""

    pending: list[AbortedTxn]
    """The `.txnindex` entries not reached yet, by first offset."""
    aborted: dict[int, tuple[AbortedTxn, bool]] = field(default_factory=dict)
    """producer id -> its aborted transaction under way, and whether a batch was seen."""
    committed: set[int] = field(default_factory=set)
    """Producers with a (not aborted) transactional batch since their last marker."""

    @classmethod
    def of(cls, segments: list[LogSegment]) -> _TransactionScan:
        entries = [entry for segment in segments for entry in segment.txn_index.entries]
        return cls(sorted(entries, key=lambda e: e.first_offset, reverse=True))

    def _reach(self, offset: int) -> None:
        while self.pending and self.pending[-1].first_offset <= offset:
            entry = self.pending.pop()
            self.aborted[entry.producer_id] = (entry, False)

    def on_data(self, info: EntryInfo) -> None:
        self._reach(info.last_offset)
        if not info.is_transactional or info.producer_id < 0:
            return
        under_way = self.aborted.get(info.producer_id)
        if under_way is not None:
            self.aborted[info.producer_id] = (under_way[0], True)
        else:
            self.committed.add(info.producer_id)

    def on_marker(self, info: EntryInfo, batch: RecordBatch) -> bool:
        """True if the marker guards no batch any more (it may be removed)."""
        self._reach(info.last_offset)
        if not batch.records:
            return True  # an emptied control batch
        try:
            kind = decode_control_key(batch.records[0].key).type
        except CorruptRecordError:
            return False
        if kind is ControlRecordType.ABORT:
            under_way = self.aborted.pop(info.producer_id, None)
            return under_way is None or not under_way[1]
        if kind is ControlRecordType.COMMIT:
            seen = info.producer_id in self.committed
            self.committed.discard(info.producer_id)
            return not seen
        return False  # another control record: kept


def _build_offset_map(
    dirty: list[LogSegment],
    fds: dict[int, int],
    first_dirty: int,
    end: int,
    max_entries: int,
    aborted: dict[int, list[tuple[int, int]]],
) -> tuple[dict[bytes, int], int]:
    """key -> last offset over whole dirty segments; returns the map and where it ends."""
    offset_map: dict[bytes, int] = {}
    map_end = first_dirty
    for segment in dirty:
        segment_keys: dict[bytes, int] = {}
        for info, data in _iter_batches(segment, fds[id(segment)]):
            if info.magic < 2 or info.is_control or info.last_offset < first_dirty:
                continue
            if _is_aborted(info, aborted):
                continue
            for record in _decode(data).records:
                if record.key is not None and record.offset >= first_dirty:
                    segment_keys[record.key] = record.offset
        if offset_map and len(offset_map) + len(segment_keys) > max_entries:
            break
        offset_map.update(segment_keys)
        map_end = min(segment.next_offset, end)
        map_end = max(map_end, segment.base_offset + 1)
    return offset_map, map_end


def _groups(segments: list[LogSegment], config: LogConfig) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for segment in segments:
        current = groups[-1] if groups else None
        if (
            current is not None
            and sum(s.size for s in current) + segment.size <= config.segment_bytes
            and segment.next_offset - current[0].base_offset <= INT_MAX
        ):
            current.append(segment)
        else:
            groups.append([segment])
    return groups


def _clean_segments(
    log: PartitionLog,
    to_clean: list[LogSegment],
    fds: dict[int, int],
    offset_map: dict[bytes, int],
    map_end: int,
    now_ms: int,
    producer_last_offsets: dict[int, int],
    generation: int,
    aborted: dict[int, list[tuple[int, int]]],
) -> CleanResult | None:
    config = log.config
    tmp = log.directory / CLEANER_TMP_DIR
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    counters = _Counters()
    scan = _TransactionScan.of(to_clean)
    removed_markers: set[int] = set()
    outputs: list[tuple[list[LogSegment], list[LogSegment]]] = []
    for group in _groups(to_clean, config):
        written: list[LogSegment] = []
        for source in group:
            for info, data in _iter_batches(source, fds[id(source)]):
                if info.magic >= 2 and info.is_control:
                    kept = _clean_marker(
                        info, data, scan, now_ms, config, counters, producer_last_offsets
                    )
                    if kept is None:
                        removed_markers.add(info.last_offset)
                        continue
                else:
                    scan.on_data(info)
                    kept = _clean_batch(
                        info,
                        data,
                        offset_map,
                        map_end,
                        now_ms,
                        config,
                        counters,
                        producer_last_offsets,
                        _is_aborted(info, aborted),
                    )
                if kept is None:
                    continue
                kept_info = entry_info_at(kept, 0, 0)
                if not written or (
                    written[-1].size > 0
                    and written[-1].should_roll(
                        messages_size=len(kept),
                        max_timestamp=-1,
                        max_offset=kept_info.last_offset,
                        now_ms=now_ms,
                    )
                ):
                    base = group[0].base_offset if not written else kept_info.base_offset
                    if written:
                        written[-1].close()
                    written.append(
                        LogSegment.create(tmp, base, _no_time_roll(config), now_ms=now_ms)
                    )
                written[-1].append([kept], [kept_info])
        if written:
            written[-1].close()
        _carry_aborted_transactions(group, written, removed_markers)
        outputs.append((group, written))
    bytes_before = sum(s.size for s in to_clean)
    bytes_after = sum(s.size for _, written in outputs for s in written)
    if not log.replace_segments(outputs, tmp, generation=generation):
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    shutil.rmtree(tmp, ignore_errors=True)
    logger.info(
        "%s: cleaned %d segment(s) up to %d: %d -> %d bytes, %d records, %d tombstones and "
        "%d transaction markers removed",
        log.directory,
        len(to_clean),
        map_end,
        bytes_before,
        bytes_after,
        counters.records_removed,
        counters.tombstones_removed,
        counters.markers_removed,
    )
    return CleanResult(
        first_dirty_offset=map_end,
        segments_cleaned=len(to_clean),
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        records_removed=counters.records_removed,
        tombstones_removed=counters.tombstones_removed,
        next_tombstone_horizon_ms=counters.next_horizon_ms,
        markers_removed=counters.markers_removed,
    )


def _carry_aborted_transactions(
    group: list[LogSegment], written: list[LogSegment], removed_markers: set[int]
) -> None:
    """The sources' `.txnindex` entries go to the output holding their ABORT marker; the
    entry of a removed marker goes with it (its transaction has no batch left)."""
    for entry in (entry for source in group for entry in source.txn_index.entries):
        if entry.last_offset in removed_markers:
            continue
        target = None
        for segment in written:
            if segment.base_offset <= entry.last_offset:
                target = segment
        if target is not None:
            target.txn_index.append(entry)


def _no_time_roll(config: LogConfig) -> LogConfig:
    import dataclasses

    return dataclasses.replace(config, segment_ms=LONG_MAX)


def _clean_marker(
    info: EntryInfo,
    data: bytes,
    scan: _TransactionScan,
    now_ms: int,
    config: LogConfig,
    counters: _Counters,
    producer_last_offsets: dict[int, int],
) -> bytes | None:
    """A control batch as it should remain (None: remove it). A marker that guards no batch
    gets a delete horizon, and is removed by the first pass after it."""
    try:
        decoded = _decode(data)
    except CorruptRecordError as error:
        raise LogError(f"batch at offset {info.base_offset}: {error}") from error
    if not scan.on_marker(info, decoded):
        return data
    horizon = decoded.delete_horizon_ms
    if horizon is not None and now_ms >= horizon:
        if producer_last_offsets.get(info.producer_id) == info.last_offset:
            return data  # its producer's latest batch: kept for the producer state
        counters.markers_removed += 1
        return None
    if horizon is not None:
        counters.horizon(horizon)
        return data
    horizon = now_ms + config.delete_retention_ms
    counters.horizon(horizon)
    return _rebuild(decoded.header, decoded.records, horizon, is_control=True)


def _clean_batch(
    info: EntryInfo,
    data: bytes,
    offset_map: dict[bytes, int],
    map_end: int,
    now_ms: int,
    config: LogConfig,
    counters: _Counters,
    producer_last_offsets: dict[int, int],
    aborted: bool = False,
) -> bytes | None:
    """The batch as it should remain after cleaning (None: drop it entirely). Every record
    of an `aborted` transactional batch is removed."""
    if info.magic < 2 or info.is_control:
        return data
    try:
        decoded = _decode(data)
    except CorruptRecordError as error:
        raise LogError(f"batch at offset {info.base_offset}: {error}") from error
    horizon = decoded.delete_horizon_ms
    horizon_passed = horizon is not None and now_ms >= horizon
    retained = []
    has_tombstone = False
    for record in decoded.records:
        if record.key is None or aborted:
            counters.records_removed += 1
            continue
        latest = offset_map.get(record.key)
        if latest is not None and record.offset < latest and record.offset < map_end:
            counters.records_removed += 1
            continue
        if record.value is None:
            if horizon_passed:
                counters.tombstones_removed += 1
                continue
            has_tombstone = True
        retained.append(record)
    new_horizon = horizon
    if has_tombstone:
        if new_horizon is None:
            new_horizon = now_ms + config.delete_retention_ms
        counters.horizon(new_horizon)
    elif horizon_passed:
        new_horizon = None
    if len(retained) == len(decoded.records) and new_horizon == horizon:
        return data
    header = decoded.header
    if not retained:
        if (
            info.producer_id >= 0
            and producer_last_offsets.get(info.producer_id) == info.last_offset
        ):
            return _rebuild(header, [], new_horizon)
        return None
    return _rebuild(header, retained, new_horizon)


def _rebuild(
    header: BatchHeader,
    records: Sequence[Record],
    delete_horizon_ms: int | None,
    *,
    is_control: bool = False,
) -> bytes:
    """The batch again with only `records`, its header's fields kept (offsets, producer,
    last offset delta) and the given delete horizon."""
    return build_batch(
        [
            NewRecord(
                record.value,
                key=record.key,
                headers=record.headers,
                timestamp=record.timestamp,
                offset_delta=record.offset - header.base_offset,
            )
            for record in records
        ],
        base_offset=header.base_offset,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=is_control,
        timestamp_type=header.timestamp_type,
        now_ms=header.max_timestamp,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=header.last_offset_delta,
    )
