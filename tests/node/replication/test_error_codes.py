"""A failed append or read answers the Kafka error code its log error carries (no mapping by
class name: a misspelt name once sent UNKNOWN_SERVER_ERROR for RECORD_LIST_TOO_LARGE)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from trafka.log import errors
from trafka.log.checkpoint import CheckpointError
from trafka.node.replication.replica_manager import _error_for


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.CorruptRecordError, ErrorCode.corrupt_message),
        (errors.InvalidRecordError, ErrorCode.invalid_record),
        (errors.RecordTooLargeError, ErrorCode.message_too_large),
        (errors.OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
        (errors.LogDirFailedError, ErrorCode.kafka_storage_error),
        (errors.RecordListTooLargeError, ErrorCode.record_list_too_large),
        (errors.OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
        (errors.InvalidProducerEpochError, ErrorCode.invalid_producer_epoch),
        (errors.UnsupportedForMessageFormatError, ErrorCode.unsupported_for_message_format),
        (errors.UnexpectedAppendOffsetError, ErrorCode.unknown_server_error),
        (CheckpointError, ErrorCode.unknown_server_error),
    ],
)
def test_log_errors_carry_their_kafka_code(error: type[Exception], code: ErrorCode) -> None:
    assert _error_for(error("boom")) == (int(code), "boom")


def test_other_errors_are_unknown_server_errors_named_in_the_message() -> None:
    assert _error_for(KeyError("k")) == (int(ErrorCode.unknown_server_error), "KeyError: 'k'")
