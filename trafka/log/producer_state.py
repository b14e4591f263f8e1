"""Idempotent-producer state per partition, and its snapshot files (SEEDS REP-37, LOG-36).

For every producer id the log keeps the producer epoch and the metadata of its last five
batches (first/last sequence, last offset, timestamp), which is what Kafka needs to:

* answer a retried batch that is one of the last five with its ORIGINAL offsets
  (duplicate: nothing is appended);
* reject a batch whose first sequence does not follow the last one
  (OUT_OF_ORDER_SEQUENCE_NUMBER) or whose epoch is older (INVALID_PRODUCER_EPOCH);
* track an ongoing transaction's first offset (for the last stable offset).

The state is rebuilt from the batch headers of the log (no record decoding), starting
from the newest snapshot at or below the log end offset. Snapshots are taken when a
segment rolls and when the log closes, named `<20-digit offset>.snapshot`, in Kafka's
binary format (version 1; all integers big-endian)::

    0   2  version                 1
    2   4  crc                     CRC-32C of everything from byte 6 to the end
    6   4  entry count
    10     entries, 46 bytes each:
           8  producerId
           2  producerEpoch
           4  lastSequence
           8  lastOffset
           4  offsetDelta          lastOffset - firstOffset of the last batch
           8  timestamp            max timestamp of the last batch
           4  coordinatorEpoch
           8  currentTxnFirstOffset  -1 when no transaction is open

Like Kafka, a snapshot holds only each producer's LAST batch, so after a restart the older
four are known only if they lie after the snapshot offset (they are replayed from the log).
The coordinator epoch is that of the producer's last transaction marker (set by the
partition log, which decodes markers; a marker from an older coordinator epoch is refused).
Aborted transactions are indexed per segment by the partition log (`txn_index.py`).
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from trafka.log.checkpoint import write_atomically
from trafka.log.errors import InvalidProducerEpochError, LogError, OutOfOrderSequenceError
from trafka.log.segment import SNAPSHOT_SUFFIX, EntryInfo, file_name, parse_base_offset

BATCHES_RETAINED = 5
"""Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`."""
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1
SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Kafka's `producer.id.expiration.ms` default (1 day)."""

_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One of a producer's recent batches."""

    first_sequence: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """What the log remembers about one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=BATCHES_RETAINED),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, info: EntryInfo) -> BatchMetadata | None:
        if info.producer_epoch != self.producer_epoch:
            return None
        for metadata in self.batches:
            if (
                metadata.first_sequence == info.base_sequence
                and metadata.last_sequence == info.last_sequence
            ):
                return metadata
        return None

    def add_batch(self, info: EntryInfo) -> None:
        """Record `info` (an appended batch), resetting the batches on a new epoch."""
        if info.producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = info.producer_epoch
        if info.is_control:
            self.current_txn_first_offset = -1
        else:
            if info.base_sequence >= 0:
                self.batches.append(
                    BatchMetadata(
                        info.base_sequence,
                        info.last_sequence,
                        info.last_offset,
                        info.last_offset - info.base_offset,
                        info.max_timestamp,
                    )
                )
            if info.is_transactional and self.current_txn_first_offset < 0:
                self.current_txn_first_offset = info.base_offset
        self.last_timestamp = max(self.last_timestamp, info.max_timestamp)


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    """The producer table of one partition plus its snapshot files."""

    def __init__(
        self, directory: Path, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        """The offset up to which the log has been applied to this table."""
        self._unstable: int | None = None
        self._unstable_known = False
        """`first_unstable_offset` as last computed, valid until the table changes (every
        Fetch read asks it for the LSO; scanning every producer each time cost ~18% of a
        read with many idempotent producers)."""

    # ------------------------------------------------------------------ validation

    def check_batches(
        self, infos: list[EntryInfo]
    ) -> tuple[dict[int, ProducerStateEntry], BatchMetadata | None]:
        """Validate producer batches of a leader append (offsets already assigned).

        Returns the updated entries to `commit` after the write, or a duplicate's metadata
        (when the first producer batch repeats one of the last five). Raises
        InvalidProducerEpochError or OutOfOrderSequenceError.
        """
        updates: dict[int, ProducerStateEntry] = {}
        for info in infos:
            if info.producer_id < 0:
                continue
            entry = updates.get(info.producer_id)
            if entry is None:
                current = self.producers.get(info.producer_id)
                entry = current.copy() if current else ProducerStateEntry(info.producer_id)
                updates[info.producer_id] = entry
            if info.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"producer {info.producer_id}: epoch {info.producer_epoch} is older than "
                    f"the current epoch {entry.producer_epoch}"
                )
            duplicate = entry.find_duplicate(info)
            if duplicate is not None:
                return {}, duplicate
            if not info.is_control and info.base_sequence >= 0:
                self._check_sequence(entry, info)
            entry.add_batch(info)
        return updates, None

    @staticmethod
    def _check_sequence(entry: ProducerStateEntry, info: EntryInfo) -> None:
        first = info.base_sequence
        if info.producer_epoch != entry.producer_epoch:
            if first != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {info.producer_id}: new epoch {info.producer_epoch} must start at "
                    f"sequence 0, got {first}"
                )
            return
        last = entry.last_sequence
        if last == NO_SEQUENCE and first != 0:
            raise OutOfOrderSequenceError(
                f"producer {info.producer_id}: first sequence {first} with no earlier batch"
            )
        if last != NO_SEQUENCE and not _in_sequence(last, first):
            raise OutOfOrderSequenceError(
                f"producer {info.producer_id}: sequence {first} does not follow {last}"
            )

    def commit(self, updates: dict[int, ProducerStateEntry], end_offset: int) -> None:
        self._unstable_known = False
        self.producers.update(updates)
        self.map_end_offset = end_offset

    def apply_unchecked(self, info: EntryInfo) -> None:
        """Apply a batch without validation (follower appends, rebuilding from the log)."""
        if info.producer_id >= 0:
            self._unstable_known = False
            entry = self.producers.get(info.producer_id)
            if entry is None:
                entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_id)
            entry.add_batch(info)
        self.map_end_offset = info.next_offset

    # ------------------------------------------------------------------ queries

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any (for the LSO)."""
        if self._unstable_known:
            return self._unstable
        offsets = [
            e.current_txn_first_offset
            for e in self.producers.values()
            if e.current_txn_first_offset >= 0
        ]
        self._unstable = min(offsets) if offsets else None
        self._unstable_known = True
        return self._unstable

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for `producer.id.expiration.ms` with no open transaction."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        self._unstable_known = False
        return len(expired)

    def clear(self, end_offset: int) -> None:
        self._unstable_known = False
        self.producers.clear()
        self.map_end_offset = end_offset

    # ------------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            offset = parse_base_offset(path.name)
            if offset is not None and path.name == file_name(offset, SNAPSHOT_SUFFIX):
                offsets.append(offset)
        return sorted(offsets)

    def take_snapshot(self, offset: int | None = None, *, durable: bool = True) -> Path:
        """Write `<offset>.snapshot` (default: the map end offset) atomically;
        `durable=False` without fsyncs (the caller fsyncs the file and directory later; a
        snapshot lost to a power failure is unreadable or missing, and loading falls back
        to an older one and the log)."""
        offset = self.map_end_offset if offset is None else offset
        path = self.directory / file_name(offset, SNAPSHOT_SUFFIX)
        write_atomically(path, encode_snapshot(self.producers.values()), durable=durable)
        return path

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below `max_offset`; return its offset.

        Snapshots above `max_offset` are deleted (the log no longer reaches them);
        unreadable ones are deleted with a warning and an older one is tried.
        """
        self._unstable_known = False
        for offset in reversed(self.snapshot_offsets()):
            path = self.directory / file_name(offset, SNAPSHOT_SUFFIX)
            if offset > max_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except LogError as error:
                logger.warning("%s: %s; deleting it", path, error)
                path.unlink(missing_ok=True)
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            self.map_end_offset = offset
            return offset
        self.producers = {}
        return None

    def delete_snapshots_below(self, offset: int) -> None:
        """Delete snapshots older than `offset`, keeping the newest of them."""
        older = [o for o in self.snapshot_offsets() if o < offset]
        for old in older[:-1]:
            (self.directory / file_name(old, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)

    def delete_snapshots_above(self, offset: int) -> None:
        for snapshot_offset in self.snapshot_offsets():
            if snapshot_offset > offset:
                (self.directory / file_name(snapshot_offset, SNAPSHOT_SUFFIX)).unlink(
                    missing_ok=True
                )


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's producer snapshot (version 1) of `entries`."""
    body = bytearray(struct.pack(">i", 0))
    count = 0
    for entry in entries:
        last = entry.batches[-1] if entry.batches else None
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            last.last_sequence if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            last.timestamp if last else entry.last_timestamp,
            max(entry.coordinator_epoch, -1),
            entry.current_txn_first_offset,
        )
        count += 1
    struct.pack_into(">i", body, 0, count)
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot; LogError if the version, size or CRC is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise LogError("snapshot too short")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise LogError(f"snapshot version {version} unsupported")
    if crc32c.crc32c(data[6:]) != crc:
        raise LogError("snapshot CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise LogError(f"snapshot size {len(data)} does not match {count} entries")
    result = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEADER.size :]):
        (
            producer_id,
            epoch,
            last_sequence,
            last_offset,
            offset_delta,
            timestamp,
            coordinator_epoch,
            txn_first,
        ) = fields
        entry = ProducerStateEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch)
        entry.current_txn_first_offset = txn_first
        entry.last_timestamp = timestamp
        if last_sequence >= 0 and last_offset >= 0:
            first_sequence = (last_sequence - offset_delta) % (1 << 31)
            entry.batches.append(
                BatchMetadata(first_sequence, last_sequence, last_offset, offset_delta, timestamp)
            )
        result.append(entry)
    return result
