"""One row per batch (or legacy log entry) of a segment range: what the checks compare.

`BATCH_SCHEMA` columns, beyond the header fields:

* `digest`: CRC-32C of the whole entry's bytes (base offset and partition leader epoch
  included). Replicas copy the leader's batches byte for byte (DESIGN.md decision 2), so
  replicas of one offset range must have equal digests;
* `record_offsets`, `record_digests`: per record, its offset and a CRC-32C of
  (timestamp, key, value, headers), so a divergence inside a decodable batch is located
  to the exact offset; null when the batch does not decode;
* `crc_valid`: the stored CRC against the bytes (CRC-32C for v2, CRC-32 for v0/v1);
* `error`: why the entry could not be framed or decoded (null when it was).

Records are decoded with `trafka.spark.columns.iter_entries`, i.e. `trafka.log`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import crc32c
import pyarrow as pa

from trafka.log.columnar import RecordArrays
from trafka.log.records import RecordColumns
from trafka.spark.columns import (
    NO_BOUNDS,
    TIMESTAMP_TYPE,
    DecodedEntry,
    OffsetBounds,
    compression_name,
    iter_entries,
    read_range,
)
from trafka.spark.logdir import ByteRange

BATCH_SCHEMA_DDL = (
    "topic string, partition int, broker int, log_dir string, segment string, "
    "segment_base_offset long, position long, size int, base_offset long, last_offset long, "
    "records_count int, magic int, max_timestamp timestamp, partition_leader_epoch int, "
    "producer_id long, is_transactional boolean, is_control boolean, compression string, "
    "crc long, crc_valid boolean, digest long, record_offsets array<long>, "
    "record_digests array<long>, error string"
)

BATCH_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("broker", pa.int32()),
        ("log_dir", pa.string()),
        ("segment", pa.string()),
        ("segment_base_offset", pa.int64()),
        ("position", pa.int64()),
        ("size", pa.int32()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("records_count", pa.int32()),
        ("magic", pa.int32()),
        ("max_timestamp", TIMESTAMP_TYPE),
        ("partition_leader_epoch", pa.int32()),
        ("producer_id", pa.int64()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("compression", pa.string()),
        ("crc", pa.int64()),
        ("crc_valid", pa.bool_()),
        ("digest", pa.int64()),
        ("record_offsets", pa.list_(pa.field("element", pa.int64()))),
        ("record_digests", pa.list_(pa.field("element", pa.int64()))),
        ("error", pa.string()),
    ]
)

_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_MAX_MS = (1 << 62) // 1000


def _bytes_digest(data: bytes | None, value: int) -> int:
    if data is None:
        return int(crc32c.crc32c(b"\xff\xff\xff\xff", value))
    return int(crc32c.crc32c(data, crc32c.crc32c(_LENGTH.pack(len(data)), value)))


def record_digests(records: RecordColumns | RecordArrays) -> list[int]:
    """CRC-32C of each record's timestamp, key, value and headers (lengths included)."""
    digests: list[int] = []
    for timestamp, key, value, headers in zip(
        records.timestamps, records.keys, records.values, records.headers, strict=True
    ):
        digest = int(crc32c.crc32c(_TIMESTAMP.pack(timestamp)))
        digest = _bytes_digest(key, digest)
        digest = _bytes_digest(value, digest)
        for header in headers:
            digest = _bytes_digest(header.key.encode("utf-8", "surrogateescape"), digest)
            digest = _bytes_digest(header.value, digest)
        digests.append(digest)
    return digests


def batch_row(byte_range: ByteRange, data: bytes, entry: DecodedEntry) -> dict[str, Any]:
    segment = byte_range.segment
    row: dict[str, Any] = {
        "topic": segment.topic,
        "partition": segment.partition,
        "broker": int(segment.broker),
        "log_dir": segment.log_dir,
        "segment": segment.name,
        "segment_base_offset": segment.base_offset,
        "position": entry.position,
        "size": entry.size,
        "crc_valid": entry.crc_valid,
        "error": entry.error,
        "base_offset": entry.base_offset,
    }
    if entry.size:
        local = entry.position - byte_range.start
        row["digest"] = int(crc32c.crc32c(memoryview(data)[local : local + entry.size]))
    header = entry.header
    if header is not None:
        row.update(
            base_offset=header.base_offset,
            last_offset=header.last_offset,
            records_count=header.records_count,
            magic=header.magic,
            max_timestamp=header.max_timestamp * 1000
            if 0 <= header.max_timestamp <= _MAX_MS
            else None,
            partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            compression=compression_name(header.attributes),
            crc=header.crc,
        )
    if entry.error is None:
        row["record_offsets"] = list(entry.records.offsets)
        row["record_digests"] = record_digests(entry.records)
    return row


def decode_range_batches(
    byte_range: ByteRange, bounds: OffsetBounds = NO_BOUNDS
) -> Iterator[pa.RecordBatch]:
    """The batch rows of one byte range, as one Arrow batch of `BATCH_SCHEMA`."""
    data = read_range(byte_range)
    columns: dict[str, list[Any]] = {name: [] for name in BATCH_SCHEMA.names}
    for entry in iter_entries(data, byte_range.start):
        header = entry.header
        if header is not None and bounds.excludes(header.base_offset, header.last_offset, None):
            continue
        row = batch_row(byte_range, data, entry)
        for name in BATCH_SCHEMA.names:
            columns[name].append(row.get(name))
    if columns["position"]:
        yield pa.RecordBatch.from_arrays(
            [pa.array(columns[f.name], type=f.type) for f in BATCH_SCHEMA], schema=BATCH_SCHEMA
        )
