"""The `__consumer_offsets` view: offset commits and group metadata as columns (no Spark).

Takes Arrow batches of the log table (`trafka.spark.columns.LOG_SCHEMA`, already filtered to
topic `__consumer_offsets`) and decodes each record's key and value with the group
coordinator's codecs (`trafka.group.records.decode_record`, Kafka's OffsetCommitKey/Value
and GroupMetadataKey/Value layouts, GRP-21). Used through Spark's `mapInArrow` by
`trafka.spark.jobs.consumer_offsets_frame`.

`record_type` is `offset_commit`, `group_metadata`, `other` (key versions >= 3: KIP-848 and
share-group records, not modelled), `control` (transaction markers) or `corrupt` (with
`decode_error`). A null value is a tombstone (`is_tombstone`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from trafka.group.records import (
    CorruptOffsetsRecordError,
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
)
from trafka.spark.columns import TIMESTAMP_TYPE

OFFSETS_TOPIC = "__consumer_offsets"

INPUT_COLUMNS = ("broker", "partition", "offset", "timestamp", "key", "value", "is_control")

MEMBER_TYPE = pa.struct(
    [
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("rebalance_timeout_ms", pa.int32()),
        ("session_timeout_ms", pa.int32()),
    ]
)

OFFSETS_SCHEMA = pa.schema(
    [
        ("broker", pa.int32()),
        ("offsets_partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("record_type", pa.string()),
        ("group_id", pa.string()),
        ("commit_topic", pa.string()),
        ("commit_partition", pa.int32()),
        ("committed_offset", pa.int64()),
        ("committed_leader_epoch", pa.int32()),
        ("committed_metadata", pa.string()),
        ("commit_timestamp", TIMESTAMP_TYPE),
        ("expire_timestamp", TIMESTAMP_TYPE),
        ("is_tombstone", pa.bool_()),
        ("protocol_type", pa.string()),
        ("generation", pa.int32()),
        ("protocol", pa.string()),
        ("leader", pa.string()),
        ("state_timestamp", TIMESTAMP_TYPE),
        ("members", pa.list_(pa.field("element", MEMBER_TYPE))),
        ("decode_error", pa.string()),
    ]
)

OFFSETS_SCHEMA_DDL = (
    "broker int, offsets_partition int, offset long, timestamp timestamp, record_type string, "
    "group_id string, commit_topic string, commit_partition int, committed_offset long, "
    "committed_leader_epoch int, committed_metadata string, commit_timestamp timestamp, "
    "expire_timestamp timestamp, is_tombstone boolean, protocol_type string, generation int, "
    "protocol string, leader string, state_timestamp timestamp, "
    "members array<struct<member_id: string, group_instance_id: string, client_id: string, "
    "client_host: string, rebalance_timeout_ms: int, session_timeout_ms: int>>, "
    "decode_error string"
)

_MAX_MS = (1 << 62) // 1000


def _micros(timestamp_ms: int) -> int | None:
    return timestamp_ms * 1000 if 0 <= timestamp_ms <= _MAX_MS else None


def decode_offsets_row(key: bytes | None, value: bytes | None, is_control: bool) -> dict[str, Any]:
    """The offsets-view columns decoded from one record's key and value."""
    row: dict[str, Any] = {"is_tombstone": value is None, "members": []}
    if is_control:
        row["record_type"] = "control"
        return row
    if key is None:
        row.update(record_type="corrupt", decode_error="null key")
        return row
    try:
        record = decode_record(key, value)
    except CorruptOffsetsRecordError as error:
        row.update(record_type="corrupt", decode_error=str(error))
        return row
    if isinstance(record, OffsetCommitRecord):
        row.update(
            record_type="offset_commit",
            group_id=record.group_id,
            commit_topic=record.topic,
            commit_partition=record.partition,
        )
        if record.value is not None:
            row.update(
                committed_offset=record.value.offset,
                committed_leader_epoch=record.value.leader_epoch,
                committed_metadata=record.value.metadata,
                commit_timestamp=_micros(record.value.commit_timestamp_ms),
                expire_timestamp=_micros(record.value.expire_timestamp_ms),
            )
    elif isinstance(record, GroupMetadataRecord):
        row.update(record_type="group_metadata", group_id=record.group_id)
        group = record.value
        if group is not None:
            row.update(
                protocol_type=group.protocol_type,
                generation=group.generation,
                protocol=group.protocol,
                leader=group.leader,
                state_timestamp=_micros(group.current_state_timestamp_ms),
                members=[
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "rebalance_timeout_ms": m.rebalance_timeout_ms,
                        "session_timeout_ms": m.session_timeout_ms,
                    }
                    for m in group.members
                ],
            )
    else:
        row["record_type"] = "other"
    return row


def decode_offsets_arrow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` function: log-table batches in, `OFFSETS_SCHEMA` batches out."""
    for batch in batches:
        data = batch.to_pydict()
        columns: dict[str, list[Any]] = {name: [] for name in OFFSETS_SCHEMA.names}
        for index in range(batch.num_rows):
            row = decode_offsets_row(
                data["key"][index], data["value"][index], bool(data["is_control"][index])
            )
            row.update(
                broker=data["broker"][index],
                offsets_partition=data["partition"][index],
                offset=data["offset"][index],
                timestamp=data["timestamp"][index],
            )
            for name in OFFSETS_SCHEMA.names:
                columns[name].append(row.get(name))
        yield pa.RecordBatch.from_arrays(
            [pa.array(columns[f.name], type=f.type) for f in OFFSETS_SCHEMA],
            schema=OFFSETS_SCHEMA,
        )
