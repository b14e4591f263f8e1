"""Produce (API 0) v0-v2: declared here because kio starts at v3.

Layouts (ProduceRequest.json / ProduceResponse.json, Kafka 2.x):

    Request v0-v2  : acks int16, timeout_ms int32,
                     topic_data [name string, partition_data [index int32, records bytes]]
    Response v0    : responses [name, partition_responses [index int32, error_code int16,
                                                            base_offset int64]]
    Response v1    : v0 + throttle_time_ms int32 (after the responses array)
    Response v2    : v1 + log_append_time_ms int64 per partition (after base_offset)

v0-v2 carry message sets of magic 0/1. Kafka 4.0 rejects them (KIP-896) but still
*advertises* Produce from v0 (KAFKA-18659, apache/kafka PR #18727) because librdkafka derives
its MsgVer1/compression features from that range. See docs/protocol.md. One request class
serves v0-v2 (identical layout); the response differs per version.
"""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAware, i16, i32, i32Timedelta, i64

from ._common import RequestHeaderV1, ResponseHeaderV0

_API_KEY = i16(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    index: i32 = field(metadata={"kafka_type": "int32"})
    records: Records | None = field(metadata={"kafka_type": "records"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequestV0:
    """Produce request v0, v1 and v2 (same layout; no transactional_id before v3)."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    acks: i16 = field(metadata={"kafka_type": "int16"})
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    topic_data: tuple[TopicProduceData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    base_offset: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_responses: tuple[PartitionProduceResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    responses: tuple[TopicProduceResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    responses: tuple[TopicProduceResponseV0, ...]
    throttle_time: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceResponseV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    base_offset: i64 = field(metadata={"kafka_type": "int64"})
    log_append_time: TZAware | None = field(metadata={"kafka_type": "datetime_i64"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceResponseV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_responses: tuple[PartitionProduceResponseV2, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV2:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    responses: tuple[TopicProduceResponseV2, ...]
    throttle_time: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
    )
