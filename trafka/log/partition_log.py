"""The log of one partition: segments, appends, reads, truncation, retention, recovery.

Directory `<topic>-<partition>/` (SEEDS LOG-05) holding segments (see `segment.py`), the
`leader-epoch-checkpoint` (see `leader_epoch.py`) and producer snapshots (see
`producer_state.py`). Synchronous and thread-safe: every method takes the log's lock
(a `threading.RLock`), so the broker may run compaction or flushes from a worker thread.

Offsets (SEEDS REP-07): `log_start_offset` <= `high_watermark` <= `log_end_offset`.
The recovery point is the offset below which everything is known to be fsynced.

Append paths (DESIGN decision 2: batches stay opaque, no per-record work):

* `append_as_leader`: check framing, sizes and CRC-32C of every v2 batch; reject batches
  over `max.message.bytes` (MESSAGE_TOO_LARGE); walk every record without decoding it
  (`trafka.log.validation`, Kafka's LogValidator: INVALID_RECORD, KIP-467 record errors
  for keyless records on compacted topics); idempotent-producer checks; rewrite
  baseOffset, stamp partitionLeaderEpoch (and LogAppendTime + a new CRC when configured);
  one write.
* `append_as_follower`: the leader's offsets and epochs are kept; the epoch cache learns
  new epochs from the batches.
* `append_end_transaction_marker`: the only way a control batch enters a leader's log
  (WriteTxnMarkers); clients' control batches are refused.

Transactions (KIP-98, EOS-05): the producer state tracks each producer's open transaction;
the last stable offset is min(HW, first offset of the oldest open transaction). A marker
(leader or follower append) ends the producer's transaction; an ABORT also appends
(producer id, first offset, marker offset, LSO after it) to the active segment's
`.txnindex`, from which `collect_aborted_transactions` answers READ_COMMITTED fetches.
Recovered segments get their `.txnindex` rebuilt by replaying the producer state from a
snapshot at or below them.

Recovery on open (`PartitionLog.open`): segments that may hold unflushed data (from the
recovery point on; none after a clean shutdown) are re-scanned batch by batch: CRC checked,
indexes rebuilt, and a torn tail (partial batch, bad CRC, garbage, zeros) truncated,
keeping every complete batch before it; the dropped bytes and the reason are logged.
Segments with missing or inconsistent indexes are rebuilt the same way.

Creation: a new log's directory is fsynced (through `partition.metadata`'s atomic write when
it has a topic id) before `open` returns, or, with `durable_creation=False` (a broker
creating thousands of logs for one LeaderAndIsr), later: in the background, and always
before its first append, at a clean close or a full truncation (`sync_creation`). A crash
before then loses at most an empty log, which the controller's next LeaderAndIsr creates
again, as Kafka's does.

Not implemented: conversion of old-format produce requests (magic 0/1 appends are
rejected with UnsupportedForMessageFormatError), tiered storage,
`segment.jitter.ms` randomness (the configured jitter is applied as a fixed amount), and
`message.timestamp.*.max.ms` checks.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from trafka.log import batch as batch_format
from trafka.log.background import BackgroundWorker
from trafka.log.checkpoint import (
    PARTITION_METADATA,
    fsync_dir,
    fsync_path,
    write_atomically,
    write_partition_metadata,
)
from trafka.log.config import INT_MAX, LogConfig
from trafka.log.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    decode_end_transaction_marker,
)
from trafka.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogDirFailedError,
    LogError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
    UnsupportedForMessageFormatError,
)
from trafka.log.leader_epoch import LeaderEpochCache
from trafka.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from trafka.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    EntryInfo,
    LogSegment,
    file_name,
    parse_base_offset,
)
from trafka.log.txn_index import AbortedTxn
from trafka.log.validation import validate_records

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
DELETE_RECORDS_HIGH_WATERMARK = -1
CLEANER_TMP_DIR = "cleaner-tmp"
"""Where the cleaner writes compacted segments before swapping them in."""
SWAP_MARKER = "cleaner-swap"
"""Lists old and new base offsets while a compaction swap is in progress (ours, not Kafka's)."""

_PREFIX = struct.Struct(">qii")
"""baseOffset, batchLength, partitionLeaderEpoch: the first 16 bytes of a v2 batch."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """The outcome of an append (what the Produce response needs)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    """The broker time stamped into LogAppendTime batches; -1 for CreateTime."""
    log_start_offset: int
    batch_count: int
    size_bytes: int
    duplicate: bool = False
    """A retried idempotent batch: nothing was appended, offsets are the original ones."""


@dataclass(frozen=True, slots=True)
class FileRegion:
    """A byte range of a segment file, for `os.sendfile`.

    The bytes are whole batches as of the read. If retention deletes the segment before
    the caller reads, the file sits under `<path>.deleted` for `file.delete.delay.ms`;
    `open_fd` tries both names and checks the inode (compaction replaces files under the
    same name). A truncation (follower) can shorten the file: a reader
    must treat a short sendfile as the end of the data.
    """

    path: Path
    position: int
    length: int
    inode: int = 0
    """The segment file's inode when read (0: unchecked); a swapped file has another."""

    def open_fd(self) -> int:
        """A descriptor on the same file the read saw (the caller closes it)."""
        for candidate in (self.path, self.path.with_name(self.path.name + DELETED_SUFFIX)):
            try:
                fd = os.open(candidate, os.O_RDONLY)
            except FileNotFoundError:
                continue
            if not self.inode or os.fstat(fd).st_ino == self.inode:
                return fd
            os.close(fd)
        raise FileNotFoundError(f"{self.path}: segment deleted or replaced")

    def read(self) -> bytes:
        fd = self.open_fd()
        try:
            return os.pread(fd, self.length, self.position)
        finally:
            os.close(fd)


@dataclass(frozen=True, slots=True)
class FetchData:
    """The answer to `read`: whole batches, as file regions (sendfile) or bytes."""

    fetch_offset: int
    regions: tuple[FileRegion, ...]
    next_offset: int = -1
    """Where the next read continues (after the last batch returned); -1 when empty."""
    data: bytes | None = None
    """The bytes, when `read(..., with_bytes=True)` read them already."""

    @property
    def size(self) -> int:
        return sum(region.length for region in self.regions)

    def to_bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        if len(self.regions) == 1:
            return self.regions[0].read()
        return b"".join(region.read() for region in self.regions)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """ListOffsets' answer: the record's timestamp (-1 if none), offset and leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None


@dataclass(frozen=True, slots=True)
class LogSegmentInfo:
    """A read-only view of one segment, for tools, metrics and tests."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    path: Path


class _OsErrorGuard:
    """`with guard:` turns an OSError into LogDirFailedError (KAFKA_STORAGE_ERROR)."""

    __slots__ = ("directory",)

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if isinstance(error, OSError):
            raise LogDirFailedError(f"{self.directory}: {error}") from error


def parse_topic_partition(directory: Path) -> tuple[str, int]:
    """`orders-3` -> ("orders", 3); ValueError for names that are not a partition dir."""
    topic, sep, partition = directory.name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{directory.name!r} is not a <topic>-<partition> directory")
    return topic, int(partition)


class PartitionLog:
    """One partition's log. Create with `PartitionLog.open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        producer_id_expiration_ms: int,
        background: BackgroundWorker | None = None,
    ) -> None:
        self.directory = directory
        self._background = background
        """Where a roll's fsyncs run (None: at once, on the rolling thread)."""
        self.topic, self.partition = parse_topic_partition(directory)
        self._config = config
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._log_start_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._last_now_ms = now_ms
        self._last_flush_ms = now_ms
        self._unflushed_messages = 0
        self._pending_deletes: list[tuple[int, list[Path]]] = []
        self._closed = False
        self._layout_generation = 0
        """Bumped whenever segments are removed or truncated (the cleaner checks it)."""
        self.truncations = 0
        """Times the log was truncated (a -future copy of it cannot trust appended-only
        files across one: trafka.log.dir_move)."""
        self._io_guard = _OsErrorGuard(directory)
        self._creation_owed = False
        """Created without waiting for the disk (`open(durable_creation=False)`): the fsync
        of the new directory's entries and `partition.metadata` are still owed, and are paid
        by `sync_creation` before the first append, at a clean close, or in the background."""
        self._owed_topic_id: str | None = None
        self._creation_lock = threading.Lock()
        """Serializes `sync_creation` (the appending thread against the background one);
        never held by reads, so a background sync does not stall them."""
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(
            directory, producer_id_expiration_ms=producer_id_expiration_ms
        )

    # ================================================================== open / recovery

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        background: BackgroundWorker | None = None,
        durable_creation: bool = True,
        topic_id: str | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) and recover the log in `directory`.

        `recovery_point` None means unknown: every segment is re-scanned.
        `had_clean_shutdown` skips the re-scan (segments with bad indexes are still rebuilt).
        `background`: where a roll's fsyncs run (None: on the appending thread).
        `topic_id` (URL-safe base64 Uuid): written to `partition.metadata` of a new log.
        `durable_creation=False`: a new log waits for no fsync here; what it owes (the
        directory's fsync, `partition.metadata`) is written by `sync_creation`, which every
        append runs first (Kafka's creation path, which flushes `partition.metadata` in
        the background and before the first append, `UnifiedLog.maybeFlushMetadataFile`).
        """
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(
            directory,
            config,
            now_ms=now_ms,
            producer_id_expiration_ms=producer_id_expiration_ms,
            background=background,
        )
        try:
            created = log._load(now_ms, recovery_point, log_start_offset, had_clean_shutdown)
            if created:
                log._creation_owed = True
                log._owed_topic_id = topic_id
                if durable_creation:
                    log.sync_creation()
            elif topic_id is not None:
                write_partition_metadata(directory / PARTITION_METADATA, topic_id)
        except OSError as error:
            log._close_abruptly()
            raise LogDirFailedError(f"{directory}: {error}") from error
        return log

    def sync_creation(self) -> None:
        """Pay what a log created with `durable_creation=False` owes the disk: its
        `partition.metadata` (tmp file, fsync, rename, fsync of the directory) or the fsync
        of the directory. Nothing when nothing is owed or the log is closed (deleted). An
        OSError leaves it owed and propagates."""
        if not self._creation_owed:
            return
        with self._creation_lock:
            if not self._creation_owed or self._closed:
                return
            if self._owed_topic_id is not None:
                write_partition_metadata(self.directory / PARTITION_METADATA, self._owed_topic_id)
            else:
                fsync_dir(self.directory)
            self._creation_owed = False

    @property
    def creation_owed(self) -> bool:
        """The log was created without its fsyncs and `sync_creation` has not run yet."""
        return self._creation_owed

    def _load(
        self, now_ms: int, recovery_point: int | None, log_start_offset: int | None, clean: bool
    ) -> bool:
        """Load the segments; True when the directory held none (a new log, whose first
        segment is created here and whose directory the caller fsyncs)."""
        self._remove_leftovers()
        self._complete_swaps()
        base_offsets = self._segment_base_offsets()
        start_recovery_at = None if clean else (recovery_point or 0)
        recovered: list[LogSegment] = []
        for slot, base_offset in enumerate(base_offsets):
            segment = LogSegment(self.directory, base_offset, self._config, created_ms=now_ms)
            upper = base_offsets[slot + 1] if slot + 1 < len(base_offsets) else None
            needs_scan = start_recovery_at is not None and (
                upper is None or upper > start_recovery_at
            )
            if needs_scan or not segment.load():
                recovered.append(segment)
                truncated = self._recover_segment(segment)
                self._add_segment(segment)
                if truncated:
                    self._drop_files_after(base_offsets[slot + 1 :])
                    break
            else:
                self._add_segment(segment)
        created = not self._segments
        if created:
            start = max(log_start_offset or 0, 0)
            segment = LogSegment.create(self.directory, start, self._config, now_ms=now_ms)
            self._add_segment(segment)
        for segment in self._segments[:-1]:
            segment.make_inactive()
        self._segments[-1].make_active()
        log_end_offset = self.log_end_offset
        self._log_start_offset = max(log_start_offset or 0, self._segments[0].base_offset)
        if self._log_start_offset > log_end_offset:
            logger.warning(
                "%s: log start offset %d beyond the log end offset %d: starting empty there",
                self.directory,
                self._log_start_offset,
                log_end_offset,
            )
            self._truncate_fully(self._log_start_offset, now_ms)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        rebuilt = [segment.base_offset for segment in recovered if segment in self._segments]
        if rebuilt:
            # Recovered segments lost their `.txnindex`; replay them from a snapshot at or
            # below their start so the aborted transactions are indexed again.
            self.producer_state.delete_snapshots_above(min(rebuilt))
            self._rebuild_producer_state(txn_index_from=min(rebuilt))
        else:
            self._rebuild_producer_state()
        for segment in recovered:
            if segment in self._segments:
                segment.flush()
        self._recovery_point = self.log_end_offset
        self._high_watermark = self._log_start_offset
        return created

    def _recover_segment(self, segment: LogSegment) -> bool:
        """Re-scan `segment`; feed its epochs to the cache; True if a tail was dropped."""
        result = segment.recover()
        for info in result.entries:
            if info.magic >= 2 and info.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(info.partition_leader_epoch, info.base_offset)
        if result.truncated_bytes:
            logger.warning(
                "%s: recovery dropped %d bytes: %s",
                segment.log_path,
                result.truncated_bytes,
                result.reason,
            )
        return result.truncated_bytes > 0

    def _drop_files_after(self, base_offsets: list[int]) -> None:
        """After a torn tail: later segments cannot be trusted (Kafka deletes them too)."""
        for base_offset in base_offsets:
            dropped = 0
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                path = self.directory / file_name(base_offset, suffix)
                if path.exists():
                    if suffix == LOG_SUFFIX:
                        dropped = path.stat().st_size
                    path.unlink()
            logger.warning(
                "%s: recovery dropped segment %d (%d bytes) after a torn tail",
                self.directory,
                base_offset,
                dropped,
            )

    def _remove_leftovers(self) -> None:
        shutil.rmtree(self.directory / CLEANER_TMP_DIR, ignore_errors=True)
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
                path.unlink(missing_ok=True)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                base_offset = parse_base_offset(name)
                if (
                    base_offset is not None
                    and not (self.directory / file_name(base_offset, LOG_SUFFIX)).exists()
                ) and not (
                    self.directory / (file_name(base_offset, LOG_SUFFIX) + SWAP_SUFFIX)
                ).exists():
                    path.unlink()

    def _complete_swaps(self) -> None:
        """Finish or discard a compaction swap interrupted by a crash (see `cleaner.py`).

        Without the marker the `.swap` files are discarded (the old segments are intact).
        With it: every new segment whose `.swap` is still there replaces the final file of
        the same base; old segments that are not new ones are deleted.
        """
        marker = self.directory / SWAP_MARKER
        suffixes = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        if not marker.exists():
            for path in self.directory.glob("*" + SWAP_SUFFIX):
                path.unlink()
            return
        olds: set[int] = set()
        news: set[int] = set()
        for line in marker.read_text().splitlines():
            kind, _, number = line.partition(" ")
            (olds if kind == "old" else news).add(int(number))
        for base_offset in sorted(news):
            swap = self.directory / (file_name(base_offset, LOG_SUFFIX) + SWAP_SUFFIX)
            if swap.exists():
                for suffix in suffixes:
                    name = file_name(base_offset, suffix)
                    (self.directory / name).unlink(missing_ok=True)
                    pending = self.directory / (name + SWAP_SUFFIX)
                    if pending.exists():
                        os.replace(pending, self.directory / name)
        for base_offset in sorted(olds - news):
            for suffix in suffixes:
                (self.directory / file_name(base_offset, suffix)).unlink(missing_ok=True)
        fsync_dir(self.directory)
        marker.unlink()
        logger.warning("%s: completed an interrupted compaction swap", self.directory)

    def _segment_base_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob("*" + LOG_SUFFIX):
            base_offset = parse_base_offset(path.name)
            if base_offset is not None and path.name == file_name(base_offset, LOG_SUFFIX):
                offsets.append(base_offset)
        return sorted(offsets)

    def _rebuild_producer_state(self, *, txn_index_from: int | None = None) -> None:
        """Newest snapshot <= log end offset, then replay batch headers up to the end.

        With `txn_index_from`, the `.txnindex` of every segment from that offset on is
        rebuilt during the replay (recovered segments); the caller has deleted the snapshots
        above it, so the replay covers those segments."""
        end = self.log_end_offset
        snapshot_offset = self.producer_state.load_latest_snapshot(end)
        start = (
            self._log_start_offset
            if snapshot_offset is None
            else max(snapshot_offset, self._log_start_offset)
        )
        if snapshot_offset is None:
            self.producer_state.clear(start)
        if txn_index_from is not None:
            for segment in self._segments:
                if segment.base_offset >= txn_index_from:
                    segment.txn_index.reset()
        for segment, info in self._iter_segment_entries_from(start):
            marker = None
            if (
                txn_index_from is not None
                and info.base_offset >= txn_index_from
                and info.is_control
                and info.is_transactional
                and info.producer_id >= 0
            ):
                marker = self._marker_at(segment, info)
            txn_first_offset = self._txn_first_offset(info.producer_id)
            self.producer_state.apply_unchecked(info)
            if marker is not None:
                self._complete_transaction(segment, info, marker, txn_first_offset)
        self.producer_state.map_end_offset = end

    def _iter_segment_entries_from(self, offset: int) -> Iterator[tuple[LogSegment, EntryInfo]]:
        slot = max(0, bisect_right(self._base_offsets, offset) - 1)
        for segment in self._segments[slot:]:
            if segment.next_offset <= offset:
                continue
            _, position = segment.offset_index.lookup(offset)
            for info in segment.iter_entries(position):
                if info.last_offset >= offset:
                    yield segment, info

    def _iter_entries_from(self, offset: int) -> Iterator[EntryInfo]:
        for _, info in self._iter_segment_entries_from(offset):
            yield info

    # ================================================================== properties

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic settings (dynamic topic config); new index sizes on next roll."""
        with self._lock:
            self._config = config
            for segment in self._segments:
                segment.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else 0

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segments(self) -> list[LogSegmentInfo]:
        with self._lock:
            return [
                LogSegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.log_path)
                for s in self._segments
            ]

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log start offset, log end offset]; return it."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
            return self._high_watermark

    def first_unstable_offset(self) -> int | None:
        with self._lock:
            return self.producer_state.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first offset of the oldest open transaction) (KIP-98 LSO)."""
        with self._lock:
            unstable = self.producer_state.first_unstable_offset()
            if unstable is None:
                return self._high_watermark
            return min(self._high_watermark, unstable)

    # ================================================================== appends

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int, now_ms: int
    ) -> AppendInfo:
        """Validate, assign offsets, stamp the epoch, and append a Produce request's batches.

        Control batches are refused (Kafka: "clients are not allowed to write control
        records"); transaction markers come only through `append_end_transaction_marker`.

        Raises CorruptRecordError (framing/CRC), InvalidRecordError, RecordTooLargeError,
        RecordListTooLargeError, OutOfOrderSequenceError, InvalidProducerEpochError,
        LogDirFailedError.
        """
        return self._append_as_leader(records, leader_epoch, now_ms, marker=None)

    def append_end_transaction_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendInfo:
        """Write a COMMIT or ABORT control batch for `producer_id` (WriteTxnMarkers, EOS-04).

        The producer's open transaction in this partition (if any) ends here: the LSO may
        move, and an ABORT adds an entry to the active segment's `.txnindex`. Raises
        InvalidProducerEpochError for an epoch older than the producer's, and
        TransactionCoordinatorFencedError for a coordinator epoch older than the last
        marker's.
        """
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if committed else ControlRecordType.ABORT, coordinator_epoch
        )
        with self._lock:
            entry = self.producer_state.producers.get(producer_id)
            if entry is not None and coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older "
                    f"than {entry.coordinator_epoch}"
                )
            records = build_end_transaction_batch(
                marker, producer_id=producer_id, producer_epoch=producer_epoch, now_ms=now_ms
            )
            return self._append_as_leader(records, leader_epoch, now_ms, marker=marker)

    def _append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        *,
        marker: EndTransactionMarker | None,
    ) -> AppendInfo:
        if records and batch_format.magic_at(records) in (0, 1):
            raise UnsupportedForMessageFormatError("magic 0/1 message sets are not converted")
        headers = batch_format.validate_batches(records)
        config = self._config
        for pos, header in headers:
            if header.is_control and marker is None:
                raise InvalidRecordError("clients are not allowed to write control records")
            if header.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes at {pos} exceeds "
                    f"max.message.bytes {config.max_message_bytes}"
                )
            if header.records_count != header.last_offset_delta + 1 or header.records_count < 1:
                raise InvalidRecordError(
                    f"batch at {pos}: {header.records_count} records but "
                    f"lastOffsetDelta {header.last_offset_delta}"
                )
        # Every record, as Kafka's LogValidator (keys on compacted topics, KIP-467 errors).
        validate_records(records, headers, compacted=config.compact)
        if len(records) > config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes exceed segment.bytes {config.segment_bytes}"
            )
        log_append_time = config.log_append_time
        with self._lock, self._io_guard:
            self._check_open()
            self._last_now_ms = now_ms
            next_offset = self.log_end_offset
            infos: list[EntryInfo] = []
            buffers: list[bytes | bytearray | memoryview] = []
            if log_append_time:
                copy = bytearray(records)
                buffers.append(copy)
            else:
                view = memoryview(records)
            for pos, header in headers:
                max_timestamp = header.max_timestamp
                if log_append_time:
                    batch_format.set_base_offset(copy, pos, next_offset)
                    batch_format.set_partition_leader_epoch(copy, pos, leader_epoch)
                    batch_format.set_log_append_time(copy, pos, header.size, now_ms)
                    max_timestamp = now_ms
                else:
                    # baseOffset, batchLength, partitionLeaderEpoch: the 16 bytes we change
                    # (outside the CRC); the rest of the batch is written from the caller's
                    # buffer without a copy.
                    buffers.append(_PREFIX.pack(next_offset, header.batch_length, leader_epoch))
                    buffers.append(view[pos + _PREFIX.size : pos + header.size])
                infos.append(
                    EntryInfo(
                        pos,
                        header.size,
                        next_offset,
                        next_offset + header.last_offset_delta,
                        2,
                        max_timestamp,
                        leader_epoch,
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                        header.is_transactional,
                        header.is_control,
                    )
                )
                next_offset += header.last_offset_delta + 1
            updates, duplicate = self.producer_state.check_batches(infos)
            if duplicate is not None:
                return AppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp,
                    duplicate.last_offset,
                    now_ms if log_append_time else -1,
                    self._log_start_offset,
                    len(infos),
                    0,
                    duplicate=True,
                )
            txn_first_offset = self._txn_first_offset(infos[0].producer_id)
            self._append(buffers, len(records), infos, now_ms)
            self.producer_state.commit(updates, self.log_end_offset)
            if marker is not None:
                self._complete_transaction(self._segments[-1], infos[0], marker, txn_first_offset)
            if leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, infos[0].base_offset)
            return self._append_info(infos, len(records), now_ms if log_append_time else -1)

    # ================================================================== transactions

    def _txn_first_offset(self, producer_id: int) -> int:
        entry = self.producer_state.producers.get(producer_id)
        return entry.current_txn_first_offset if entry is not None else -1

    def _complete_transaction(
        self,
        segment: LogSegment,
        info: EntryInfo,
        marker: EndTransactionMarker,
        txn_first_offset: int,
    ) -> None:
        """After a marker's batch is applied to the producer state: remember the coordinator
        epoch and index an aborted transaction (Kafka's `CompletedTxn`, `lastStableOffset`)."""
        entry = self.producer_state.producers.get(info.producer_id)
        if entry is not None:
            entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        if marker.type is not ControlRecordType.ABORT:
            return
        unstable = self.producer_state.first_unstable_offset()
        segment.txn_index.append(
            AbortedTxn(
                info.producer_id,
                txn_first_offset if txn_first_offset >= 0 else info.base_offset,
                info.last_offset,
                unstable if unstable is not None else info.last_offset + 1,
            )
        )

    def _marker_at(self, segment: LogSegment, info: EntryInfo) -> EndTransactionMarker | None:
        """Decode the transaction marker of a control batch (None if it holds none)."""
        return _decode_marker(segment.read_bytes(info.position, info.size))

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), for a
        READ_COMMITTED fetch (Kafka's `collectAbortedTransactions`): searched from the
        segment holding `start_offset` on, until an entry's LSO reaches the bound."""
        with self._lock:
            slot = max(0, bisect_right(self._base_offsets, start_offset) - 1)
            found: list[AbortedTxn] = []
            for segment in self._segments[slot:]:
                entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
                found.extend(entries)
                if complete:
                    break
            return found

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs."""
        if not records:
            raise CorruptRecordError("no record batch in the data")
        headers = batch_format.validate_batches(records)
        with self._lock, self._io_guard:
            self._check_open()
            if now_ms is not None:
                self._last_now_ms = now_ms
            expected = self.log_end_offset
            infos = []
            for pos, header in headers:
                if header.base_offset < expected:
                    raise UnexpectedAppendOffsetError(
                        f"follower append at offset {header.base_offset} below {expected}"
                    )
                infos.append(
                    EntryInfo(
                        pos,
                        header.size,
                        header.base_offset,
                        header.last_offset,
                        2,
                        header.max_timestamp,
                        header.partition_leader_epoch,
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                        header.is_transactional,
                        header.is_control,
                    )
                )
                expected = header.next_offset
            if infos[-1].last_offset - infos[0].base_offset > INT_MAX:
                raise InvalidRecordError("follower append spans more than 2^31 offsets")
            if len(records) > self._config.segment_bytes:
                raise RecordListTooLargeError(f"{len(records)} bytes exceed segment.bytes")
            self._append([records], len(records), infos, self._last_now_ms)
            segment = self._segments[-1]
            for info in infos:
                if info.partition_leader_epoch >= 0:
                    self.leader_epoch_cache.assign(info.partition_leader_epoch, info.base_offset)
                marker = None
                if info.is_control and info.is_transactional and info.producer_id >= 0:
                    marker = _decode_marker(records[info.position : info.position + info.size])
                txn_first_offset = self._txn_first_offset(info.producer_id)
                self.producer_state.apply_unchecked(info)
                if marker is not None:
                    self._complete_transaction(segment, info, marker, txn_first_offset)
            return self._append_info(infos, len(records), -1)

    def _append(
        self,
        buffers: list[bytes | bytearray | memoryview],
        size: int,
        infos: list[EntryInfo],
        now_ms: int,
    ) -> None:
        if self._creation_owed:
            self.sync_creation()  # no data before the new log's directory is durable
        max_timestamp = max(info.max_timestamp for info in infos)
        segment = self._segments[-1]
        if segment.should_roll(
            messages_size=size,
            max_timestamp=max_timestamp,
            max_offset=infos[-1].last_offset,
            now_ms=now_ms,
        ):
            segment = self._roll(infos[0].base_offset, now_ms)
        segment.append(buffers, infos)
        self._unflushed_messages += infos[-1].next_offset - infos[0].base_offset
        if self._unflushed_messages >= self._config.flush_messages:
            self._flush(now_ms)

    def _append_info(
        self, infos: list[EntryInfo], size: int, log_append_time_ms: int
    ) -> AppendInfo:
        best = max(infos, key=lambda info: info.max_timestamp)
        return AppendInfo(
            infos[0].base_offset,
            infos[-1].last_offset,
            best.max_timestamp,
            best.last_offset,
            log_append_time_ms,
            self._log_start_offset,
            len(infos),
            size,
        )

    def roll(self, now_ms: int) -> None:
        """Force a roll (tests, tools): the next append goes into a new segment."""
        with self._lock, self._io_guard:
            if self._segments[-1].size:
                self._roll(self.log_end_offset, now_ms)

    def _roll(self, expected_next_offset: int, now_ms: int) -> LogSegment:
        old = self._segments[-1]
        new_base = max(expected_next_offset, self.log_end_offset)
        if old.size == 0:
            # An empty active segment is replaced rather than kept (Kafka does the same).
            self._segments.pop()
            self._base_offsets.pop()
            old.close_abruptly()
            for path in old.paths():
                path.unlink(missing_ok=True)
        else:
            old.make_inactive(durable=False)
        segment = LogSegment.create(self.directory, new_base, self._config, now_ms=now_ms)
        self._add_segment(segment)
        # An empty log that jumped ahead (a follower) starts where its data starts.
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        snapshot = self.producer_state.take_snapshot(new_base, durable=False)
        # The fsyncs a roll owes (the old segment and its trimmed indexes, the snapshot, the
        # directory's new entries) run on the background worker, as Kafka schedules its
        # "flush-log" after a roll: on a busy disk each can wait seconds, and the appending
        # thread is the node's event loop. The recovery point moves past the old segment
        # only once they are done, and only if nothing was truncated meanwhile.
        durable = [*old.paths(), snapshot] if old.size else [snapshot]
        flush = partial(
            self._flush_rolled,
            durable,
            old.next_offset if old.size else None,
            self._layout_generation,
        )
        if self._background is None:
            flush()
        else:
            self._background.submit(flush)
        return segment

    def _flush_rolled(self, paths: list[Path], upto: int | None, generation: int) -> None:
        for path in paths:
            fsync_path(path)
        try:
            fsync_dir(self.directory)
        except FileNotFoundError:
            return  # the partition was deleted meanwhile
        if upto is None:
            return
        with self._lock:
            if generation == self._layout_generation and not self._closed:
                self._recovery_point = max(self._recovery_point, upto)

    def _add_segment(self, segment: LogSegment) -> None:
        if self._base_offsets and segment.base_offset <= self._base_offsets[-1]:
            raise LogError(f"{segment.log_path}: base offset not above {self._base_offsets[-1]}")
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    # ================================================================== reads

    def read(
        self,
        start_offset: int,
        *,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        with_bytes: bool = False,
        bytes_up_to: int = 0,
    ) -> FetchData:
        """Whole batches from the batch holding `start_offset`, up to `max_bytes`.

        `with_bytes` also reads the bytes now, through the segment's open descriptor and
        under the log's lock (`FetchData.data`): cheaper than `to_bytes()` later, which
        must reopen the file, and immune to later retention or compaction. `bytes_up_to`:
        the same for an answer of at most that many bytes (a region that small costs an
        open and a close more to send later than to read now).

        `max_offset` (exclusive; the HW for consumers) excludes the batch holding it and
        everything after. `min_one_batch` returns the first batch even if it exceeds
        `max_bytes` (KIP-74). Reads one segment at a time, as Kafka does.
        Raises OffsetOutOfRangeError below the log start offset or past the end.
        """
        with self._lock, self._io_guard:
            log_end_offset = self.log_end_offset
            if start_offset < self._log_start_offset or start_offset > log_end_offset:
                raise OffsetOutOfRangeError(
                    f"offset {start_offset} outside [{self._log_start_offset}, {log_end_offset}]"
                )
            empty = FetchData(start_offset, (), -1, b"" if with_bytes else None)
            if start_offset == log_end_offset:
                return empty
            slot = max(0, bisect_right(self._base_offsets, start_offset) - 1)
            for segment in self._segments[slot:]:
                first = segment.translate_offset(start_offset)
                if first is None:
                    continue
                if max_offset is not None and first.last_offset >= max_offset:
                    return empty
                limit = min(first.position + max(max_bytes, 0), segment.size)
                if max_offset is not None and max_offset < segment.next_offset:
                    bound = segment.translate_offset(max_offset, first.position)
                    if bound is not None:
                        limit = min(limit, bound.position)
                end, next_offset = segment.batch_end_within(first.position, limit)
                if end == first.position:
                    if not min_one_batch:
                        return empty
                    end, next_offset = first.position + first.size, first.next_offset
                length = end - first.position
                region = FileRegion(segment.log_path, first.position, length, segment.inode)
                data = (
                    segment.read_bytes(first.position, length)
                    if with_bytes or length <= bytes_up_to
                    else None
                )
                return FetchData(start_offset, (region,), next_offset, data)
            return empty

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest, -3 max timestamp, or the first record with
        timestamp >= `timestamp`. None when no record qualifies (Kafka answers offset -1)."""
        with self._lock, self._io_guard:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                epoch = self.leader_epoch_cache.epoch_for_offset(self._log_start_offset)
                return TimestampAndOffset(-1, self._log_start_offset, epoch)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self.log_end_offset, self.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp_and_offset()
            # Any other negative timestamp is searched like a real one, as Kafka's
            # fetchOffsetByTimestamp does: the first record (the fuzzer found -2^63 raising
            # out of the ListOffsets handler, issue 12 item 8).
            for segment in self._segments:
                if segment.max_timestamp < timestamp or segment.size == 0:
                    continue
                _, indexed_offset = segment.time_index.lookup(timestamp)
                start = max(indexed_offset, self._log_start_offset)
                _, position = segment.offset_index.lookup(start)
                for info in segment.iter_entries(position):
                    if info.max_timestamp >= timestamp and info.last_offset >= start:
                        found = self._record_at_or_after(segment, info, timestamp, start)
                        if found is not None:
                            return found
            return None

    def _record_at_or_after(
        self, segment: LogSegment, info: EntryInfo, timestamp: int, start_offset: int
    ) -> TimestampAndOffset | None:
        from trafka.log.records import iter_batches  # records decoding only here

        data = segment.read_bytes(info.position, info.size)
        epoch = info.partition_leader_epoch if info.partition_leader_epoch >= 0 else None
        for decoded in iter_batches(data):
            for record in decoded.records:
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return TimestampAndOffset(record.timestamp, record.offset, epoch)
        return None

    def _max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None or best.max_timestamp < 0:
            return None
        info = best.translate_offset(best.offset_of_max_timestamp)
        if info is None:
            return None
        from trafka.log.records import iter_batches

        epoch = info.partition_leader_epoch if info.partition_leader_epoch >= 0 else None
        for decoded in iter_batches(best.read_bytes(info.position, info.size)):
            for record in decoded.records:
                if record.timestamp == best.max_timestamp:
                    return TimestampAndOffset(record.timestamp, record.offset, epoch)
        return TimestampAndOffset(best.max_timestamp, info.last_offset, epoch)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101): (largest epoch <= `epoch`, its end offset)."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for_epoch(epoch, self.log_end_offset)

    # ================================================================== truncation

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: drop every batch at or above `offset`. True if anything went."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock, self._io_guard:
            self._check_open()
            if offset >= self.log_end_offset:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset, self._last_now_ms)
                return True
            doomed = [segment for segment in self._segments if segment.base_offset > offset]
            if doomed:
                self._remove_segments(doomed)
            segment = self._segments[-1]
            self._layout_generation += 1
            self.truncations += 1
            dropped = segment.truncate_to(offset)
            segment.make_active()
            logger.info("%s: truncated to %d (%d bytes dropped)", self.directory, offset, dropped)
            self._after_truncation()
            return True

    def _after_truncation(self) -> None:
        end = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, end)
        self._high_watermark = min(self._high_watermark, end)
        self._recovery_point = min(self._recovery_point, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self.producer_state.delete_snapshots_above(end)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything; the log restarts empty at `offset` (a follower far behind)."""
        with self._lock, self._io_guard:
            self._check_open()
            self._truncate_fully(offset, self._last_now_ms)

    def _truncate_fully(self, offset: int, now_ms: int) -> None:
        if self._creation_owed:
            self.sync_creation()
        self.truncations += 1
        self._remove_segments(list(self._segments), allow_all=True)
        segment = LogSegment.create(self.directory, offset, self._config, now_ms=now_ms)
        fsync_dir(self.directory)
        self._add_segment(segment)
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_above(-1)
        self.producer_state.clear(offset)
        self._log_start_offset = self._high_watermark = self._recovery_point = offset

    def _remove_segments(self, doomed: list[LogSegment], *, allow_all: bool = False) -> None:
        """Take segments out of the log and rename their files `.deleted` (LOG-19)."""
        self._layout_generation += 1
        doomed_ids = {id(segment) for segment in doomed}
        remaining = [segment for segment in self._segments if id(segment) not in doomed_ids]
        if not remaining and not allow_all:
            raise AssertionError("the active segment is never removed")
        self._segments = remaining
        self._base_offsets = [segment.base_offset for segment in remaining]
        paths: list[Path] = []
        for segment in doomed:
            paths += segment.rename_to_deleted()
        due = self._last_now_ms + self._config.file_delete_delay_ms
        self._pending_deletes.append((due, paths))

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1 = the HW).

        Raises OffsetOutOfRangeError above the high watermark. Whole segments below the
        new start are deleted by the next `apply_retention`. Returns the log start offset.
        """
        with self._lock, self._io_guard:
            if offset == DELETE_RECORDS_HIGH_WATERMARK:
                offset = self._high_watermark
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: "
                    f"above the high watermark {self._high_watermark}"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
            return self._log_start_offset

    # ================================================================== retention

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes / the log start offset.

        Never deletes the active segment, nor a segment holding offsets at or above the
        high watermark (SEEDS LOG-08, LOG-19..23). Returns the number of segments deleted.
        """
        with self._lock, self._io_guard:
            self._check_open()
            self._last_now_ms = now_ms
            config = self._config
            deleted = 0
            if config.delete and config.retention_ms >= 0:
                deleted += self._delete_oldest(
                    lambda segment, _: now_ms - segment.largest_timestamp > config.retention_ms,
                    "retention.ms",
                )
            if config.delete and config.retention_bytes >= 0:
                excess = self.size_bytes - config.retention_bytes

                def over_size(segment: LogSegment, _: int) -> bool:
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                deleted += self._delete_oldest(over_size, "retention.bytes")
            deleted += self._delete_oldest(
                lambda _, upper: upper <= self._log_start_offset, "log start offset"
            )
            self.delete_expired_files(now_ms)
            return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, int], bool], reason: str) -> int:
        doomed = []
        for slot, segment in enumerate(self._segments[:-1]):
            upper = self._segments[slot + 1].base_offset
            if upper > self._high_watermark or not predicate(segment, upper):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        self._remove_segments(doomed)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.delete_snapshots_below(self._segments[0].base_offset)
        logger.info(
            "%s: deleted %d segment(s) by %s; log start offset now %d",
            self.directory,
            len(doomed),
            reason,
            self._log_start_offset,
        )
        return len(doomed)

    def delete_expired_files(self, now_ms: int) -> None:
        """Remove `.deleted` files whose `file.delete.delay.ms` has passed."""
        keep = []
        for due, paths in self._pending_deletes:
            if due <= now_ms:
                for path in paths:
                    path.unlink(missing_ok=True)
            else:
                keep.append((due, paths))
        self._pending_deletes = keep

    def remove_expired_producers(self, now_ms: int) -> int:
        with self._lock:
            return self.producer_state.remove_expired(now_ms)

    # ================================================================== flush, close

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment holding data past the recovery point; advance it to the LEO."""
        with self._lock, self._io_guard:
            self._flush(self._last_now_ms if now_ms is None else now_ms)

    def _flush(self, now_ms: int) -> None:
        for segment in self._segments:
            if segment.next_offset > self._recovery_point or segment is self._segments[-1]:
                segment.flush()
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms

    def flush_if_due(self, now_ms: int) -> bool:
        """The `flush.ms` half of the flush policy (`flush.messages` is checked on append)."""
        with self._lock:
            if (
                self._recovery_point < self.log_end_offset
                and now_ms - self._last_flush_ms >= self._config.flush_ms
            ):
                self.flush(now_ms)
                return True
            return False

    def close(self) -> None:
        """Clean close: producer snapshot, trim indexes, fsync, remove pending `.deleted`."""
        with self._lock:
            if self._closed:
                return
            try:
                self.sync_creation()
                self.producer_state.take_snapshot(self.log_end_offset)
                for segment in self._segments:
                    segment.close()
                self._recovery_point = self.log_end_offset
                for _, paths in self._pending_deletes:
                    for path in paths:
                        path.unlink(missing_ok=True)
                self._pending_deletes.clear()
            except OSError as error:
                self._close_abruptly()
                raise LogDirFailedError(f"{self.directory}: {error}") from error
            self._closed = True

    def _close_abruptly(self) -> None:
        for segment in self._segments:
            try:
                segment.close_abruptly()
            except OSError:
                pass
        self._closed = True

    def mark_closed(self) -> None:
        """Refuse every append and read from now on, without touching a file (a deleted
        log: `close_abruptly` follows on another thread). A plain attribute write: safe
        without the lock, which a maintenance step on another thread may hold."""
        self._closed = True

    def close_abruptly(self) -> None:
        """Close the segment files without a snapshot or fsync (the log is being deleted)."""
        with self._lock:
            self._close_abruptly()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            self._close_abruptly()
            shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"{self.directory}: log is closed")

    # ================================================================== compaction support

    @property
    def lock(self) -> threading.RLock:
        """The log's lock, for the cleaner's swap step."""
        return self._lock

    def segments_snapshot(self) -> tuple[list[LogSegment], int]:
        """The current segment objects and the layout generation (for the cleaner)."""
        with self._lock:
            return list(self._segments), self._layout_generation

    def replace_segments(
        self,
        outputs: list[tuple[list[LogSegment], list[LogSegment]]],
        tmp: Path,
        *,
        generation: int,
    ) -> bool:
        """Swap compacted segments in (see `cleaner.py` for the crash-safe protocol).

        `outputs` pairs each group of current segments with the closed segments written
        for it in `tmp`. False (nothing changed) if any segment was removed or truncated
        since `generation` was read: the outputs may hold data the log no longer has.
        """
        with self._lock, self._io_guard:
            current = {id(segment) for segment in self._segments[:-1]}
            olds = [segment for group, _ in outputs for segment in group]
            stale = generation != self._layout_generation
            if self._closed or stale or any(id(segment) not in current for segment in olds):
                return False
            news = [segment for _, written in outputs for segment in written]
            # A `.txnindex` exists only for a segment with aborted transactions.
            suffixes = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            for segment in news:
                for suffix in suffixes:
                    name = file_name(segment.base_offset, suffix)
                    if suffix == TXN_INDEX_SUFFIX and not (tmp / name).exists():
                        continue
                    os.replace(tmp / name, self.directory / (name + SWAP_SUFFIX))
            fsync_dir(self.directory)
            marker = [f"old {s.base_offset}" for s in olds] + [f"new {s.base_offset}" for s in news]
            write_atomically(self.directory / SWAP_MARKER, ("\n".join(marker) + "\n").encode())
            first_slot = self._segments.index(olds[0])
            self._remove_segments(olds)
            for segment in news:
                for suffix in suffixes:
                    name = file_name(segment.base_offset, suffix)
                    swapped = self.directory / (name + SWAP_SUFFIX)
                    if suffix == TXN_INDEX_SUFFIX and not swapped.exists():
                        continue
                    os.replace(swapped, self.directory / name)
            fsync_dir(self.directory)
            (self.directory / SWAP_MARKER).unlink()
            loaded = []
            for segment in news:
                fresh = LogSegment(
                    self.directory, segment.base_offset, self._config, created_ms=self._last_now_ms
                )
                if not fresh.load():
                    self._recover_segment(fresh)
                    fresh.make_inactive()
                loaded.append(fresh)
            self._segments[first_slot:first_slot] = loaded
            self._base_offsets = [segment.base_offset for segment in self._segments]
            return True

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"hw={self._high_watermark}, end={self.log_end_offset})"
        )


def _check_keys(
    records: bytes | bytearray | memoryview, headers: list[tuple[int, batch_format.BatchHeader]]
) -> None:
    """A compacted topic needs a key on every record (Kafka's INVALID_RECORD)."""
    from trafka.log.records import decode_batch  # records are decoded only for compaction

    for pos, header in headers:
        if header.is_control:
            continue
        for record in decode_batch(records, pos, check_crc=False).records:
            if record.key is None:
                raise InvalidRecordError("Compacted topic cannot accept message without key")


def _decode_marker(data: bytes | bytearray | memoryview) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker of a control batch's bytes; None (logged) if it has none."""
    from trafka.log.records import decode_batch  # only control batches are decoded here

    try:
        batch = decode_batch(bytes(data), 0, check_crc=False)
        if not batch.records:
            return None
        return decode_end_transaction_marker(batch.records[0])
    except CorruptRecordError as error:
        logger.warning("control batch without a transaction marker: %s", error)
        return None
