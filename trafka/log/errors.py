"""Errors raised by the log engine.

Every decoder in `log/` raises only `CorruptRecordError` (or a subclass) on bad input, so a
caller can map it to Kafka's CORRUPT_MESSAGE / INVALID_RECORD without catching everything.

Every error carries the Kafka error code a broker answers for it (`error_code`, Kafka's
numbering as a plain int, so `log/` needs no protocol library); a subclass inherits its
parent's. The broker reads the attribute: no mapping by class name.
"""

from typing import ClassVar


class LogError(Exception):
    """Base class of the log engine's errors."""

    error_code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR


class CorruptRecordError(LogError):
    """Bytes that are not a valid record batch or message set (bad size, magic or CRC)."""

    error_code: ClassVar[int] = 2  # CORRUPT_MESSAGE


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose content breaks a rule (Kafka's INVALID_RECORD)."""

    error_code: ClassVar[int] = 87  # INVALID_RECORD


class RecordTooLargeError(LogError):
    """A batch larger than `max.message.bytes` (Kafka's MESSAGE_TOO_LARGE)."""

    error_code: ClassVar[int] = 10  # MESSAGE_TOO_LARGE


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset."""

    error_code: ClassVar[int] = 1  # OFFSET_OUT_OF_RANGE


class LogDirFailedError(LogError):
    """A log directory that could not be read or written (Kafka's KAFKA_STORAGE_ERROR)."""

    error_code: ClassVar[int] = 56  # KAFKA_STORAGE_ERROR


class RecordListTooLargeError(LogError):
    """An append larger than a whole segment (Kafka's RECORD_LIST_TOO_LARGE)."""

    error_code: ClassVar[int] = 18  # RECORD_LIST_TOO_LARGE


class OutOfOrderSequenceError(LogError):
    """An idempotent batch whose sequence does not follow the producer's last one
    (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code: ClassVar[int] = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch than the producer's current one (Kafka's
    INVALID_PRODUCER_EPOCH)."""

    error_code: ClassVar[int] = 47  # INVALID_PRODUCER_EPOCH


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is below the log end offset."""


class UnsupportedForMessageFormatError(LogError):
    """Old-format (magic 0/1) data offered for append: we store v2 only and do not
    convert (Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    error_code: ClassVar[int] = 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator epoch older than one the partition has seen
    for that producer (Kafka's TRANSACTION_COORDINATOR_FENCED)."""

    error_code: ClassVar[int] = 52  # TRANSACTION_COORDINATOR_FENCED
