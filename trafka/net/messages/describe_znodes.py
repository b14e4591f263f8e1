"""TrafkaDescribeZNodes (API key 10000, v0): read the metadata quorum's znode tree.

NOT a Kafka API. trafka replicates a ZooKeeper-style tree (docs/metadata-quorum.md); Kafka has
no request that reads it, and `ktool quorum ls|get|stat|tree|export --bootstrap-server` must
reach it through the node's normal listener (issue 4). The key is far outside Kafka's range
(Kafka 4.x ends below 100) so it can never collide, and the node does NOT advertise it in
ApiVersions (standard clients never see it); a client sends v0 without negotiating. A Kafka
broker closes the connection on this unknown key.

Read-only; answered from the node's local replica (a `sync` flag first commits a barrier,
for a linearizable read). Version 0, non-flexible (request header v1, response header v0).

Request layout::

    paths            array<string>   int32 count, 1..1000 znode paths (server paths, no chroot)
    include_data     bool            int8: fill `data`
    include_stat     bool            int8: fill the stat fields (else all 0)
    include_children bool            int8: fill `children` (sorted names)
    recursive        bool            int8: each path's whole subtree, depth first, children
                                     sorted (a parent precedes its children)
    max_nodes        int32           entries wanted in this response; the server caps it at
                                     10000 (<= 0: the cap)
    resume_after     nullable string applies to paths[0] with recursive: continue the walk
                                     after this path (the `next_resume_after` of the last page)
    include_sessions bool            int8: fill `sessions` (for `export`)
    sync             bool            int8: commit a quorum barrier before reading

Response layout::

    throttle_time_ms  int32
    error_code        int16 (Kafka's: 0, INVALID_REQUEST 42, BROKER_NOT_AVAILABLE 8,
                             REQUEST_TIMED_OUT 7 when the barrier does not commit)
    error_message     nullable string
    last_zxid         int64   the replica's last applied zxid when the page was read
    next_path_index   int32   -1: complete; else resend paths[next_path_index:] ...
    next_resume_after nullable string   ... with resume_after = this
    entries           array<ZNodeEntry>
        path string, error_code int16 (ZooKeeper's: 0, NoNode -101, BadArguments -8),
        data nullable bytes, czxid int64, mzxid int64, pzxid int64, ctime_ms int64,
        mtime_ms int64, version int32, cversion int32, ephemeral_owner int64,
        data_length int32, num_children int32, children array<string>
    sessions          array<ZNodeSession> (session_id int64, owner string, timeout_ms int32)

Bounds: <= 1000 paths per request; <= 10000 entries and ~8 MiB of paths, data and child
names per response (at least one entry is always sent, so a node with 1 MiB of data or a
very wide child list still fits; the frame limit is 100 MiB); sessions are bounded by the
tree's own limit (100,000). Each page is read atomically from the replica; a tree bigger
than one page is read in several pages and is NOT one consistent snapshot (`last_zxid`
of every page tells the client how far apart they are).
"""

from dataclasses import dataclass, field
from typing import ClassVar, Final

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from ._common import RequestHeaderV1, ResponseHeaderV0

DESCRIBE_ZNODES_API_KEY: Final = 10000
DESCRIBE_ZNODES_API_NAME: Final = "TrafkaDescribeZNodes"
MAX_PATHS_PER_REQUEST: Final = 1000
MAX_NODES_PER_RESPONSE: Final = 10000
MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeZNodesRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(DESCRIBE_ZNODES_API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    paths: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    include_data: bool = field(metadata={"kafka_type": "bool"}, default=False)
    include_stat: bool = field(metadata={"kafka_type": "bool"}, default=True)
    include_children: bool = field(metadata={"kafka_type": "bool"}, default=False)
    recursive: bool = field(metadata={"kafka_type": "bool"}, default=False)
    max_nodes: i32 = field(metadata={"kafka_type": "int32"}, default=i32(MAX_NODES_PER_RESPONSE))
    resume_after: str | None = field(metadata={"kafka_type": "string"}, default=None)
    include_sessions: bool = field(metadata={"kafka_type": "bool"}, default=False)
    sync: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ZNodeEntryV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(DESCRIBE_ZNODES_API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    path: str = field(metadata={"kafka_type": "string"})
    error_code: i16 = field(metadata={"kafka_type": "int16"}, default=i16(0))
    """ZooKeeper's code (not Kafka's): 0, NoNode -101, BadArguments -8."""
    data: bytes | None = field(metadata={"kafka_type": "bytes"}, default=None)
    czxid: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    mzxid: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    pzxid: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    ctime_ms: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    mtime_ms: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    version: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    cversion: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    ephemeral_owner: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    data_length: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    num_children: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    children: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ZNodeSessionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(DESCRIBE_ZNODES_API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    session_id: i64 = field(metadata={"kafka_type": "int64"})
    owner: str = field(metadata={"kafka_type": "string"})
    timeout_ms: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeZNodesResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(DESCRIBE_ZNODES_API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    throttle_time_ms: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    last_zxid: i64 = field(metadata={"kafka_type": "int64"}, default=i64(0))
    next_path_index: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    next_resume_after: str | None = field(metadata={"kafka_type": "string"}, default=None)
    entries: tuple[ZNodeEntryV0, ...] = ()
    sessions: tuple[ZNodeSessionV0, ...] = ()
