"""Control records: transaction markers encode and decode as Kafka's EndTransactionMarker."""

from __future__ import annotations

import struct

import pytest

from trafka.log.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    decode_control_key,
    decode_end_transaction_marker,
)
from trafka.log.errors import CorruptRecordError
from trafka.log.records import Record, decode_batch


@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_marker_batch_round_trip(kind: ControlRecordType) -> None:
    raw = build_end_transaction_batch(
        EndTransactionMarker(kind, coordinator_epoch=7),
        producer_id=42,
        producer_epoch=3,
        now_ms=1234,
        base_offset=10,
    )
    batch = decode_batch(raw)
    assert batch.is_control and batch.is_transactional
    assert batch.header.base_sequence == -1
    (record,) = batch.records
    # Kafka's layout: key = version 0, type; value = version 0, coordinator epoch
    assert record.key == struct.pack(">hh", 0, int(kind))
    assert record.value == struct.pack(">hi", 0, 7)
    assert decode_end_transaction_marker(record) == EndTransactionMarker(kind, 7)


def test_newer_versions_read_known_prefix() -> None:
    record = Record(0, 0, struct.pack(">hhh", 1, 1, 99), struct.pack(">hih", 3, 5, 0))
    marker = decode_end_transaction_marker(record)
    assert (marker.type, marker.coordinator_epoch, marker.version) == (
        ControlRecordType.COMMIT,
        5,
        3,
    )


def test_other_control_types_and_bad_input() -> None:
    assert decode_control_key(struct.pack(">hh", 0, 2)).type is ControlRecordType.LEADER_CHANGE
    assert decode_control_key(struct.pack(">hh", 0, 77)).type is None
    with pytest.raises(CorruptRecordError):
        decode_end_transaction_marker(Record(0, 0, struct.pack(">hh", 0, 2), b"\x00" * 6))
    for key, value in [
        (None, b"\x00" * 6),
        (b"\x00", b"\x00" * 6),
        (struct.pack(">hh", -1, 1), b"\x00" * 6),
        (struct.pack(">hh", 0, 1), b"\x00\x00"),
        (struct.pack(">hh", 0, 1), None),
        (struct.pack(">hh", 0, 0), struct.pack(">hi", -2, 0)),
    ]:
        with pytest.raises(CorruptRecordError):
            decode_end_transaction_marker(Record(0, 0, key, value))
