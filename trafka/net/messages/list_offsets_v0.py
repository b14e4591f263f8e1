"""ListOffsets (API 2) v0: declared here because kio starts at v1.

Layout (ListOffsetsRequest.json / ListOffsetsResponse.json, "versions 0"):

    Request v0  : replica_id int32,
                  topics [name string,
                          partitions [partition_index int32, timestamp int64,
                                      max_num_offsets int32]]
    Response v0 : topics [name string,
                          partitions [partition_index int32, error_code int16,
                                      old_style_offsets [int64]]]

Kafka 3.x still accepts v0; Kafka 4.0 removed it (KIP-896). kafka-python 2.2.x sent v0 when
it mis-inferred the broker version (dpkp/kafka-python#2679), so a 3.x-compatible broker
keeps it.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from ._common import RequestHeaderV1, ResponseHeaderV0

_API_KEY = i16(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})
    max_num_offsets: i32 = field(metadata={"kafka_type": "int32"}, default=i32(1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    replica_id: BrokerId = field(metadata={"kafka_type": "int32"})
    topics: tuple[ListOffsetsTopicV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    old_style_offsets: tuple[i64, ...] = field(metadata={"kafka_type": "int64"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartitionResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = _API_KEY
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topics: tuple[ListOffsetsTopicResponseV0, ...]
