"""Control records: transaction markers and the other records of control batches (MSG-14, EXT-04).

A control batch has attribute bit 5 set; its records are not user data. Every control
record's key says what it is::

    key     version int16 (0)    type int16   0 ABORT, 1 COMMIT, 2 LEADER_CHANGE,
                                              3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER,
                                              5 KRAFT_VERSION, 6 KRAFT_VOTERS

Commit and abort markers (Kafka's `EndTransactionMarker`), written by the transaction
coordinator through WriteTxnMarkers into transactional control batches, carry::

    value   version int16 (0)    coordinatorEpoch int32

As in Kafka, a newer key or value version than we know is still read (its known prefix),
and a negative version is corrupt. Only the markers' values are decoded here: the KRaft
types (2-6) belong to Kafka's metadata log, which trafka does not keep; their keys decode
and `decode_end_transaction_marker` refuses them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from trafka.log.errors import CorruptRecordError
from trafka.log.records import NewRecord, Record, build_batch

CONTROL_KEY_VERSION = 0
END_TRANSACTION_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """The type field of a control record key (Kafka's `ControlRecordType`)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class ControlRecordKey:
    version: int
    type_id: int

    @property
    def type(self) -> ControlRecordType | None:
        """The known type, or None for a type id this version does not know."""
        try:
            return ControlRecordType(self.type_id)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT marker and the epoch of the coordinator that wrote it."""

    type: ControlRecordType
    coordinator_epoch: int
    version: int = END_TRANSACTION_MARKER_VERSION


def decode_control_key(key: bytes | None) -> ControlRecordKey:
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key too short: {key!r}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return ControlRecordKey(version, type_id)


def decode_end_transaction_marker(record: Record) -> EndTransactionMarker:
    """Decode a COMMIT/ABORT control record; anything else is `CorruptRecordError`."""
    key = decode_control_key(record.key)
    if key.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise CorruptRecordError(f"control record type {key.type_id} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError(f"transaction marker value too short: {value!r}")
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid transaction marker version {version}")
    assert key.type is not None
    return EndTransactionMarker(key.type, coordinator_epoch, version)


def encode_end_transaction_marker(marker: EndTransactionMarker, timestamp_ms: int) -> NewRecord:
    """The control record (key and value) for `marker`, at version 0."""
    if marker.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError(f"{marker.type!r} is not a transaction marker type")
    return NewRecord(
        key=_KEY.pack(CONTROL_KEY_VERSION, marker.type),
        value=_MARKER_VALUE.pack(END_TRANSACTION_MARKER_VERSION, marker.coordinator_epoch),
        timestamp=timestamp_ms,
    )


def build_end_transaction_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    now_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one marker (Kafka's
    `MemoryRecords.withEndTransactionMarker`: CreateTime, no base sequence)."""
    return build_batch(
        [encode_end_transaction_marker(marker, now_ms)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
        now_ms=now_ms,
    )
