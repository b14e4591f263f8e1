"""StopReplica (API 5), controller -> broker: v1 (non-flexible), v2 and v3 (flexible).

Declared here because kio lacks it. Schema: Kafka 2.7's StopReplicaRequest.json ("Version 1
adds the broker epoch and reorganizes the partitions to be stored per topic. Version 2 is the
first flexible version. Version 3 adds the leader epoch per partition (KIP-570).").
Seeds: PROTO-19 (stop fetching; with delete, also delete the replica's data).

    Request v1/v2 : controller_id int32, controller_epoch int32, broker_epoch int64,
                    delete_partitions bool,
                    topics [name string, partition_indexes [int32]]
    Request v3    : controller_id int32, controller_epoch int32, broker_epoch int64,
                    topic_states [topic_name string,
                                  partition_states [partition_index int32,
                                                    leader_epoch int32,
                                                    delete_partition bool]]
    Response v1-v3: error_code int16,
                    partition_errors [topic_name string, partition_index int32,
                                      error_code int16]

NOT declared: v0 (ungrouped partitions) and v4 (Kafka 3.x KRaft-migration flag).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from ._common import RequestHeaderV1, RequestHeaderV2, ResponseHeaderV0, ResponseHeaderV1


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    delete_partitions: bool = field(metadata={"kafka_type": "bool"})
    topics: tuple[StopReplicaTopicV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequestV2:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    delete_partitions: bool = field(metadata={"kafka_type": "bool"})
    topics: tuple[StopReplicaTopicV2, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionStateV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicStateV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionStateV3, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[StopReplicaTopicStateV3, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionErrorV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponseV1:
    """Also the v0 response."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionErrorV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionErrorV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponseV2:
    """Also the v3 response (flexible, same layout as v2)."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(5)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionErrorV2, ...]
