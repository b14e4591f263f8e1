"""One log segment: a `.log` file of whole batches plus its `.index` and `.timeindex`.

Files (SEEDS LOG-04..06), all named after the segment's base offset in 20 digits::

    00000000000000001234.log        batches, back to back, exactly as on the wire
    00000000000000001234.index      offset index (see `index.py`)
    00000000000000001234.timeindex  time index
    00000000000000001234.txnindex   aborted transactions (see `txn_index.py`), if any
    00000000000000001234.snapshot   producer state at this offset (see `producer_state.py`)

Suffixes added to a whole segment's files during a lifecycle change (Kafka's):
`.deleted` (waiting `file.delete.delay.ms` before removal), `.cleaned` (compaction output
being written), `.swap` (compaction output ready to replace its sources).

The segment knows batch headers only: positions, offsets, timestamps, sizes. It never
decodes records. The append path writes the caller's bytes with one `os.write`.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from trafka.log import batch as batch_format
from trafka.log.config import INT_MAX, LogConfig
from trafka.log.errors import CorruptRecordError, LogError
from trafka.log.index import OffsetIndex, TimeIndex
from trafka.log.txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

POSITION_HINTS_MAX = 256
SCAN_CHUNK_BYTES = 8 * 1024
"""Bytes read at a time when walking batch headers from an index entry (which is at most
`index.interval.bytes` + one batch before the target)."""

_LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")

logger = logging.getLogger(__name__)


def file_name(base_offset: int, suffix: str) -> str:
    """`00000000000000001234.log` for base offset 1234 and suffix `.log`."""
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str) -> int | None:
    """The base offset of a segment file name, or None if it is not one."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class EntryInfo(NamedTuple):
    """What the log engine knows about one batch (or legacy message) on disk.

    A NamedTuple rather than a frozen dataclass: it is built for every batch header the
    read path walks, and tuple construction is several times cheaper.
    """

    position: int
    size: int
    base_offset: int
    last_offset: int
    magic: int
    max_timestamp: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset - self.base_offset) % (1 << 31)


_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_MIN_LENGTH = batch_format.HEADER_SIZE - batch_format.LOG_OVERHEAD


def entry_info_at(buf: bytes | bytearray | memoryview, pos: int, file_position: int) -> EntryInfo:
    """Decode the header of the batch at `pos` of `buf` (which sits at `file_position`).

    v2 batches give every field. Legacy (magic 0/1) messages give the offset field as both
    base and last offset (for a compressed wrapper that is its last inner offset) and no
    producer fields. Raises CorruptRecordError if the header is short or malformed.
    """
    available = len(buf) - pos
    if available < batch_format.MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"entry at {file_position}: {available} bytes, no magic byte")
    magic = buf[pos + batch_format.MAGIC_OFFSET]
    if magic == 2:
        if available < batch_format.HEADER_SIZE:
            raise CorruptRecordError(
                f"batch at {file_position}: {available} bytes, header needs 61"
            )
        (base, length, epoch, _, _, attributes, delta, _, max_timestamp, producer_id,
         producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(buf, pos)  # fmt: skip
        if length < _V2_MIN_LENGTH or count < 0 or delta < 0:
            raise CorruptRecordError(f"batch at {file_position}: bad length, count or delta")
        return EntryInfo(
            file_position,
            length + batch_format.LOG_OVERHEAD,
            base,
            base + delta,
            2,
            max_timestamp,
            epoch,
            producer_id,
            producer_epoch,
            base_sequence,
            bool(attributes & batch_format.TRANSACTIONAL_MASK),
            bool(attributes & batch_format.CONTROL_MASK),
        )
    if magic in (0, 1):
        if available < _LEGACY_HEADER.size + (8 if magic == 1 else 0):
            raise CorruptRecordError(f"message at {file_position}: short legacy header")
        offset, length, _crc, _magic, _attributes = _LEGACY_HEADER.unpack_from(buf, pos)
        if length < 14:
            raise CorruptRecordError(f"message at {file_position}: size {length} too small")
        timestamp = _INT64.unpack_from(buf, pos + 18)[0] if magic == 1 else -1
        return EntryInfo(
            file_position,
            length + 12,
            offset,
            offset,
            magic,
            timestamp,
            -1,
            -1,
            -1,
            -1,
            False,
            False,
        )
    raise CorruptRecordError(f"entry at {file_position}: unknown magic {magic}")


def entry_is_valid(buf: bytes | bytearray | memoryview, pos: int, info: EntryInfo) -> bool:
    """CRC check: CRC-32C over attributes..end (v2) or CRC-32 over magic..end (v0/v1)."""
    if info.magic == 2:
        crc = struct.unpack_from(">I", buf, pos + batch_format.CRC_OFFSET)[0]
        return bool(batch_format.compute_crc(buf, pos, info.size) == crc)
    import zlib

    crc = struct.unpack_from(">I", buf, pos + 12)[0]
    return bool(zlib.crc32(memoryview(buf)[pos + 16 : pos + info.size]) == crc)


Buffer = bytes | bytearray | memoryview
_IOV_MAX = 1024


def _pwrite_all(fd: int, buffers: Sequence[Buffer], position: int) -> int:
    """Write every buffer at `position` onwards; return the bytes written."""
    written_total = 0
    for start in range(0, len(buffers), _IOV_MAX):
        group = buffers[start : start + _IOV_MAX]
        size = sum(len(b) for b in group)
        written = os.pwritev(fd, group, position + written_total)
        if written < size:  # a short write (rare on regular files): finish it plainly
            rest = memoryview(b"".join(group))[written:]
            while rest:
                count = os.pwrite(fd, rest, position + written_total + written)
                written += count
                rest = rest[count:]
        written_total += size
    return written_total


def iter_entries_in(fd: int, start_position: int, end_position: int) -> Iterator[EntryInfo]:
    """Headers of the batches of the file `fd` from `start_position` to `end_position`.

    Reads just one header at first and after a large batch, `SCAN_CHUNK_BYTES` at a time
    through runs of small batches; stops at a batch that does not end by `end_position`
    (the caller's idea of the file size).
    """
    pos = start_position
    chunk = b""
    chunk_start = pos
    read_size = batch_format.HEADER_SIZE
    while pos + batch_format.LOG_OVERHEAD + 5 <= end_position:
        offset_in_chunk = pos - chunk_start
        if offset_in_chunk + batch_format.HEADER_SIZE > len(chunk):
            chunk = os.pread(fd, read_size, pos)
            chunk_start, offset_in_chunk = pos, 0
        info = entry_info_at(chunk, offset_in_chunk, pos)
        if pos + info.size > end_position:
            return
        yield info
        pos += info.size
        read_size = SCAN_CHUNK_BYTES if info.size < SCAN_CHUNK_BYTES else batch_format.HEADER_SIZE


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What `LogSegment.recover` found: valid entries kept and the torn tail dropped."""

    entries: tuple[EntryInfo, ...]
    truncated_bytes: int
    reason: str


class LogSegment:
    """A segment: its files, its in-memory state, and header-level reads and writes."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, *, created_ms: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(
            directory / file_name(base_offset, INDEX_SUFFIX),
            base_offset,
            config.segment_index_bytes,
        )
        self.time_index = TimeIndex(
            directory / file_name(base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            config.segment_index_bytes,
        )
        self.txn_index = TransactionIndex(directory / file_name(base_offset, TXN_INDEX_SUFFIX))
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        stat = os.fstat(self._fd)
        self.size = stat.st_size
        self.inode = stat.st_ino
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._position_hints: dict[int, int] = {}
        """offset -> position of a batch starting there: where recent reads ended and the
        last append began, so a sequential reader finds its batch with one header read."""
        self._tail: EntryInfo | None = None
        """The last batch this process appended (absolute position), while it ends the
        file: reads at the log end (a follower or consumer right behind the producer) find
        their batch and the file's end without reading a header."""

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int
    ) -> LogSegment:
        """A new, empty, active segment (indexes preallocated)."""
        segment = cls(directory, base_offset, config, created_ms=now_ms)
        if segment.size:
            os.ftruncate(segment._fd, 0)
            segment.size = 0
        segment.offset_index.open_for_append()
        segment.time_index.open_for_append()
        return segment

    def load(self) -> bool:
        """Load the indexes of an existing segment and derive its state; False if unsound.

        On False the caller must `recover()` the segment (indexes missing or corrupt).
        """
        if not self.offset_index.path.exists() or not self.time_index.path.exists():
            return self.size == 0 and self._reset_empty()
        if not self.txn_index.sanity_check():
            logger.warning("%s: transaction index unusable, rebuilding", self.log_path)
            return False
        self.offset_index.load()
        self.time_index.load()
        try:
            self.offset_index.sanity_check(self.size)
            last_offset, last_position = self.offset_index.last_entry
            self.next_offset = self.base_offset
            for info in self.iter_entries(last_position):
                self.next_offset = info.next_offset
            if len(self.offset_index) and self.next_offset <= last_offset:
                return False
            self.time_index.sanity_check(max(self.next_offset, self.base_offset + 1))
        except LogError as error:
            logger.warning("%s: index unusable (%s), rebuilding", self.log_path, error)
            return False
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = self.size - last_position
        return True

    def _reset_empty(self) -> bool:
        self.next_offset = self.base_offset
        self._tail = None
        return True

    def make_active(self) -> None:
        """Open the indexes for append (preallocated again), as Kafka does on load."""
        self.offset_index.open_for_append()
        self.time_index.open_for_append()

    def make_inactive(self, *, durable: bool = True) -> None:
        """On roll: final time-index entry, trim both indexes to their entries (LOG-13);
        `durable=False`: without fsyncing them (the caller does, see `PartitionLog._roll`)."""
        if self.time_index.writable and self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.trim(durable=durable)
        self.time_index.trim(durable=durable)

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Clean close: trim the indexes, fsync everything, release the descriptor."""
        self.make_inactive()
        self.txn_index.flush()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    def close_abruptly(self) -> None:
        """Release descriptors without trimming (a log dir that failed, or tests)."""
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def paths(self) -> list[Path]:
        return [self.directory / file_name(self.base_offset, suffix) for suffix in SEGMENT_SUFFIXES]

    def rename_to_deleted(self) -> list[Path]:
        """Close and rename every file to `<name>.deleted`; return the new paths."""
        self.close_abruptly()
        renamed = []
        for path in self.paths():
            if path.exists():
                target = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, target)
                renamed.append(target)
        return renamed

    # ------------------------------------------------------------------ appends

    def append(self, buffers: Sequence[Buffer], entries: list[EntryInfo]) -> None:
        """Write `buffers` back to back: whole batches described by `entries`.

        `entries` positions are relative to the start of the written data. One
        `os.pwritev` (per 1024 buffers): the produce path passes each batch as a rewritten
        16-byte prefix plus a view of the producer's bytes, so the body is never copied.
        """
        position = self.size
        total = _pwrite_all(self._fd, buffers, position)
        interval = self.config.index_interval_bytes
        for info in entries:
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp = info.max_timestamp
                self.offset_of_max_timestamp = info.last_offset
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(info.last_offset, position + info.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += info.size
        if self.size == 0 and entries:
            self._rolling_based_timestamp = entries[0].max_timestamp
        self.size = position + total
        self.next_offset = entries[-1].next_offset
        last = entries[-1]
        self._tail = last._replace(position=position + last.position)
        self.remember_position(entries[0].base_offset, position + entries[0].position)

    def should_roll(
        self, *, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int
    ) -> bool:
        """Kafka's `LogSegment.shouldRoll` with the roll jitter fixed at segment.jitter.ms."""
        config = self.config
        reached_roll_ms = self.size > 0 and (
            self._time_waited_for_roll(now_ms, max_timestamp)
            > config.segment_ms - config.segment_jitter_ms
        )
        return (
            self.size > config.segment_bytes - messages_size
            or reached_roll_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or not 0 <= max_offset - self.base_offset <= INT_MAX
        )

    def _time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        rolling_based = self.rolling_based_timestamp()
        if rolling_based >= 0:
            return message_timestamp - rolling_based
        return now_ms - self.created_ms

    def rolling_based_timestamp(self) -> int:
        """The first batch's max timestamp (-1 if the segment is empty or has none)."""
        if self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = -1
            for info in self.iter_entries(0):
                self._rolling_based_timestamp = info.max_timestamp
                break
        return self._rolling_based_timestamp

    # ------------------------------------------------------------------ reads

    def iter_entries(
        self, start_position: int, end_position: int | None = None
    ) -> Iterator[EntryInfo]:
        """Headers of the batches from `start_position` (a batch boundary) to the end."""
        end = self.size if end_position is None else min(end_position, self.size)
        return iter_entries_in(self._fd, start_position, end)

    def translate_offset(self, offset: int, start_position: int = 0) -> EntryInfo | None:
        """The first batch whose last offset is >= `offset`, or None."""
        tail = self._tail
        if (
            tail is not None
            and tail.base_offset <= offset <= tail.last_offset
            and tail.position >= start_position
        ):
            return tail  # the batches before it end below its base offset
        hinted = self._position_hints.get(offset)
        if hinted is not None and hinted >= start_position:
            for info in self.iter_entries(hinted):
                if info.base_offset == offset:
                    return info
                break
        _, position = self.offset_index.lookup(offset)
        for info in self.iter_entries(max(position, start_position)):
            if info.last_offset >= offset:
                return info
        return None

    def batch_end_within(self, start_position: int, limit_position: int) -> tuple[int, int]:
        """(end, next offset) of the last whole batch from `start_position` ending <= limit.

        The next offset is where a reader continues: the base offset of the first batch
        left out, or the next offset of the last batch included (-1 if none included).
        Scans from the last index entry below the limit, not from the start; not at all
        when the limit is the end of a file whose last batch this process appended.
        """
        tail = self._tail
        if limit_position >= self.size and tail is not None and start_position < self.size:
            return self.size, tail.last_offset + 1
        scan_from = max(start_position, self.offset_index.lookup_position(limit_position))
        end = scan_from
        next_offset = -1
        for info in self.iter_entries(scan_from):
            if info.position + info.size > limit_position:
                if end > start_position:
                    next_offset = info.base_offset
                break
            end = info.position + info.size
            next_offset = info.next_offset
        if next_offset >= 0 and end < self.size:
            self.remember_position(next_offset, end)
        return end, next_offset

    def remember_position(self, offset: int, position: int) -> None:
        """Note that a batch starting at `offset` sits at `position` (bounded)."""
        if len(self._position_hints) >= POSITION_HINTS_MAX:
            self._position_hints.clear()
        self._position_hints[offset] = position

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    # ------------------------------------------------------------------ recovery, truncation

    def recover(self, *, reason_prefix: str = "") -> RecoveryResult:
        """Re-scan the whole segment: rebuild both indexes, truncate a torn tail.

        Keeps every complete, CRC-valid batch with ascending offsets before the first bad
        byte; drops everything from there (partial batch, bad CRC, garbage, zeros).
        """
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
        for index in (self.offset_index, self.time_index):
            if index.path.exists():
                index.path.unlink()
        self.offset_index = OffsetIndex(
            self.offset_index.path, self.base_offset, self.config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            self.time_index.path, self.base_offset, self.config.segment_index_bytes
        )
        self.offset_index.open_for_append()
        self.time_index.open_for_append()
        self.txn_index.reset()  # rebuilt by the partition log, which knows the producers
        self.size = os.fstat(self._fd).st_size
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self._position_hints.clear()
        self._tail = None
        entries: list[EntryInfo] = []
        valid_end, reason = self._scan_valid(entries)
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
        return RecoveryResult(
            tuple(entries), truncated, reason_prefix + reason if truncated else ""
        )

    def _scan_valid(self, entries: list[EntryInfo]) -> tuple[int, str]:
        if self.size == 0:
            return 0, ""
        with (
            mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) as mapped,
            memoryview(mapped) as data,
        ):
            pos = 0
            expected_offset = self.base_offset
            interval = self.config.index_interval_bytes
            while pos < self.size:
                if self.size - pos < batch_format.LOG_OVERHEAD + 5:
                    return pos, f"partial batch header ({self.size - pos} bytes) at {pos}"
                try:
                    info = entry_info_at(data, pos, pos)
                except CorruptRecordError as error:
                    if all(byte == 0 for byte in data[pos : min(self.size, pos + 4096)]):
                        return pos, f"zero bytes from {pos}"
                    return pos, f"corrupt batch header at {pos}: {error}"
                if pos + info.size > self.size:
                    return (
                        pos,
                        f"partial batch at {pos} ({info.size} bytes, {self.size - pos} present)",
                    )
                if not entry_is_valid(data, pos, info):
                    return pos, f"CRC mismatch in batch at {pos}"
                if info.base_offset < expected_offset or info.last_offset < info.base_offset:
                    return pos, f"offset {info.base_offset} at {pos} below {expected_offset}"
                if info.last_offset - self.base_offset > INT_MAX:
                    return pos, f"offset {info.last_offset} at {pos} outside the segment"
                if info.max_timestamp > self.max_timestamp:
                    self.max_timestamp = info.max_timestamp
                    self.offset_of_max_timestamp = info.last_offset
                if self.bytes_since_last_index_entry > interval and not self.offset_index.is_full:
                    self.offset_index.append(info.last_offset, pos)
                    self.time_index.maybe_append(
                        self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
                    )
                    self.bytes_since_last_index_entry = 0
                self.bytes_since_last_index_entry += info.size
                if self._rolling_based_timestamp is None:
                    self._rolling_based_timestamp = info.max_timestamp
                entries.append(info)
                expected_offset = info.next_offset
                self.next_offset = info.next_offset
                pos += info.size
        return pos, ""

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; return the bytes dropped."""
        self._position_hints.clear()
        self._tail = None
        info = self.translate_offset(offset)
        if info is None:
            return 0
        dropped = self.size - info.position
        os.ftruncate(self._fd, info.position)
        self.size = info.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.next_offset = self.base_offset
        _, last_position = self.offset_index.last_entry
        for entry in self.iter_entries(last_position):
            self.next_offset = entry.next_offset
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.bytes_since_last_index_entry = 0
        if self.size == 0:
            self._rolling_based_timestamp = None
        return dropped

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp of the segment, falling back to the file's mtime (SEEDS LOG-23)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"
