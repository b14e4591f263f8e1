"""The transaction index of a segment: its aborted transactions (`.txnindex`, KIP-98, EOS-05).

One file per segment, `<20-digit base offset>.txnindex`, holding one entry per transaction
whose ABORT marker lies in the segment, in marker order. Kafka's layout (`AbortedTxn`), 34
bytes per entry, big-endian::

    0   2  version            0
    2   8  producerId
    10  8  firstOffset        the transaction's first offset in this partition
    18  8  lastOffset         the offset of its ABORT marker
    26  8  lastStableOffset   the partition's LSO once this transaction completed

A READ_COMMITTED fetch answers `aborted_transactions` (producer id, first offset) for every
entry that overlaps the fetched range; the consumer skips those producers' batches from
each first offset until it reaches their ABORT marker. The index is derived data: it is
written when an ABORT marker is appended (leader or follower) and rebuilt when a segment
is recovered (so it is fsynced with its segment, not on every append); a file whose size
is not a multiple of 34 or that holds a version other than 0 is rebuilt the same way. The
file is created on the first entry (segments without aborted transactions have none, as in
Kafka).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from trafka.log.checkpoint import fsync_path
from trafka.log.errors import LogError

TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            TXN_INDEX_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Parse a `.txnindex`; LogError if its size or an entry's version is wrong."""
    if len(data) % ENTRY_SIZE:
        raise LogError(f"transaction index of {len(data)} bytes is not whole entries")
    entries = []
    for version, producer_id, first, last, stable in _ENTRY.iter_unpack(data):
        if version != TXN_INDEX_VERSION:
            raise LogError(f"transaction index entry version {version}")
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


class TransactionIndex:
    """The `.txnindex` of one segment; entries kept in memory once read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                self._entries = decode_entries(self.path.read_bytes())
            except FileNotFoundError:
                self._entries = []
        return self._entries

    def sanity_check(self) -> bool:
        """False if the file is unreadable (the caller rebuilds it)."""
        try:
            _ = self.entries
        except LogError:
            return False
        return True

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise LogError(
                f"{self.path}: aborted transaction at {entry.last_offset} not after "
                f"{entries[-1].last_offset}"
            )
        # Not fsynced here (the append runs on the event loop): the index is fsynced with its
        # segment (`LogSegment.flush`, `close`, a roll's deferred flush), and an entry lost
        # with the page cache belongs to a segment past the recovery point, which recovery
        # re-reads and re-indexes.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)
        entries.append(entry)

    def flush(self) -> None:
        """fsync the file if it exists."""
        fsync_path(self.path)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at or after `offset`."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) != len(self.entries):
            self._rewrite(kept)

    def reset(self) -> None:
        self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if entries:
            self.path.write_bytes(b"".join(entry.encode() for entry in entries))
        else:
            self.path.unlink(missing_ok=True)
        self._entries = list(entries)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset), and whether the search is
        complete (an entry's LSO reaches the bound: later segments cannot overlap the range
        with a transaction that started before it)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False
