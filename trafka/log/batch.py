"""The record batch header: the only part of a batch the hot path looks at.

Record batch v2 (magic 2), as on the wire and on disk (Kafka docs §5.3.1)::

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            bytes after this field (whole batch = batchLength + 12)
        12     4  partitionLeaderEpoch   stamped by the leader; outside the CRC
        16     1  magic                  2
        17     4  crc                    CRC-32C of bytes 21..end
        21     2  attributes             bits 0-2 codec, 3 timestampType, 4 transactional,
                                         5 control, 6 hasDeleteHorizonMs
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61        records...

Legacy message sets (magic 0 and 1) share the first 17 bytes' shape (offset int64, size
int32, crc uint32, magic int8 at byte 16), so `magic_at` tells the formats apart.

Produce and replication treat batches as opaque bytes: check the header and CRC, rewrite
baseOffset and partitionLeaderEpoch in place (neither is covered by the CRC), append.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

import crc32c

from trafka.log.errors import CorruptRecordError

HEADER_SIZE = 61
"""Size of the v2 batch header, up to and including recordsCount."""

LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes before the length-counted part of any batch."""

MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_SIZE = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class CompressionType(IntEnum):
    """Attribute bits 0-2 (Kafka's `CompressionType`)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who set the batch timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record, wrapping at 2**31 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def magic_at(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The magic byte of the batch or message starting at `pos`."""
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"batch at {pos} too short to hold a magic byte")
    return buf[pos + MAGIC_OFFSET]


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the v2 header at `pos`; checks sizes and magic, not the CRC."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch at {pos}: {len(buf) - pos} bytes, header needs 61")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"batch at {pos}: magic {header.magic}, expected 2")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at {pos}: batchLength {header.batch_length} too small")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError(f"batch at {pos}: negative record count or offset delta")
    return header


def entry_size_at(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Total size of the batch (any magic) starting at `pos`, from its length field."""
    if len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"entry at {pos}: fewer than 12 bytes left")
    length: int = _OFFSET_AND_SIZE.unpack_from(buf, pos)[1]
    if length < 0:
        raise CorruptRecordError(f"entry at {pos}: negative length {length}")
    return length + LOG_OVERHEAD


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the stored CRC-32C matches bytes attributes..end of the batch at `pos`."""
    end = pos + header.size
    if end > len(buf):
        return False
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]
    return bool(crc32c.crc32c(view) == header.crc)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return int(crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]))


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every v2 batch in `buf`, which must hold whole batches only."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            raise CorruptRecordError(f"batch at {pos}: {header.size} bytes, {end - pos} left")
        yield pos, header
        pos += header.size


def validate_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> list[tuple[int, BatchHeader]]:
    """Check every v2 batch in `buf` (framing, magic, CRC); return their positions and headers."""
    headers = list(iter_headers(buf))
    if not headers:
        raise CorruptRecordError("no record batch in the data")
    if check_crc:
        for pos, header in headers:
            if not crc_is_valid(buf, pos, header):
                raise CorruptRecordError(f"batch at {pos}: CRC mismatch")
    return headers


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (not covered by the CRC)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp partitionLeaderEpoch in place (not covered by the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = now_ms, and recompute its CRC.

    Kafka sets the timestamp-type bit and maxTimestamp; record timestamps stay as written.
    """
    attributes: int = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
