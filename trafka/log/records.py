"""Record batch v2: building and decoding whole batches with their records.

The batch header layout is in `trafka.log.batch` (61 bytes, SEEDS MSG-13, EXT-01). After
`recordsCount` come the records, compressed together as one blob when attribute bits 0-2
name a codec (`trafka.log.compression`). Each record (SEEDS MSG-12, EXT-02)::

    length            varint     bytes of the record after this field
    attributes        int8       unused, written as 0
    timestampDelta    varlong    timestamp - baseTimestamp
    offsetDelta       varint     offset - baseOffset
    keyLength         varint     -1 = null key
    key               bytes
    valueLength       varint     -1 = null value (a tombstone)
    value             bytes
    headersCount      varint
    headers           headerKeyLength varint, headerKey UTF-8,
                      headerValueLength varint (-1 = null), headerValue bytes

Varints are zig-zag (`trafka.log.varint`). Rules that decoding follows, as Kafka's
`DefaultRecordBatch`/`DefaultRecord` do:

* the CRC-32C covers attributes..end of the batch (partitionLeaderEpoch is outside it);
* in a LogAppendTime batch every record's timestamp is the batch's maxTimestamp;
* when hasDeleteHorizonMs (bit 6) is set, baseTimestamp holds the delete horizon and the
  record timestamp deltas are relative to it (KIP-534);
* a record's sequence is baseSequence + offsetDelta, wrapping at 2**31, or -1 without one;
* each record must use exactly its declared length, there must be exactly recordsCount
  records and no bytes after the last one ("Incorrect declared batch size").

Decoding raises only `CorruptRecordError` (or a subclass), whatever the input.
`iter_batches` reads any magic: v0/v1 message sets go through `trafka.log.legacy`, which
presents each shallow log entry as a `RecordBatch` with an equivalent header.

The record model (`Record`, `RecordHeader`, `NewRecord`, `RecordBatch`, `RecordColumns`)
lives in `trafka.log.record_model`, a leaf that this module, `trafka.log.legacy` and
`trafka.log.columnar` import; it is re-exported here, so callers import the codec and the
values it takes and gives from one place. The numpy decoder of bulk reads,
`decode_batch_columns`, is in `trafka.log.columnar`, which imports this module (never the
other way round: the broker never loads numpy).

Not implemented: writing v0/v1 message sets (we only read them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from trafka.log.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CompressionType,
    TimestampType,
    compute_crc,
    crc_is_valid,
    entry_size_at,
    magic_at,
    parse_header,
)
from trafka.log.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    codec_from_attributes,
    compress,
    decompress,
)
from trafka.log.errors import CorruptRecordError
from trafka.log.legacy import decode_legacy_entry
from trafka.log.record_model import (
    Buffer,
    NewRecord,
    Record,
    RecordBatch,
    RecordColumns,
    RecordHeader,
)
from trafka.log.varint import read_varint, read_varlong, write_varint

__all__ = [
    "DEFAULT_MAX",
    "Buffer",
    "NewRecord",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "RecordHeader",
    "build_batch",
    "decode_batch",
    "decode_record_columns",
    "decode_records",
    "is_compressed",
    "iter_batches",
    "records_section",
]

DEFAULT_MAX = DEFAULT_MAX_DECOMPRESSED_BYTES
"""Default bound on a batch's decompressed records (64 MiB)."""

MIN_RECORD_SIZE = 7
"""The smallest possible record: length, attributes, 3 deltas/lengths and headersCount."""

SEQUENCE_MODULUS = 1 << 31

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")

# ------------------------------------------------------------------ building


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    now_ms: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode one v2 record batch, CRC included, exactly as Kafka's `MemoryRecordsBuilder`.

    baseTimestamp is the first record's timestamp (or `delete_horizon_ms` when given, which
    also sets attribute bit 6); maxTimestamp is the largest record timestamp, or `now_ms`
    for a LogAppendTime batch (which then needs `now_ms`). `last_offset_delta` defaults to
    the last record's offset delta; an empty batch (count 0, kept by compaction to retain
    producer state) needs it. Raises ValueError on inputs that cannot be encoded.
    """
    if not records and last_offset_delta is None:
        raise ValueError("an empty batch needs last_offset_delta")
    if timestamp_type is TimestampType.LOG_APPEND_TIME and now_ms is None:
        raise ValueError("a LogAppendTime batch needs now_ms")
    default_timestamp = NO_TIMESTAMP if now_ms is None else now_ms
    timestamps = [default_timestamp if r.timestamp is None else r.timestamp for r in records]
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif timestamps:
        base_timestamp = timestamps[0]
    else:
        base_timestamp = default_timestamp
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        assert now_ms is not None
        max_timestamp = now_ms
    else:
        max_timestamp = max(timestamps, default=base_timestamp)

    body = bytearray(HEADER_SIZE)
    previous_delta = -1
    for index, record in enumerate(records):
        offset_delta = index if record.offset_delta is None else record.offset_delta
        if offset_delta <= previous_delta:
            raise ValueError(f"offset deltas must increase: {offset_delta} after {previous_delta}")
        previous_delta = offset_delta
        _write_record(body, record, timestamps[index] - base_timestamp, offset_delta)
    if last_offset_delta is None:
        last_offset_delta = previous_delta
    elif last_offset_delta < previous_delta:
        raise ValueError(f"last_offset_delta {last_offset_delta} below a record's delta")

    attributes = int(compression) | int(timestamp_type) << 3
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    if compression is not CompressionType.NONE:
        body[HEADER_SIZE:] = compress(compression, memoryview(body)[HEADER_SIZE:])
    try:
        _HEADER.pack_into(
            body,
            0,
            base_offset,
            len(body) - LOG_OVERHEAD,
            partition_leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as error:
        raise ValueError(f"batch header field out of range: {error}") from None
    _CRC.pack_into(body, CRC_OFFSET, compute_crc(body, 0, len(body)))
    return bytes(body)


def _write_record(
    out: bytearray, record: NewRecord, timestamp_delta: int, offset_delta: int
) -> None:
    body = bytearray(b"\x00")  # attributes
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    write_varint(body, len(record.headers))
    for header in record.headers:
        _write_bytes(body, header.key.encode("utf-8", "surrogateescape"))
        _write_bytes(body, header.value)
    write_varint(out, len(body))
    out += body


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(0x01)  # zig-zag -1
        return
    write_varint(out, len(data))
    out += data


# ------------------------------------------------------------------ decoding


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX,
    check_crc: bool = True,
) -> RecordBatch:
    """Decode the v2 batch at `pos` with all its records; checks the CRC unless told not to.

    Raises only `CorruptRecordError` (framing, magic, CRC, codec, record layout, or records
    inflating past `max_decompressed_bytes`).
    """
    header, data = records_section(buf, pos, max_decompressed_bytes, check_crc)
    return RecordBatch(header, decode_records(data, header))


def records_section(
    buf: Buffer, pos: int, max_decompressed_bytes: int, check_crc: bool
) -> tuple[BatchHeader, bytes]:
    """The header of the v2 batch at `pos` and its records section, decompressed.

    Checks the framing and (unless told not to) the CRC; the records are not decoded.
    Shared with `trafka.log.columnar.decode_batch_columns`.
    """
    if pos < 0:
        raise CorruptRecordError(f"negative batch position {pos}")
    header = parse_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"batch at {pos}: {header.size} bytes, {len(buf) - pos} left")
    if check_crc and not crc_is_valid(buf, pos, header):
        raise CorruptRecordError(f"batch at {pos}: CRC mismatch")
    codec = codec_from_attributes(header.attributes)
    data = bytes(buf[pos + HEADER_SIZE : end])
    if codec is not CompressionType.NONE:
        data = decompress(codec, data, max_output_bytes=max_decompressed_bytes)
    return header, data


_new_record = object.__new__
_set_offset = Record.__dict__["offset"].__set__
_set_timestamp = Record.__dict__["timestamp"].__set__
_set_key = Record.__dict__["key"].__set__
_set_value = Record.__dict__["value"].__set__
_set_headers = Record.__dict__["headers"].__set__
_set_sequence = Record.__dict__["sequence"].__set__


def decode_records(data: bytes, header: BatchHeader) -> tuple[Record, ...]:
    """Decode the (uncompressed) records section of a v2 batch described by `header`."""
    columns = decode_record_columns(data, header)
    records: list[Record] = []
    append = records.append
    # The frozen dataclass __init__ costs several times more than filling the slots
    # directly; the objects are identical (same class, same slots).
    for offset, timestamp, key, value, headers, sequence in zip(
        columns.offsets,
        columns.timestamps,
        columns.keys,
        columns.values,
        columns.headers,
        columns.sequences,
        strict=True,
    ):
        record = _new_record(Record)
        _set_offset(record, offset)
        _set_timestamp(record, timestamp)
        _set_key(record, key)
        _set_value(record, value)
        _set_headers(record, headers)
        _set_sequence(record, sequence)
        append(record)
    return tuple(records)


def decode_record_columns(data: bytes, header: BatchHeader) -> RecordColumns:
    """Decode the (uncompressed) records section of a v2 batch into columns.

    The varint reads are inlined for 1- and 2-byte values (nearly every length and delta);
    longer ones go through `trafka.log.varint`.
    """
    count = header.records_count
    size = len(data)
    if count * MIN_RECORD_SIZE > size:
        raise CorruptRecordError(f"{count} records cannot fit in {size} bytes")
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    base_sequence = header.base_sequence
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    header_column: list[tuple[RecordHeader, ...]] = []
    no_headers: tuple[RecordHeader, ...] = ()
    append_offset = offsets.append
    append_timestamp = timestamps.append
    append_key = keys.append
    append_value = values.append
    append_headers = header_column.append
    pos = 0
    try:
        for _ in range(count):
            # length
            byte = data[pos]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                length = (unsigned >> 1) ^ -(unsigned & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < MIN_RECORD_SIZE - 1 or end > size:
                raise CorruptRecordError(f"record of {length} bytes at {pos} does not fit")
            pos += 1  # attributes: unused
            # timestampDelta (varlong)
            byte = data[pos]
            if byte < 0x80:
                timestamp_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                timestamp_delta = (unsigned >> 1) ^ -(unsigned & 1)
                pos += 2
            else:
                timestamp_delta, pos = read_varlong(data, pos)
            # offsetDelta
            byte = data[pos]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (unsigned >> 1) ^ -(unsigned & 1)
                pos += 2
            else:
                offset_delta, pos = read_varint(data, pos)
            # key
            byte = data[pos]
            if byte < 0x80:
                key_length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                key_length, pos = read_varint(data, pos)
            if key_length < 0:
                append_key(None)
            else:
                append_key(data[pos : pos + key_length])
                pos += key_length
            # value
            byte = data[pos]
            if byte < 0x80:
                value_length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                value_length = (unsigned >> 1) ^ -(unsigned & 1)
                pos += 2
            else:
                value_length, pos = read_varint(data, pos)
            if value_length < 0:
                append_value(None)
            else:
                append_value(data[pos : pos + value_length])
                pos += value_length
            # headers
            if data[pos] == 0:
                append_headers(no_headers)
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, end)
                append_headers(headers)
            if pos != end:
                raise CorruptRecordError(
                    f"record declared {length} bytes but used {length + pos - end}"
                )
            append_offset(offset_delta)
            append_timestamp(timestamp_delta)
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes remain after the last record")
    if base_sequence < 0:
        sequences = [NO_SEQUENCE] * count
    else:
        sequences = [(base_sequence + delta) % SEQUENCE_MODULUS for delta in offsets]
    if append_time is None:
        timestamps = [base_timestamp + delta for delta in timestamps]
    else:
        timestamps = [append_time] * count
    offsets = [base_offset + delta for delta in offsets]
    return RecordColumns(offsets, timestamps, keys, values, header_column, sequences)


def _read_headers(data: bytes, pos: int, end: int) -> tuple[tuple[RecordHeader, ...], int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    if count * 2 > end - pos:
        raise CorruptRecordError(f"{count} headers cannot fit in the record")
    headers: list[RecordHeader] = []
    for _ in range(count):
        key_length, pos = read_varint(data, pos)
        if key_length < 0:
            raise CorruptRecordError(f"negative header key size {key_length}")
        key = data[pos : pos + key_length].decode("utf-8", "surrogateescape")
        pos += key_length
        value_length, pos = read_varint(data, pos)
        if value_length < 0:
            value = None
        else:
            value = data[pos : pos + value_length]
            pos += value_length
        headers.append(RecordHeader(key, value))
    return tuple(headers), pos


def iter_batches(
    buf: Buffer,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX,
    check_crc: bool = True,
) -> Iterator[RecordBatch]:
    """Every batch (v2) or shallow log entry (v0/v1) in `buf`, which holds whole ones only.

    Magic 0 and 1 entries are decoded by `trafka.log.legacy` (compressed wrappers are
    expanded into their inner records with absolute offsets). Raises `CorruptRecordError`
    at the first bad or partial entry.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        size = entry_size_at(buf, pos)
        if pos + size > end:
            raise CorruptRecordError(f"entry at {pos}: {size} bytes, {end - pos} left")
        magic = magic_at(buf, pos)
        if magic == 2:
            yield decode_batch(
                buf, pos, max_decompressed_bytes=max_decompressed_bytes, check_crc=check_crc
            )
        elif magic in (0, 1):
            yield decode_legacy_entry(
                buf, pos, max_decompressed_bytes=max_decompressed_bytes, check_crc=check_crc
            )
        else:
            raise CorruptRecordError(f"entry at {pos}: unknown magic {magic}")
        pos += size


def is_compressed(header: BatchHeader) -> bool:
    return bool(header.attributes & COMPRESSION_MASK)
