"""Errors raised by the log engine.

Every decoder in `log/` raises only `CorruptRecordError` (or a subclass) on bad input, so a
caller can map it to Kafka's CORRUPT_MESSAGE / INVALID_RECORD without catching everything.
"""


class LogError(Exception):
    """Base class of the log engine's errors."""


class CorruptRecordError(LogError):
    """Bytes that are not a valid record batch or message set (bad size, magic or CRC)."""


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose content breaks a rule (Kafka's INVALID_RECORD)."""


class RecordTooLargeError(LogError):
    """A batch larger than `max.message.bytes` (Kafka's MESSAGE_TOO_LARGE)."""


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset."""


class LogDirFailedError(LogError):
    """A log directory that could not be read or written (Kafka's KAFKA_STORAGE_ERROR)."""


class RecordListTooLargeError(LogError):
    """An append larger than a whole segment (Kafka's RECORD_LIST_TOO_LARGE)."""


class OutOfOrderSequenceError(LogError):
    """An idempotent batch whose sequence does not follow the producer's last one
    (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch than the producer's current one (Kafka's
    INVALID_PRODUCER_EPOCH)."""


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is below the log end offset."""


class UnsupportedForMessageFormatError(LogError):
    """Old-format (magic 0/1) data offered for append: we store v2 only and do not
    convert (Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT)."""


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator epoch older than one the partition has seen
    for that producer (Kafka's TRANSACTION_COORDINATOR_FENCED)."""
