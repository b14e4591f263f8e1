"""UpdateMetadata (API 6), controller -> broker: v5 (non-flexible) and v6 (first flexible).

Declared here because kio lacks it. Schema: Kafka 2.7's UpdateMetadataRequest.json ("Version 5
adds the broker epoch field and normalizes partitions by topic"; flexibleVersions "6+").
Seeds: PROTO-19 (every broker refreshes its metadata cache).

    Request v5/v6 : controller_id int32, controller_epoch int32, broker_epoch int64,
                    topic_states [topic_name string,
                                  partition_states [partition_index int32,
                                      controller_epoch int32, leader int32,
                                      leader_epoch int32, isr [int32], zk_version int32,
                                      replicas [int32], offline_replicas [int32]]],
                    live_brokers [id int32,
                                  endpoints [port int32, host string, listener string,
                                             security_protocol int16],
                                  rack nullable string]
    Response v5/v6: error_code int16

NOT declared: v0-v4 (ungrouped partition states) and v7/v8 (topic ids, Kafka 2.8+/3.x).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from ._common import RequestHeaderV1, RequestHeaderV2, ResponseHeaderV0, ResponseHeaderV1


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionStateV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: BrokerId = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"})
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"})
    offline_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicStateV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_states: tuple[UpdateMetadataPartitionStateV5, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpointV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    security_protocol: i16 = field(metadata={"kafka_type": "int16"}, default=i16(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBrokerV5:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    id: BrokerId = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpointV5, ...]
    rack: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequestV5:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicStateV5, ...]
    live_brokers: tuple[UpdateMetadataBrokerV5, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponseV5:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionStateV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: BrokerId = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"})
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"})
    offline_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicStateV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_states: tuple[UpdateMetadataPartitionStateV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpointV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    security_protocol: i16 = field(metadata={"kafka_type": "int16"}, default=i16(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBrokerV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    id: BrokerId = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpointV6, ...]
    rack: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequestV6:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicStateV6, ...]
    live_brokers: tuple[UpdateMetadataBrokerV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponseV6:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(6)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
