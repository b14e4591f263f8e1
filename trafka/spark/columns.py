"""Decode a byte range of a segment into Arrow columns: one row per record (no Spark here).

Every record of every batch becomes one row of `LOG_SCHEMA`. Decoding goes through
`trafka.log.records` (v2) and `trafka.log.legacy` (v0/v1 message sets, via `iter_batches`'s
entry decoder): this module never parses records itself.

A batch that cannot be trusted is still reported, never skipped and never a crash:

* CRC mismatch but decodable: its records, each with `batch_crc_valid = false`;
* undecodable (bad framing, codec, record layout): ONE row with the header fields that
  could be read, `offset` = the batch's base offset, null key/value, `batch_crc_valid =
  false` and the reason in `batch_error`;
* a torn tail (fewer bytes left than the entry's length field claims): one such row, and
  the range stops there, since nothing after it can be framed.

Arrow types match the Spark DDL exactly (PLATFORM.md §6): `int` is int32, `long` int64,
`timestamp` is `timestamp[us, tz=UTC]` (Kafka's milliseconds times 1000; -1, "no
timestamp", becomes null).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from trafka.log.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CompressionType,
    TimestampType,
    crc_is_valid,
    parse_header,
)
from trafka.log.errors import CorruptRecordError
from trafka.log.records import (
    DEFAULT_MAX,
    RecordBatch,
    RecordColumns,
    RecordHeader,
    decode_batch_columns,
)
from trafka.spark.logdir import ByteRange

LOG_SCHEMA_DDL = (
    "topic string, partition int, broker int, segment string, position long, "
    "batch_base_offset long, batch_last_offset long, offset long, timestamp timestamp, "
    "timestamp_type string, key binary, value binary, "
    "headers array<struct<key: string, value: binary>>, "
    "producer_id long, producer_epoch int, sequence int, partition_leader_epoch int, "
    "is_transactional boolean, is_control boolean, compression string, magic int, "
    "batch_crc long, batch_crc_valid boolean, batch_error string"
)
"""The log table, as Spark DDL. `position` is the batch's byte position in the segment."""

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

LOG_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("broker", pa.int32()),
        ("segment", pa.string()),
        ("position", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("batch_last_offset", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("timestamp_type", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.field("element", HEADER_TYPE))),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("sequence", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("compression", pa.string()),
        ("magic", pa.int32()),
        ("batch_crc", pa.int64()),
        ("batch_crc_valid", pa.bool_()),
        ("batch_error", pa.string()),
    ]
)

ROWS_PER_ARROW_BATCH = 32768
"""Rows per yielded Arrow batch: big enough to amortise, small enough to bound memory."""

COMPRESSION_NAMES = {
    CompressionType.NONE: "none",
    CompressionType.GZIP: "gzip",
    CompressionType.SNAPPY: "snappy",
    CompressionType.LZ4: "lz4",
    CompressionType.ZSTD: "zstd",
}

_COMPRESSION_BY_ID = {int(codec): name for codec, name in COMPRESSION_NAMES.items()}
_MAX_TIMESTAMP_MS = (1 << 62) // 1000
_INT64 = struct.Struct(">q")
_OFFSET_AND_SIZE = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """Pushed-down bounds (inclusive); batches wholly outside them are not decoded.

    `timestamp_min_ms` prunes v2 batches whose maxTimestamp is below it. The pruning is
    only an optimisation: Spark re-applies every filter to the rows.
    """

    offset_min: int | None = None
    offset_max: int | None = None
    timestamp_min_ms: int | None = None

    def excludes(self, base_offset: int, last_offset: int, max_timestamp: int | None) -> bool:
        if self.offset_min is not None and last_offset < self.offset_min:
            return True
        if self.offset_max is not None and base_offset > self.offset_max:
            return True
        return (
            self.timestamp_min_ms is not None
            and max_timestamp is not None
            and max_timestamp < self.timestamp_min_ms
        )


NO_BOUNDS = OffsetBounds()


def timestamp_type_name(header: BatchHeader) -> str:
    if header.magic == 0:
        return "NoTimestampType"
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return "LogAppendTime"
    return "CreateTime"


def compression_name(attributes: int) -> str:
    """The codec of attribute bits 0-2; "unknown" for ids 5-7 (not a Kafka codec)."""
    return _COMPRESSION_BY_ID.get(attributes & 0x07, "unknown")


RECORD_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "sequence")
BATCH_COLUMNS = tuple(name for name in LOG_SCHEMA.names if name not in RECORD_COLUMNS)


@dataclass(slots=True)
class LogColumns:
    """Batches (header values + record columns) collected and turned into Arrow batches.

    Per-batch values are converted once per batch and repeated with `take`; record columns
    are chained lists converted by pyarrow in C, and timestamps scaled by pyarrow compute:
    per-record Python work stays in the log layer's decoder.
    """

    topic: str
    partition: int
    broker: int
    segment: str
    batch_values: list[tuple[Any, ...]] = field(default_factory=list)
    records: list[RecordColumns] = field(default_factory=list)
    rows: int = 0

    def __len__(self) -> int:
        return self.rows

    def _add(self, values: dict[str, Any], records: RecordColumns) -> None:
        self.batch_values.append(tuple(values[name] for name in BATCH_COLUMNS))
        self.records.append(records)
        self.rows += len(records)

    def _batch_dict(self, position: int, header: BatchHeader) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "broker": self.broker,
            "segment": self.segment,
            "position": position,
            "batch_base_offset": header.base_offset,
            "batch_last_offset": header.last_offset,
            "timestamp_type": timestamp_type_name(header),
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "partition_leader_epoch": header.partition_leader_epoch,
            "is_transactional": header.is_transactional,
            "is_control": header.is_control,
            "compression": compression_name(header.attributes),
            "magic": header.magic,
            "batch_crc": header.crc,
            "batch_crc_valid": True,
            "batch_error": None,
        }

    def add_batch(
        self,
        position: int,
        header: BatchHeader,
        records: RecordColumns,
        crc_valid: bool,
    ) -> None:
        if len(records) == 0:
            return
        values = self._batch_dict(position, header)
        values["batch_crc_valid"] = crc_valid
        self._add(values, records)

    def add_error(
        self, position: int, error: str, header: BatchHeader | None, base_offset: int | None
    ) -> None:
        """One row for an entry whose records cannot be decoded."""
        if header is not None:
            values = self._batch_dict(position, header)
            row = RecordColumns(
                [header.base_offset],
                [header.max_timestamp],
                [None],
                [None],
                [()],
                [header.base_sequence],
            )
        else:
            values = dict.fromkeys(BATCH_COLUMNS)
            values.update(
                topic=self.topic,
                partition=self.partition,
                broker=self.broker,
                segment=self.segment,
                position=position,
                batch_base_offset=base_offset,
            )
            row = RecordColumns([base_offset], [-1], [None], [None], [()], [None])  # type: ignore[list-item]
        values.update(batch_crc_valid=False, batch_error=error)
        self._add(values, row)

    def to_arrow(self) -> pa.RecordBatch:
        counts = [len(r) for r in self.records]
        take = pa.array(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
        arrays: dict[str, pa.Array] = {}
        for index, name in enumerate(BATCH_COLUMNS):
            per_batch = pa.array(
                [v[index] for v in self.batch_values], type=LOG_SCHEMA.field(name).type
            )
            arrays[name] = per_batch.take(take)
        chain = itertools.chain.from_iterable
        records = self.records
        arrays["offset"] = pa.array(list(chain(r.offsets for r in records)), type=pa.int64())
        arrays["timestamp"] = _timestamps(list(chain(r.timestamps for r in records)))
        arrays["key"] = pa.array(list(chain(r.keys for r in records)), type=pa.binary())
        arrays["value"] = pa.array(list(chain(r.values for r in records)), type=pa.binary())
        arrays["headers"] = _headers(list(chain(r.headers for r in records)))
        arrays["sequence"] = pa.array(list(chain(r.sequences for r in records)), type=pa.int32())
        batch = pa.RecordBatch.from_arrays([arrays[n] for n in LOG_SCHEMA.names], schema=LOG_SCHEMA)
        self.batch_values = []
        self.records = []
        self.rows = 0
        return batch


def _timestamps(milliseconds: list[int]) -> pa.Array:
    """Kafka milliseconds -> `timestamp[us, UTC]`; negative (no timestamp) or absurd -> null."""
    values = pa.array(milliseconds, type=pa.int64())
    valid = pc.and_(pc.greater_equal(values, 0), pc.less_equal(values, _MAX_TIMESTAMP_MS))
    micros = pc.multiply(pc.if_else(valid, values, 0), 1000)
    return pc.if_else(valid, micros, None).cast(TIMESTAMP_TYPE)


def _headers(per_record: list[tuple[RecordHeader, ...]]) -> pa.Array:
    offsets = np.zeros(len(per_record) + 1, dtype=np.int32)
    np.cumsum([len(h) for h in per_record], out=offsets[1:])
    flat = list(itertools.chain.from_iterable(per_record))
    keys = pa.array([h.key for h in flat], type=pa.string())
    values = pa.array([h.value for h in flat], type=pa.binary())
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(
        pa.array(offsets), structs, type=LOG_SCHEMA.field("headers").type
    )


@dataclass(frozen=True, slots=True)
class DecodedEntry:
    """One batch (v2) or shallow legacy entry, decoded as far as its bytes allow."""

    position: int
    size: int
    header: BatchHeader | None
    records: RecordColumns
    crc_valid: bool
    error: str | None
    base_offset: int | None


NO_RECORDS = RecordColumns([], [], [], [], [], [])


def _as_columns(batch: RecordBatch) -> RecordColumns:
    records = batch.records
    return RecordColumns(
        [r.offset for r in records],
        [r.timestamp for r in records],
        [r.key for r in records],
        [r.value for r in records],
        [r.headers for r in records],
        [r.sequence for r in records],
    )


def decode_entry(
    data: bytes, pos: int, *, max_decompressed_bytes: int = DEFAULT_MAX
) -> DecodedEntry:
    """Decode the entry at `pos` of `data` (which starts at a batch boundary).

    `size` is 0 when the entry cannot be framed (the caller stops there).
    """
    remaining = len(data) - pos
    base_offset = _INT64.unpack_from(data, pos)[0] if remaining >= 8 else None
    if remaining < LOG_OVERHEAD + 5:
        return DecodedEntry(
            pos, 0, None, NO_RECORDS, False, f"torn tail: {remaining} bytes", base_offset
        )
    length = _OFFSET_AND_SIZE.unpack_from(data, pos)[1]
    size = length + LOG_OVERHEAD
    if length < 14 or size > remaining:
        return DecodedEntry(
            pos,
            0,
            None,
            NO_RECORDS,
            False,
            f"torn or corrupt entry: length {length}, {remaining} bytes left",
            base_offset,
        )
    magic = data[pos + 16]
    if magic == 2:
        return _decode_v2(data, pos, size, base_offset, max_decompressed_bytes)
    if magic in (0, 1):
        return _decode_legacy(data, pos, size, base_offset, max_decompressed_bytes)
    return DecodedEntry(pos, 0, None, NO_RECORDS, False, f"unknown magic {magic}", base_offset)


def _decode_v2(
    data: bytes, pos: int, size: int, base_offset: int | None, limit: int
) -> DecodedEntry:
    try:
        header = parse_header(data, pos)
    except CorruptRecordError as error:
        return DecodedEntry(pos, 0, None, NO_RECORDS, False, str(error), base_offset)
    if size < HEADER_SIZE:
        return DecodedEntry(
            pos, 0, header, NO_RECORDS, False, "batch shorter than its header", None
        )
    crc_valid = crc_is_valid(data, pos, header)
    try:
        _header, columns = decode_batch_columns(
            data, pos, max_decompressed_bytes=limit, check_crc=False
        )
    except CorruptRecordError as error:
        return DecodedEntry(pos, size, header, NO_RECORDS, False, str(error), None)
    return DecodedEntry(pos, size, header, columns, crc_valid, None, None)


def _decode_legacy(
    data: bytes, pos: int, size: int, base_offset: int | None, limit: int
) -> DecodedEntry:
    from trafka.log.legacy import decode_legacy_entry

    batch: RecordBatch
    try:
        batch = decode_legacy_entry(data, pos, max_decompressed_bytes=limit, check_crc=True)
        crc_valid = True
    except CorruptRecordError:
        try:
            batch = decode_legacy_entry(data, pos, max_decompressed_bytes=limit, check_crc=False)
            crc_valid = False
        except CorruptRecordError as error:
            return DecodedEntry(pos, size, None, NO_RECORDS, False, str(error), base_offset)
    return DecodedEntry(pos, size, batch.header, _as_columns(batch), crc_valid, None, None)


def iter_entries(
    data: bytes, start_position: int, *, max_decompressed_bytes: int = DEFAULT_MAX
) -> Iterator[DecodedEntry]:
    """Entries of `data`, read from a segment at `start_position`; positions are absolute.

    Stops after the first entry that cannot be framed (reported as an error entry).
    """
    pos = 0
    end = len(data)
    while pos < end:
        entry = decode_entry(data, pos, max_decompressed_bytes=max_decompressed_bytes)
        yield DecodedEntry(
            entry.position + start_position,
            entry.size,
            entry.header,
            entry.records,
            entry.crc_valid,
            entry.error,
            entry.base_offset,
        )
        if entry.size == 0:
            return
        pos += entry.size


def read_range(byte_range: ByteRange) -> bytes:
    with open(byte_range.segment.path, "rb") as handle:
        handle.seek(byte_range.start)
        return handle.read(byte_range.end - byte_range.start)


def decode_range_to_arrow(
    byte_range: ByteRange,
    bounds: OffsetBounds = NO_BOUNDS,
    *,
    rows_per_batch: int = ROWS_PER_ARROW_BATCH,
) -> Iterator[pa.RecordBatch]:
    """The rows of one byte range of a segment, as Arrow batches of `LOG_SCHEMA`."""
    segment = byte_range.segment
    columns = LogColumns(segment.topic, segment.partition, int(segment.broker), segment.name)
    data = read_range(byte_range)
    for entry in iter_entries(data, byte_range.start):
        header = entry.header
        if header is not None and bounds.excludes(
            header.base_offset,
            header.last_offset,
            header.max_timestamp if header.magic == 2 else None,
        ):
            continue
        if entry.error is not None:
            columns.add_error(entry.position, entry.error, header, entry.base_offset)
        elif header is not None:
            columns.add_batch(entry.position, header, entry.records, entry.crc_valid)
        if len(columns) >= rows_per_batch:
            yield columns.to_arrow()
    if len(columns):
        yield columns.to_arrow()
