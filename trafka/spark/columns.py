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

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from trafka.log.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CompressionType,
    TimestampType,
    crc_is_valid,
    parse_header,
)
from trafka.log.columnar import BinaryColumn, RecordArrays, decode_batch_columns
from trafka.log.errors import CorruptRecordError
from trafka.log.records import (
    DEFAULT_MAX,
    RecordBatch,
    RecordColumns,
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
_INT32_MAX = (1 << 31) - 1
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


MAX_BYTES_PER_ARROW_BATCH = 256 << 20
"""A yielded Arrow batch is cut early when its keys, values and headers reach this size,
so binary offsets stay int32 (Arrow `binary`, as Spark's `binary` needs)."""


@dataclass(slots=True)
class _Chunk:
    """One entry's rows: its per-batch values and its records (possibly one error row)."""

    batch_values: tuple[Any, ...]
    records: RecordArrays
    offset_null: bool = False
    sequence_null: bool = False


@dataclass(slots=True)
class LogColumns:
    """Batches (header values + record columns) collected and turned into Arrow batches.

    Record columns come from the log layer's vectorised decoder as numpy arrays and
    Arrow-layout byte columns (`trafka.log.columnar.RecordArrays`); they are concatenated
    and wrapped as Arrow arrays without per-record Python work. Per-batch values are
    converted once per batch and repeated with `take`.
    """

    topic: str
    partition: int
    broker: int
    segment: str
    chunks: list[_Chunk] = field(default_factory=list)
    rows: int = 0
    data_bytes: int = 0

    def __len__(self) -> int:
        return self.rows

    def full(self, rows_per_batch: int) -> bool:
        return self.rows >= rows_per_batch or self.data_bytes >= MAX_BYTES_PER_ARROW_BATCH

    def _add(self, values: dict[str, Any], chunk_records: RecordArrays, **nulls: bool) -> None:
        self.chunks.append(
            _Chunk(tuple(values[name] for name in BATCH_COLUMNS), chunk_records, **nulls)
        )
        self.rows += len(chunk_records)
        self.data_bytes += (
            len(chunk_records.key_column.data)
            + len(chunk_records.value_column.data)
            + len(chunk_records.header_keys.data)
            + len(chunk_records.header_values.data)
        )

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
        records: RecordArrays,
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
            row = _error_row(header.base_offset, header.max_timestamp, header.base_sequence)
            values.update(batch_crc_valid=False, batch_error=error)
            self._add(values, row)
            return
        values = dict.fromkeys(BATCH_COLUMNS)
        values.update(
            topic=self.topic,
            partition=self.partition,
            broker=self.broker,
            segment=self.segment,
            position=position,
            batch_base_offset=base_offset,
            batch_crc_valid=False,
            batch_error=error,
        )
        row = _error_row(base_offset or 0, -1, 0)
        self._add(values, row, offset_null=base_offset is None, sequence_null=True)

    def to_arrow(self) -> pa.RecordBatch:
        chunks = self.chunks
        counts = np.fromiter((len(c.records) for c in chunks), np.int64, len(chunks))
        take = pa.array(np.repeat(np.arange(len(chunks), dtype=np.int64), counts))
        arrays: dict[str, pa.Array] = {}
        for index, name in enumerate(BATCH_COLUMNS):
            per_batch = pa.array(
                [c.batch_values[index] for c in chunks], type=LOG_SCHEMA.field(name).type
            )
            arrays[name] = per_batch.take(take)
        records = RecordArrays.concat([c.records for c in chunks])
        offset_null = _row_mask([c.offset_null for c in chunks], counts)
        sequence_null = _row_mask([c.sequence_null for c in chunks], counts)
        arrays["offset"] = pa.array(records.offset_array, type=pa.int64(), mask=offset_null)
        arrays["timestamp"] = _timestamps(records.timestamp_array)
        arrays["key"] = _binary_array(records.key_column, pa.binary())
        arrays["value"] = _binary_array(records.value_column, pa.binary())
        arrays["headers"] = _headers(records)
        arrays["sequence"] = pa.array(records.sequence_array, type=pa.int32(), mask=sequence_null)
        batch = pa.RecordBatch.from_arrays([arrays[n] for n in LOG_SCHEMA.names], schema=LOG_SCHEMA)
        self.chunks = []
        self.rows = 0
        self.data_bytes = 0
        return batch


def _error_row(offset: int, timestamp: int, sequence: int) -> RecordArrays:
    return RecordArrays.from_columns(
        RecordColumns([offset], [timestamp], [None], [None], [()], [sequence])
    )


def _row_mask(per_chunk: list[bool], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
    """Per-row null mask from per-chunk flags; None when no row is null."""
    if not any(per_chunk):
        return None
    return np.repeat(np.array(per_chunk, dtype=np.bool_), counts)


def _timestamps(milliseconds: npt.NDArray[np.int64]) -> pa.Array:
    """Kafka milliseconds -> `timestamp[us, UTC]`; negative (no timestamp) or absurd -> null."""
    valid = (milliseconds >= 0) & (milliseconds <= _MAX_TIMESTAMP_MS)
    if bool(valid.all()):
        return pa.array(milliseconds * 1000, type=TIMESTAMP_TYPE)
    micros = np.where(valid, milliseconds, 0) * 1000
    return pa.array(micros, type=TIMESTAMP_TYPE, mask=~valid)


def _binary_array(column: BinaryColumn, arrow_type: pa.DataType) -> pa.Array:
    """Wrap an Arrow-layout column without copying the data (offsets become int32)."""
    count = len(column)
    null_count = column.null_count
    validity = (
        None if null_count == 0 else pa.py_buffer(np.packbits(column.valid, bitorder="little"))
    )
    positions = column.positions
    if int(positions[-1]) > _INT32_MAX:
        raise ValueError("an Arrow batch's binary column is over 2 GiB")
    return pa.Array.from_buffers(
        arrow_type,
        count,
        [validity, pa.py_buffer(positions.astype(np.int32)), pa.py_buffer(column.data)],
        null_count=null_count,
    )


def _header_keys(column: BinaryColumn) -> pa.Array:
    """Header keys as Arrow strings; keys that are not UTF-8 get U+FFFD for bad bytes."""
    keys = _binary_array(column, pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        texts = [(k or b"").decode("utf-8", "replace") for k in column.to_list()]
        keys = pa.array(texts, type=pa.string())
    return keys


def _headers(records: RecordArrays) -> pa.Array:
    if len(records.header_keys) == 0:
        structs = pa.StructArray.from_arrays(
            [pa.array([], type=pa.string()), pa.array([], type=pa.binary())],
            fields=list(HEADER_TYPE),
        )
    else:
        structs = pa.StructArray.from_arrays(
            [_header_keys(records.header_keys), _binary_array(records.header_values, pa.binary())],
            fields=list(HEADER_TYPE),
        )
    return pa.ListArray.from_arrays(
        pa.array(records.header_positions.astype(np.int32)),
        structs,
        type=LOG_SCHEMA.field("headers").type,
    )


@dataclass(frozen=True, slots=True)
class DecodedEntry:
    """One batch (v2) or shallow legacy entry, decoded as far as its bytes allow."""

    position: int
    size: int
    header: BatchHeader | None
    records: RecordArrays
    crc_valid: bool
    error: str | None
    base_offset: int | None


NO_RECORDS = RecordArrays.from_columns(RecordColumns([], [], [], [], [], []))


def _as_columns(batch: RecordBatch) -> RecordArrays:
    records = batch.records
    return RecordArrays.from_columns(
        RecordColumns(
            [r.offset for r in records],
            [r.timestamp for r in records],
            [r.key for r in records],
            [r.value for r in records],
            [r.headers for r in records],
            [r.sequence for r in records],
        )
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
        if columns.full(rows_per_batch):
            yield columns.to_arrow()
    if len(columns):
        yield columns.to_arrow()


PARQUET_COMPRESSION = "snappy"
"""Spark's default Parquet codec, so both export paths write alike."""

_HIVE_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def hive_partition_dir(column: str, value: str) -> str:
    """`column=value` as Spark names a partition directory (other bytes as `%XX`)."""
    escaped = "".join(
        c if c in _HIVE_SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in value
    )
    return f"{column}={escaped}"


def write_ranges_parquet(
    byte_ranges: list[ByteRange],
    bounds: OffsetBounds,
    out_dir: str,
    part: int,
    *,
    compression: str = PARQUET_COMPRESSION,
) -> int:
    """Write the rows of `byte_ranges` as Parquet under `out_dir/topic=<topic>/`, one file
    per topic named `part-<part>.parquet`, without the topic column (Spark's
    `partitionBy("topic")` layout, so `spark.read.parquet(out_dir)` reads it back with the
    same schema). A retried task rewrites the same file names. Returns the rows written.
    """
    import pyarrow.parquet as pq

    schema = LOG_SCHEMA.remove(LOG_SCHEMA.get_field_index("topic"))
    writers: dict[str, pq.ParquetWriter] = {}
    rows = 0
    try:
        for byte_range in byte_ranges:
            topic = byte_range.segment.topic
            for batch in decode_range_to_arrow(byte_range, bounds):
                writer = writers.get(topic)
                if writer is None:
                    directory = os.path.join(out_dir, hive_partition_dir("topic", topic))
                    os.makedirs(directory, exist_ok=True)
                    path = os.path.join(directory, f"part-{part:05d}.parquet")
                    writer = pq.ParquetWriter(path, schema, compression=compression)
                    writers[topic] = writer
                writer.write_batch(batch.drop_columns(["topic"]))
                rows += batch.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    return rows
