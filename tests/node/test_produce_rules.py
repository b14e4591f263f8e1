"""Kafka's produce rules on the request's bytes (trafka.node.produce_rules, issue 12 item 3)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.records import NewRecord, build_batch
from trafka.node.produce_rules import check_produce_partition, transactional_batch_refusal

PLAIN = build_batch([NewRecord(b"v", key=b"k")], now_ms=1)
TRANSACTIONAL = build_batch(
    [NewRecord(b"t")], producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True,
    now_ms=1,
)  # fmt: skip
MARKER = build_end_transaction_batch(
    EndTransactionMarker(ControlRecordType.ABORT, 0), producer_id=7, producer_epoch=1, now_ms=1
)


def code(topic: str, records: bytes, transactional_id: str | None = None) -> ErrorCode | None:
    refusal = check_produce_partition(topic, records, transactional_id=transactional_id)
    return None if refusal is None else refusal.error_code


def test_plain_batches_pass() -> None:
    assert code("orders", PLAIN) is None
    assert code("orders", b"") is None  # left to the replica manager (CORRUPT_MESSAGE)


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
def test_internal_topics_are_refused(topic: str) -> None:
    refusal = check_produce_partition(topic, PLAIN, transactional_id=None)
    assert refusal is not None and refusal.error_code == ErrorCode.invalid_topic_exception
    assert refusal.message.startswith("Cannot append to internal topic")


def test_control_batches_from_clients_are_invalid_records() -> None:
    assert code("orders", MARKER) == ErrorCode.invalid_record
    assert code("orders", MARKER, "tx") == ErrorCode.invalid_record


def test_transactional_batches_need_a_transactional_id() -> None:
    # With an id, the coordinator decides whether the partition is in the producer's
    # transaction (trafka.node.txn_verification, tested with the transaction service).
    assert code("orders", TRANSACTIONAL) == ErrorCode.transactional_id_authorization_failed
    assert transactional_batch_refusal("orders", 7, 1, transactional_id="tx") is None


def test_one_batch_of_magic_two_only() -> None:
    assert code("orders", PLAIN + PLAIN) == ErrorCode.invalid_record
    legacy = bytearray(PLAIN)
    legacy[16] = 1
    assert code("orders", bytes(legacy)) == ErrorCode.invalid_record
    assert code("orders", PLAIN[:30]) == ErrorCode.corrupt_message
