"""`__transaction_state` records in Kafka's TransactionLogKey/Value layouts."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafka.txn.records import (
    CorruptTransactionRecordError,
    TopicPartitions,
    TransactionLogRecord,
    TransactionLogValue,
    decode_record,
    decode_value,
    encode_record,
)
from trafka.txn.state import TransactionState

VALUE = TransactionLogValue(
    producer_id=1000,
    producer_epoch=3,
    transaction_timeout_ms=60_000,
    state=TransactionState.ONGOING,
    partitions=(TopicPartitions("orders", (0, 2)), TopicPartitions("__consumer_offsets", (7,))),
    last_update_timestamp_ms=1_700_000_000_123,
    start_timestamp_ms=1_700_000_000_000,
)


def test_golden_bytes_of_key_and_value_v0() -> None:
    """Byte for byte what Kafka's generated TransactionLogKey/Value v0 serializers write."""
    key, value = encode_record(TransactionLogRecord("tx-1", VALUE))
    assert key == b"\x00\x00\x00\x04tx-1"
    expected = (
        struct.pack(">hqhib", 0, 1000, 3, 60_000, 1)
        + struct.pack(">i", 2)
        + b"\x00\x06orders"
        + struct.pack(">iii", 2, 0, 2)
        + b"\x00\x12__consumer_offsets"
        + struct.pack(">ii", 1, 7)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )
    assert value == expected


def test_round_trip_and_tombstone() -> None:
    record = TransactionLogRecord("tx-1", VALUE)
    assert decode_record(*encode_record(record)) == record
    tombstone = TransactionLogRecord("tx-1", None)
    assert encode_record(tombstone)[1] is None
    assert decode_record(*encode_record(tombstone)) == tombstone


def test_value_v1_flexible_with_tags() -> None:
    """Kafka 4 writes v1 for transaction version 2 clients: compact lengths and tags."""
    body = struct.pack(">hqhib", 1, 5, 0, 1000, 4)
    body += bytes([2])  # one partition entry (compact array: count + 1)
    body += bytes([2]) + b"t"  # compact string "t"
    body += bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])  # partitions [0, 1], no tags
    body += struct.pack(">qq", 10, 9)
    body += bytes([2]) + bytes([0, 8]) + struct.pack(">q", 4) + bytes([2, 2]) + struct.pack(">h", 2)
    value = decode_value(body)
    assert value.state is TransactionState.COMPLETE_COMMIT
    assert value.partitions == (TopicPartitions("t", (0, 1)),)
    assert (value.previous_producer_id, value.next_producer_id) == (4, -1)
    assert value.client_transaction_version == 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x05",  # unknown version
        struct.pack(">hqhib", 0, 1, 0, 1, 9),  # unknown status, truncated
        encode_record(TransactionLogRecord("x", VALUE))[1] + b"\x00",  # type: ignore[operator]
    ],
)
def test_corrupt_values_are_refused(data: bytes) -> None:
    with pytest.raises(CorruptTransactionRecordError):
        decode_value(data)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(data: bytes) -> None:
    try:
        decode_record(b"\x00\x00\x00\x01x", data)
    except CorruptTransactionRecordError:
        pass


@given(
    st.text(min_size=1, max_size=20),
    st.integers(0, 2**63 - 1),
    st.integers(0, 32767),
    st.sampled_from(list(TransactionState)),
    st.dictionaries(st.text(min_size=1, max_size=10), st.lists(st.integers(0, 1000), max_size=4)),
)
def test_round_trip_property(
    txn_id: str, pid: int, epoch: int, state: TransactionState, parts: dict[str, list[int]]
) -> None:
    value = TransactionLogValue(
        pid,
        epoch,
        1,
        state,
        tuple(TopicPartitions(t, tuple(p)) for t, p in parts.items()),
        5,
        -1,
    )
    record = TransactionLogRecord(txn_id, value)
    assert decode_record(*encode_record(record)) == record
