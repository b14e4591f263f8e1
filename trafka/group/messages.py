"""Version-independent requests and results of the group APIs.

The handlers in `trafka.node.handlers` translate every wire version (kio classes) to and from
these; the coordinator never sees a version except where behaviour depends on it (JoinGroup
v4+ MEMBER_ID_REQUIRED, KIP-394; v9 `skip_assignment`, KIP-814). Errors are Kafka's codes
(`kio.schema.errors.ErrorCode`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

from kio.schema.errors import ErrorCode

RequestId = NewType("RequestId", int)
"""Names a parked JoinGroup/SyncGroup so a later `Reply` can address it (chosen by the shell)."""

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER_EPOCH = -1
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the handler passes the session timeout
    client_id: str
    client_host: str
    api_version: int


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+ (KIP-559); None = not checked
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member_id, assignment), leader only


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """v0-2 carry one member: the handler reports `members[0].error` as the top-level error."""

    error: ErrorCode
    members: tuple[LeftMember, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int  # v2-v4; -1 = broker default (offsets.retention.minutes)
    partitions: tuple[CommitPartition, ...]
    api_version: int = 9  # a KIP-848 member must commit with v9+ (UNSUPPORTED_VERSION)


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the member's metadata for the selected protocol (Stable only)
    assignment: bytes  # Stable only


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # ListGroups v5 (KIP-848): "classic" or "consumer"


@dataclass(frozen=True, slots=True)
class GroupDeletion:
    group_id: str
    error: ErrorCode
