"""Errors raised by the log engine.

Every decoder in `log/` raises only `CorruptRecordError` (or a subclass) on bad input, so a
caller can map it to Kafka's CORRUPT_MESSAGE / INVALID_RECORD without catching everything.

Each class carries the Kafka error code a client gets for it as data (`error_code`), so the
broker answers `error.error_code` and never matches class names (issue 12, item 6). A log
error without a protocol meaning (`UnexpectedAppendOffsetError`, a bug on the follower
path) keeps the base class's UNKNOWN_SERVER_ERROR.
"""

from typing import ClassVar

from kio.schema.errors import ErrorCode


class LogError(Exception):
    """Base class of the log engine's errors."""

    error_code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error


class CorruptRecordError(LogError):
    """Bytes that are not a valid record batch or message set (bad size, magic or CRC)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.corrupt_message


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose content breaks a rule (Kafka's INVALID_RECORD)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.invalid_record


class RecordTooLargeError(LogError):
    """A batch larger than `max.message.bytes` (Kafka's MESSAGE_TOO_LARGE)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.message_too_large


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset."""

    error_code: ClassVar[ErrorCode] = ErrorCode.offset_out_of_range


class LogDirFailedError(LogError):
    """A log directory that could not be read or written (Kafka's KAFKA_STORAGE_ERROR)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.kafka_storage_error


class RecordListTooLargeError(LogError):
    """An append larger than a whole segment (Kafka's RECORD_LIST_TOO_LARGE)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.record_list_too_large


class OutOfOrderSequenceError(LogError):
    """An idempotent batch whose sequence does not follow the producer's last one
    (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch than the producer's current one (Kafka's
    INVALID_PRODUCER_EPOCH)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.invalid_producer_epoch


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is below the log end offset."""


class UnsupportedForMessageFormatError(LogError):
    """Old-format (magic 0/1) data offered for append: we store v2 only and do not
    convert (Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.unsupported_for_message_format
