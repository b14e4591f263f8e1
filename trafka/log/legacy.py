"""Decoding (not writing) of legacy message sets: magic 0 and magic 1 (SEEDS MSG-03..MSG-10).

A message set is a sequence of log entries, each one shallow message behind a log-entry
header (MSG-07, MSG-09, EXT-03)::

    offset  size  field
         0     8  offset        int64   (compressed wrapper: offset of the LAST inner message)
         8     4  messageSize   int32   bytes after this field
        12     4  crc           uint32  CRC-32 (zlib, not CRC-32C) of bytes 16..end
        16     1  magic         int8    0 or 1
        17     1  attributes    int8    bits 0-2 codec; bit 3 timestamp type (magic 1 only)
        18     8  timestamp     int64   magic 1 only
     18/26     4  keyLength     int32   -1 = null key
                  key
                  valueLength   int32   -1 = null value
                  value

So a v0 message has 14 bytes of header (MSG-03) and a v1 message 22 (MSG-06).

Compressed entries (MSG-08): the wrapper's value is a compressed message set of inner
messages (same layout, same magic, never compressed themselves). Inner offsets:

* magic 1 wrapper: inner messages carry **relative** offsets 0..n-1 and the wrapper carries
  the absolute offset of the last one, so inner absolute offset =
  wrapper offset - last inner relative offset + inner relative offset (EXT-03);
* magic 0 wrapper: inner messages carry **absolute** offsets.

Timestamps: magic 0 has none (-1). A magic 1 wrapper with LogAppendTime (attribute bit 3)
imposes its own timestamp on every inner message; with CreateTime each inner message keeps
its own (EXT-03, Kafka's `AbstractLegacyRecordBatch`).

Each shallow entry is presented as a `RecordBatch` whose `BatchHeader` is an equivalent
view: base_offset = first (inner) offset, last_offset = the entry's offset,
batch_length = messageSize (so `size` is the entry's size), crc = the CRC-32, attributes =
the message attributes (bit 3 cleared for magic 0), base_timestamp = first record's
timestamp, max_timestamp = the shallow message's timestamp (-1 for magic 0), producer
fields -1, records_count = number of records.

Not implemented: writing v0/v1 (trafka always writes v2; down-conversion for old fetchers is
not offered). Magic 0 LZ4 wrappers from 0.8/0.9 producers carry a wrong frame header
checksum (KAFKA-3160); like Kafka we ignore it (`relax_lz4_header_checksum`).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from trafka.log.batch import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CompressionType,
)
from trafka.log.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    codec_from_attributes,
    decompress,
    relax_lz4_header_checksum,
)
from trafka.log.errors import CorruptRecordError
from trafka.log.record_model import Record, RecordBatch

V0_HEADER_SIZE = 14
"""crc + magic + attributes + keyLength + valueLength (MSG-03)."""

V1_HEADER_SIZE = 22
"""V0_HEADER_SIZE + the 8-byte timestamp (MSG-06)."""

_ENTRY = struct.Struct(">qiIbb")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One decoded v0/v1 message with its log-entry header."""

    offset: int
    size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc_valid: bool

    @property
    def compression(self) -> CompressionType:
        return codec_from_attributes(self.attributes)

    @property
    def is_log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


def read_message(buf: Buffer, pos: int = 0) -> LegacyMessage:
    """Decode the log entry at `pos` (offset, size and one v0/v1 message); CRC not enforced."""
    if pos < 0:
        raise CorruptRecordError(f"negative message position {pos}")
    if len(buf) - pos < LOG_OVERHEAD + V0_HEADER_SIZE:
        raise CorruptRecordError(f"message at {pos}: too short for a v0 message")
    offset, size, crc, magic, attributes = _ENTRY.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"message at {pos}: magic {magic}, expected 0 or 1")
    minimum = V0_HEADER_SIZE if magic == 0 else V1_HEADER_SIZE
    if size < minimum:
        raise CorruptRecordError(f"message at {pos}: size {size} below {minimum} (MSG-03)")
    end = pos + LOG_OVERHEAD + size
    if end > len(buf):
        raise CorruptRecordError(f"message at {pos}: {size} bytes, {len(buf) - pos} left")
    data = bytes(buf[pos + LOG_OVERHEAD + 4 : end])  # magic..end, what the CRC covers
    crc_valid = zlib.crc32(data) == crc
    cursor = 2
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(data, cursor)
        cursor += 8
    key, cursor = _read_bytes(data, cursor, pos)
    value, cursor = _read_bytes(data, cursor, pos)
    if cursor != len(data):
        raise CorruptRecordError(f"message at {pos}: {len(data) - cursor} bytes after value")
    return LegacyMessage(offset, size, crc, magic, attributes, timestamp, key, value, crc_valid)


def _read_bytes(data: bytes, cursor: int, pos: int) -> tuple[bytes | None, int]:
    if len(data) - cursor < 4:
        raise CorruptRecordError(f"message at {pos}: length field truncated")
    (length,) = _INT32.unpack_from(data, cursor)
    cursor += 4
    if length < 0:
        return None, cursor
    if cursor + length > len(data):
        raise CorruptRecordError(f"message at {pos}: field of {length} bytes overruns")
    return data[cursor : cursor + length], cursor + length


def decode_legacy_entry(
    buf: Buffer,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    check_crc: bool = True,
) -> RecordBatch:
    """Decode the v0/v1 log entry at `pos` into a `RecordBatch` (see the module docstring)."""
    wrapper = read_message(buf, pos)
    if check_crc and not wrapper.crc_valid:
        raise CorruptRecordError(f"message at {pos}: CRC-32 mismatch")
    codec = wrapper.compression
    records: tuple[Record, ...]
    if codec is CompressionType.NONE:
        records = (Record(wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.value),)
    else:
        records = _inner_records(wrapper, codec, pos, max_decompressed_bytes, check_crc)
    # bit 3 means LogAppendTime only from magic 1 on; int8 attributes read as unsigned
    attributes = wrapper.attributes & (0xFF if wrapper.magic == 1 else 0x07)
    header = BatchHeader(
        base_offset=records[0].offset,
        batch_length=wrapper.size,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        magic=wrapper.magic,
        crc=wrapper.crc,
        attributes=attributes,
        last_offset_delta=wrapper.offset - records[0].offset,
        base_timestamp=records[0].timestamp,
        max_timestamp=wrapper.timestamp,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        records_count=len(records),
    )
    return RecordBatch(header, records)


def decode_legacy_messages(
    buf: Buffer,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    check_crc: bool = True,
) -> tuple[LegacyMessage, tuple[tuple[Record, LegacyMessage], ...]]:
    """The shallow message at `pos` and each record with the message it came from (for
    tools that show per-message CRCs, like dump-log). Same checks as `decode_legacy_entry`."""
    wrapper = read_message(buf, pos)
    if check_crc and not wrapper.crc_valid:
        raise CorruptRecordError(f"message at {pos}: CRC-32 mismatch")
    codec = wrapper.compression
    if codec is CompressionType.NONE:
        record = Record(wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.value)
        return wrapper, ((record, wrapper),)
    inner = _inner_messages(wrapper, codec, pos, max_decompressed_bytes, check_crc)
    records = _records_of(wrapper, inner)
    return wrapper, tuple(zip(records, inner, strict=True))


def _inner_records(
    wrapper: LegacyMessage, codec: CompressionType, pos: int, limit: int, check_crc: bool
) -> tuple[Record, ...]:
    return _records_of(wrapper, _inner_messages(wrapper, codec, pos, limit, check_crc))


def _inner_messages(
    wrapper: LegacyMessage, codec: CompressionType, pos: int, limit: int, check_crc: bool
) -> list[LegacyMessage]:
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed message at {pos} has a null value")
    value = wrapper.value
    if wrapper.magic == 0 and codec is CompressionType.LZ4:
        value = relax_lz4_header_checksum(value)  # KAFKA-3160: Kafka ignores it for magic 0
    inner_set = decompress(codec, value, max_output_bytes=limit)
    inner: list[LegacyMessage] = []
    cursor = 0
    while cursor < len(inner_set):
        message = read_message(inner_set, cursor)
        if message.magic != wrapper.magic:
            raise CorruptRecordError(
                f"message at {pos}: inner magic {message.magic} in a magic {wrapper.magic} wrapper"
            )
        if message.attributes & 0x07:
            raise CorruptRecordError(f"message at {pos}: compressed messages must not be nested")
        if check_crc and not message.crc_valid:
            raise CorruptRecordError(f"message at {pos}: inner message CRC-32 mismatch")
        inner.append(message)
        cursor += LOG_OVERHEAD + message.size
    if not inner:
        raise CorruptRecordError(f"compressed message at {pos} has no inner messages")
    return inner


def _records_of(wrapper: LegacyMessage, inner: list[LegacyMessage]) -> tuple[Record, ...]:
    # v0 inner offsets are absolute; v1 inner offsets are relative to the first one
    offset_shift = 0 if wrapper.magic == 0 else wrapper.offset - inner[-1].offset
    append_time = wrapper.timestamp if wrapper.is_log_append_time else None
    return tuple(
        Record(
            message.offset + offset_shift,
            message.timestamp if append_time is None else append_time,
            message.key,
            message.value,
        )
        for message in inner
    )
