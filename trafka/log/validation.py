"""Record-level validation of a leader append, like Kafka's `LogValidator` (issue 12, item 3).

A batch whose header and CRC-32C are valid may still hold garbage records: a CRC says the
bytes arrived as the producer wrote them, not that the producer wrote records. Consumers
decode every record, so such a batch would poison every reader of the partition. Before a
Produce is appended, `validate_records` walks every record of every batch (decompressing
compressed ones, bounded by `max_decompressed_bytes`) and checks, as Kafka's
`DefaultRecord.readFrom` and `LogValidator` do:

* each record's length varint, and that the record uses exactly that many bytes ("Invalid
  record size");
* every varint fits its type (int32 varints, int64 varlongs; at most 5 / 10 bytes);
* key, value and header lengths are >= -1 (header keys >= 0, header counts >= 0) and stay
  inside the record;
* offset deltas are 0, 1, 2, ... in order (Kafka: "does not have incremental offsets");
* exactly `recordsCount` records and no bytes after the last one ("Incorrect declared
  batch size");
* on a compacted topic, every record has a key; the keyless ones are named one by one
  (KIP-467 `record_errors`: batch_index + message), so a client fails just those.

Everything above raises `InvalidRecordError` (Kafka's INVALID_RECORD), carrying
`record_errors` for the per-record rules. The batch-level rules (count matches
lastOffsetDelta) stay in `PartitionLog.append_as_leader`; framing and CRC in
`trafka.log.batch` (CORRUPT_MESSAGE).

The walk never builds record objects (DESIGN decision 2: batches stay opaque on the hot
path). It runs in C (`trafka/log/_recordscan.c`, built as an optional extension by
`pip install`; about 1 ns per byte) and falls back to `scan_records_python` below, the
reference with identical results (tests/log/test_validation.py checks both on arbitrary
bytes). The cost on the produce benchmark is in docs/performance.md ("record validation").

Not implemented: timestamp checks (`message.timestamp.before/after.max.ms`), the
per-record magic check of v0/v1 message sets (they are refused before this runs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trafka.log.batch import COMPRESSION_MASK, HEADER_SIZE, BatchHeader, CompressionType
from trafka.log.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from trafka.log.errors import InvalidRecordError

logger = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Reasons a record is refused (the C scanner returns the same numbers).
TRUNCATED = 1
BAD_VARINT = 2
BAD_LENGTH = 3
BAD_OFFSET_DELTA = 4
BAD_KEY_LENGTH = 5
BAD_VALUE_LENGTH = 6
BAD_HEADER_COUNT = 7
BAD_HEADER_KEY_LENGTH = 8
BAD_HEADER_VALUE_LENGTH = 9
SIZE_MISMATCH = 10
TRAILING_BYTES = 11

REASONS = {
    TRUNCATED: "record runs past the end of the batch",
    BAD_VARINT: "varint too long or out of range",
    BAD_LENGTH: "invalid record length",
    BAD_OFFSET_DELTA: "offset delta is not the record's index (no incremental offsets)",
    BAD_KEY_LENGTH: "invalid key length",
    BAD_VALUE_LENGTH: "invalid value length",
    BAD_HEADER_COUNT: "invalid header count",
    BAD_HEADER_KEY_LENGTH: "invalid header key length",
    BAD_HEADER_VALUE_LENGTH: "invalid header value length",
    SIZE_MISMATCH: "record does not use exactly its declared length",
    TRAILING_BYTES: "Incorrect declared batch size, records still remaining",
}

NO_KEY_MESSAGE = "Compacted topic cannot accept message without key"

ScanResult = tuple[int, int, list[int] | None] | None
"""None: valid. Else (index of the first bad record or -1, reason or 0, indices of keyless
records when keys are required and the structure is valid)."""

Scanner = Callable[[Buffer, int, int, int, bool], ScanResult]


@dataclass(frozen=True, slots=True)
class RecordError:
    """KIP-467: one refused record, by its index in the batch."""

    batch_index: int
    message: str


class RecordValidationError(InvalidRecordError):
    """INVALID_RECORD naming the refused records (Kafka's `RecordValidationException`)."""

    def __init__(self, message: str, record_errors: Sequence[RecordError]) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


def _varint(
    data: Buffer, pos: int, end: int, max_bytes: int, low: int, high: int
) -> tuple[int, int]:
    """(value, next position); value None-like failures are raised as _Bad."""
    unsigned = 0
    shift = 0
    for index in range(pos, min(pos + max_bytes, end)):
        byte = data[index]
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            value = (unsigned >> 1) ^ -(unsigned & 1)
            if not low <= value <= high:
                raise _Bad(BAD_VARINT)
            return value, index + 1
        shift += 7
    if pos + max_bytes <= end:
        raise _Bad(BAD_VARINT)
    raise _Bad(TRUNCATED)


class _Bad(Exception):
    def __init__(self, reason: int) -> None:
        super().__init__(reason)
        self.reason = reason


def scan_records_python(
    data: Buffer, start: int, end: int, count: int, need_keys: bool
) -> ScanResult:
    """The reference scanner over `data[start:end]`, an uncompressed records section that
    must hold exactly `count` records (module docstring for the rules)."""
    pos = start
    keyless: list[int] = []
    index = 0
    try:
        for index in range(count):
            length, pos = _varint(data, pos, end, 5, INT32_MIN, INT32_MAX)
            if length < 6:
                raise _Bad(BAD_LENGTH)
            body_end = pos + length
            if body_end > end:
                raise _Bad(TRUNCATED)
            pos += 1  # attributes (unused)
            _, pos = _varint(data, pos, body_end, 10, INT64_MIN, INT64_MAX)
            offset_delta, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
            if offset_delta != index:
                raise _Bad(BAD_OFFSET_DELTA)
            key_length, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
            if key_length < -1:
                raise _Bad(BAD_KEY_LENGTH)
            if key_length == -1:
                keyless.append(index)
            else:
                pos += key_length
            value_length, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
            if value_length < -1:
                raise _Bad(BAD_VALUE_LENGTH)
            if value_length > 0:
                pos += value_length
            headers, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
            if headers < 0:
                raise _Bad(BAD_HEADER_COUNT)
            for _ in range(headers):
                header_key_length, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
                if header_key_length < 0:
                    raise _Bad(BAD_HEADER_KEY_LENGTH)
                pos += header_key_length
                header_value_length, pos = _varint(data, pos, body_end, 5, INT32_MIN, INT32_MAX)
                if header_value_length < -1:
                    raise _Bad(BAD_HEADER_VALUE_LENGTH)
                if header_value_length > 0:
                    pos += header_value_length
            if pos != body_end:
                raise _Bad(SIZE_MISMATCH)
    except _Bad as bad:
        return index, bad.reason, None
    if pos != end:
        return count, TRAILING_BYTES, None
    if need_keys and keyless:
        return -1, 0, keyless
    return None


def _native_scanner() -> Scanner | None:
    try:
        from trafka.log._recordscan import scan_records
    except ImportError:  # not built (no C compiler at install): the reference runs
        logger.info("trafka.log._recordscan is not built; record validation runs in Python")
        return None
    return scan_records


NATIVE_SCANNER = _native_scanner()
scan_records: Scanner = NATIVE_SCANNER or scan_records_python


def validate_records(
    buf: Buffer,
    headers: Sequence[tuple[int, BatchHeader]],
    *,
    compacted: bool,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    scanner: Scanner | None = None,
) -> None:
    """Check every record of the (framing- and CRC-checked) v2 batches at `headers`.

    Raises `InvalidRecordError` (a `RecordValidationError` naming the keyless records on a
    compacted topic), or `CorruptRecordError` when a compressed batch does not decompress
    (or inflates past `max_decompressed_bytes`). Control batches are not checked here
    (clients cannot write them; markers are built by the broker)."""
    scan = scanner or scan_records
    for pos, header in headers:
        if header.is_control:
            continue
        start = pos + HEADER_SIZE
        end = pos + header.size
        data: Buffer = buf
        if header.attributes & COMPRESSION_MASK:
            data = decompress(
                CompressionType(header.attributes & COMPRESSION_MASK),
                memoryview(buf)[start:end],
                max_output_bytes=max_decompressed_bytes,
            )
            start, end = 0, len(data)
        result = scan(data, start, end, header.records_count, compacted)
        if result is None:
            continue
        index, reason, keyless = result
        if keyless:
            message = f"{NO_KEY_MESSAGE} ({len(keyless)} of {header.records_count} records)"
            raise RecordValidationError(message, [RecordError(i, NO_KEY_MESSAGE) for i in keyless])
        raise InvalidRecordError(
            f"batch at {pos}, record {index}: {REASONS.get(reason, 'invalid record')}"
        )
