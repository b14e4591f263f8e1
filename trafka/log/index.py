"""Sparse offset and time indexes of a segment: Kafka's `.index` and `.timeindex` files.

Offset index (`<base offset>.index`, SEEDS LOG-14..16), 8 bytes per entry, big-endian::

    0  4  relativeOffset   last offset of the indexed batch - the segment's base offset
    4  4  position         byte position of that batch in the `.log` file

Time index (`<base offset>.timeindex`, SEEDS LOG-17, LOG-18), 12 bytes per entry::

    0  8  timestamp        the segment's max timestamp so far
    8  4  relativeOffset   offset of the batch holding that timestamp - base offset

Both are sparse, ascending and searched with a binary search. A writable index is
preallocated to `segment.index.bytes` (rounded down to a whole entry; the tail is zeros) and
trimmed to its entries when the segment rolls or the log closes (SEEDS LOG-13). A read-only
index is read once into memory; entries live in two `array`s so lookups are `bisect`.

Appends touch memory only; `sync` (called by flush, roll and close) writes the new entries
with one `os.pwrite`. Not mmap: the file bytes are Kafka's either way.

Loading strips trailing all-zero entries (the unused preallocated tail of a file that was
not trimmed because the process died) and `sanity_check` rejects anything else out of
order, so the caller rebuilds the index from the log.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from trafka.log.errors import LogError

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(LogError):
    """An index file whose entries break its invariants; rebuild it from the log."""


class IndexFullError(LogError):
    """An append to an index that already holds `max_entries` entries."""


class _IndexFile:
    """The file half shared by both indexes: open, preallocate, trim, fsync, close."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._writable = False
        self._written = 0
        """Entries already written to the file; later ones are written by `sync`."""

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def __len__(self) -> int:
        raise NotImplementedError

    def _on_file(self, *steps: Callable[[int], object]) -> None:
        """Open the file for one write, run `steps` on its descriptor, close it; nothing
        if the file is gone (a deletion or retention removed it: what was to be written
        has no reader left).

        No descriptor stays open between writes: appends touch memory only and the file is
        written on sync, flush, roll and close, so holding one would cost two descriptors
        per partition for nothing (10,000 partitions: 20,000 of them, past a usual
        `ulimit -n`; Kafka likewise closes its index files once they are mapped)."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            for step in steps:
                step(fd)
        finally:
            os.close(fd)

    def open_for_append(self) -> None:
        """Create if missing and preallocate to the maximum size (the active segment's index)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self.max_entries * self.entry_size)
        finally:
            os.close(fd)
        self._writable = True

    def trim(self, *, durable: bool = True) -> None:
        """Shrink the file to its entries and close it for writing (roll, close).
        `durable=False` leaves the fsync to the caller (a roll fsyncs it off the loop)."""
        if not self._writable:
            return
        self._writable = False
        size = len(self) * self.entry_size
        self._on_file(
            self._write_pending,
            lambda fd: os.ftruncate(fd, size),
            *((os.fsync,) if durable else ()),
        )

    def flush(self) -> None:
        if self._writable:
            self._on_file(self._write_pending, os.fsync)

    def sync(self) -> None:
        """Write the entries appended since the last sync (one pwrite).

        Appends only touch memory, like Kafka's mmap'ed indexes: an index on disk matters
        only for segments below the recovery point, and those were flushed (which syncs)
        or trimmed on roll (which syncs); later ones are rebuilt on recovery.
        """
        if self._writable and self._written < len(self):
            self._on_file(self._write_pending)

    def _write_pending(self, fd: int) -> None:
        if self._written >= len(self):
            return
        os.pwrite(fd, self._encode(self._written, len(self)), self._written * self.entry_size)
        self._written = len(self)

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def close_without_trim(self) -> None:
        self._writable = False

    def _check_writable(self) -> None:
        if not self._writable:
            raise LogError(f"{self.path}: index is not open for append")

    def _truncate_file(self, entries: int) -> None:
        """After an in-memory truncation: zero the dropped slots (the file stays sized)."""
        self._written = min(self._written, entries)
        if self._writable:
            self._on_file(
                lambda fd: os.ftruncate(fd, entries * self.entry_size),
                lambda fd: os.ftruncate(fd, self.max_entries * self.entry_size),
            )
        elif self.path.exists():
            os.truncate(self.path, entries * self.entry_size)

    def _read_raw(self) -> bytes:
        data = self.path.read_bytes()
        usable = len(data) - len(data) % self.entry_size
        data = data[:usable]
        zero = bytes(self.entry_size)
        while data and data[-self.entry_size :] == zero:
            data = data[: -self.entry_size]
        return data


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions (the `.index` file)."""

    entry_size = OFFSET_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._relative_offsets = array("l")
        self._positions = array("l")

    def __len__(self) -> int:
        return len(self._relative_offsets)

    def load(self) -> None:
        """Read the entries of an existing file (missing file: empty)."""
        self._relative_offsets = array("l")
        self._positions = array("l")
        if not self.path.exists():
            return
        for relative_offset, position in _OFFSET_ENTRY.iter_unpack(self._read_raw()):
            self._relative_offsets.append(relative_offset)
            self._positions.append(position)
        self._written = len(self)

    def sanity_check(self, log_size: int) -> None:
        """Entries strictly ascending by offset, positions ascending and inside the log."""
        previous_offset, previous_position = -1, -1
        for relative_offset, position in zip(self._relative_offsets, self._positions, strict=True):
            if relative_offset <= previous_offset or position < previous_position:
                raise CorruptIndexError(f"{self.path}: entries out of order")
            if (position >= log_size and log_size > 0) or relative_offset < 0:
                raise CorruptIndexError(f"{self.path}: entry beyond the log ({position})")
            previous_offset, previous_position = relative_offset, position

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._relative_offsets and relative <= self._relative_offsets[-1]:
            raise LogError(f"{self.path}: offset {offset} not above the last index entry")
        if self.is_full:
            raise IndexFullError(f"{self.path}: full ({self.max_entries} entries)")
        self._check_writable()
        self._relative_offsets.append(relative)
        self._positions.append(position)

    def _encode(self, start: int, end: int) -> bytes:
        return b"".join(
            _OFFSET_ENTRY.pack(self._relative_offsets[i], self._positions[i])
            for i in range(start, end)
        )

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none."""
        slot = bisect_right(self._relative_offsets, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[slot], self._positions[slot]

    def lookup_position(self, position: int) -> int:
        """The largest indexed batch position at or below `position` (0 if none)."""
        slot = bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._relative_offsets:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[-1], self._positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = bisect_right(self._relative_offsets, offset - self.base_offset - 1)
        if keep == len(self._relative_offsets):
            return
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        self._truncate_file(keep)

    def entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) of every entry (for tools and tests)."""
        return [
            (self.base_offset + relative, position)
            for relative, position in zip(self._relative_offsets, self._positions, strict=True)
        ]


class TimeIndex(_IndexFile):
    """Maps timestamps to offsets (the `.timeindex` file)."""

    entry_size = TIME_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps = array("q")
        self._relative_offsets = array("l")

    def __len__(self) -> int:
        return len(self._timestamps)

    def load(self) -> None:
        self._timestamps = array("q")
        self._relative_offsets = array("l")
        if not self.path.exists():
            return
        for timestamp, relative_offset in _TIME_ENTRY.iter_unpack(self._read_raw()):
            self._timestamps.append(timestamp)
            self._relative_offsets.append(relative_offset)
        self._written = len(self)

    def sanity_check(self, next_offset: int) -> None:
        """Timestamps strictly ascending, offsets ascending and inside the segment."""
        previous_timestamp, previous_offset = -(1 << 63), -1
        for timestamp, relative in zip(self._timestamps, self._relative_offsets, strict=True):
            if timestamp <= previous_timestamp or relative < previous_offset or relative < 0:
                raise CorruptIndexError(f"{self.path}: entries out of order")
            if self.base_offset + relative >= next_offset:
                raise CorruptIndexError(f"{self.path}: entry beyond the log ({relative})")
            previous_timestamp, previous_offset = timestamp, relative

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add an entry when `timestamp` is above the last entry's (Kafka `maybeAppend`)."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        if self._relative_offsets and relative < self._relative_offsets[-1]:
            raise LogError(f"{self.path}: offset {offset} below the last time index entry")
        if self.is_full:
            if skip_full_check:
                return
            raise IndexFullError(f"{self.path}: full ({self.max_entries} entries)")
        self._check_writable()
        self._timestamps.append(timestamp)
        self._relative_offsets.append(relative)

    def _encode(self, start: int, end: int) -> bytes:
        return b"".join(
            _TIME_ENTRY.pack(self._timestamps[i], self._relative_offsets[i])
            for i in range(start, end)
        )

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below `timestamp`; (-1, base) if none."""
        slot = bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return -1, self.base_offset
        return self._timestamps[slot], self.base_offset + self._relative_offsets[slot]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = len(self._relative_offsets)
        while keep and self.base_offset + self._relative_offsets[keep - 1] >= offset:
            keep -= 1
        if keep == len(self._relative_offsets):
            return
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        self._truncate_file(keep)

    def entries(self) -> list[tuple[int, int]]:
        return [
            (timestamp, self.base_offset + relative)
            for timestamp, relative in zip(self._timestamps, self._relative_offsets, strict=True)
        ]
