"""A small driver for the pure coordinator: numbers requests, collects replies and records."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from trafka.group.config import GroupConfig
from trafka.group.consumer_protocol import encode_subscription
from trafka.group.coordinator import Effects, GroupCoordinator
from trafka.group.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    OffsetCommitRequest,
    PartitionError,
    Protocol,
    RequestId,
    SyncGroupRequest,
    SyncGroupResult,
)
from trafka.group.records import OffsetsTopicRecord

FAST = GroupConfig(group_initial_rebalance_delay_ms=0)


def protocols(*names: str, topics: tuple[str, ...] = ("t",)) -> tuple[Protocol, ...]:
    return tuple(Protocol(name, encode_subscription(list(topics))) for name in names)


@dataclass
class Harness:
    config: GroupConfig = FAST
    seed: int = 1
    now_ms: int = 1_000_000
    coordinator: GroupCoordinator = field(init=False)
    replies: dict[RequestId, JoinGroupResult | SyncGroupResult] = field(default_factory=dict)
    records: list[OffsetsTopicRecord] = field(default_factory=list)
    _next_request: int = 0

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(self.config, random.Random(self.seed), self.now_ms)

    def absorb(self, effects: Effects) -> None:
        for reply in effects.replies:
            assert reply.request_id not in self.replies, "a request answered twice"
            self.replies[reply.request_id] = reply.result
        self.records.extend(effects.records)

    def new_request_id(self) -> RequestId:
        self._next_request += 1
        return RequestId(self._next_request)

    def join(
        self,
        group_id: str = "g",
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protos: tuple[Protocol, ...] | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        version: int = 5,
        client_id: str = "client",
    ) -> RequestId:
        request_id = self.new_request_id()
        request = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocols=protos if protos is not None else protocols("range"),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id=client_id,
            client_host="/127.0.0.1",
            api_version=version,
        )
        self.absorb(self.coordinator.join_group(request_id, request, self.now_ms))
        return request_id

    def join_result(self, request_id: RequestId) -> JoinGroupResult:
        result = self.replies[request_id]
        assert isinstance(result, JoinGroupResult)
        return result

    def sync_result(self, request_id: RequestId) -> SyncGroupResult:
        result = self.replies[request_id]
        assert isinstance(result, SyncGroupResult)
        return result

    def join_new_member(self, group_id: str = "g", **kwargs: object) -> str:
        """KIP-394 two-step join; returns the member id (the join itself may be parked)."""
        first = self.join(group_id, **kwargs)  # type: ignore[arg-type]
        result = self.join_result(first)
        assert result.error == ErrorCode.member_id_required
        return result.member_id

    def sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes] | None = None,
        group_id: str = "g",
        instance_id: str | None = None,
    ) -> RequestId:
        request_id = self.new_request_id()
        request = SyncGroupRequest(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=None,
            protocol_name=None,
            assignments=tuple((assignments or {}).items()),
        )
        self.absorb(self.coordinator.sync_group(request_id, request, self.now_ms))
        return request_id

    def heartbeat(
        self,
        member_id: str,
        generation_id: int,
        group_id: str = "g",
        instance_id: str | None = None,
    ) -> ErrorCode:
        return self.coordinator.heartbeat(
            HeartbeatRequest(group_id, generation_id, member_id, instance_id), self.now_ms
        )

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group_id: str = "g",
        member_id: str = "",
        generation_id: int = -1,
        instance_id: str | None = None,
        metadata: str = "",
        retention_time_ms: int = -1,
    ) -> tuple[PartitionError, ...]:
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_time_ms,
            partitions=tuple(
                CommitPartition(topic, partition, offset, 3, metadata)
                for (topic, partition), offset in offsets.items()
            ),
        )
        errors, effects = self.coordinator.offset_commit(request, self.now_ms)
        self.absorb(effects)
        return errors

    def advance(self, delta_ms: int) -> None:
        """Move the clock, calling tick at every deadline on the way (as the shell does)."""
        target_ms = self.now_ms + delta_ms
        for _ in range(10_000):
            deadline_ms = self.coordinator.next_deadline_ms()
            if deadline_ms > target_ms:
                break
            self.now_ms = max(self.now_ms, deadline_ms)
            self.absorb(self.coordinator.tick(self.now_ms))
        else:
            raise AssertionError("a deadline that tick never clears")
        self.now_ms = target_ms
        self.absorb(self.coordinator.tick(self.now_ms))

    def form_group(self, count: int, group_id: str = "g") -> tuple[list[str], int]:
        """`count` dynamic members join and sync; returns (member ids, generation)."""
        member_ids = [self.join_new_member(group_id) for _ in range(count)]
        parked = [self.join(group_id, member_id) for member_id in member_ids]
        results = [self.join_result(request_id) for request_id in parked]
        generation = results[0].generation_id
        leader = results[0].leader
        syncs = [
            self.sync(
                member_id,
                generation,
                {m: m.encode() for m in member_ids} if member_id == leader else None,
                group_id,
            )
            for member_id in member_ids
        ]
        for member_id, request_id in zip(member_ids, syncs, strict=True):
            assert self.sync_result(request_id).assignment == member_id.encode()
        return member_ids, generation
