"""The trio shell around the coordinator, against an in-memory broker (no processes).

Covers what the single-node cluster tests cannot: leadership moving away and back
(NOT_COORDINATOR, then a reload from the log), failed appends, and the timer task.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.group.config import OFFSETS_TOPIC
from trafka.group.consumer_group import ConsumerHeartbeatRequest, flatten, group_by_topic
from trafka.group.hashing import partition_for
from trafka.group.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    Protocol,
    SyncGroupRequest,
    TopicPartition,
)
from trafka.log.batch import set_base_offset
from trafka.log.records import iter_batches
from trafka.node.group_service import GroupService
from trafka.node.replication.ids import TopicPartition as ReplicaPartition

NUM_PARTITIONS = 4


@dataclass
class Config:
    values: dict[str, Any]

    def get_int(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int)
        return value

    def get(self, key: str) -> Any:
        return self.values[key]


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int


@dataclass
class DataTopic:
    topic_id: uuid.UUID
    partitions: dict[int, Any]


@dataclass
class TopicState:
    partitions: dict[int, PartitionState]


@dataclass
class Result:
    error_code: int = 0
    records: bytes | None = None
    offset: int = 0


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int


@dataclass
class FakeReplicaManager:
    logs: dict[int, list[bytes]] = field(default_factory=dict)
    append_error: int = 0
    owner: FakeBroker | None = None
    demoted: bool = False  # LeaderAndIsr took every leadership away; the topic is stale

    @property
    def leaders(self) -> dict[ReplicaPartition, PartitionState]:
        """What LeaderAndIsr made this node lead (here: what the owner's topic says)."""
        owner = self.owner
        if owner is None or owner.topic is None or self.demoted:
            return {}
        return {
            ReplicaPartition(OFFSETS_TOPIC, partition): state
            for partition, state in owner.topic.partitions.items()
            if state.leader == owner.node_id
        }

    async def append(
        self, topic: str, partition: int, records: bytes, *, required_acks: int, timeout_ms: int
    ) -> Result:
        assert topic == OFFSETS_TOPIC and required_acks == -1
        if self.append_error:
            return Result(self.append_error)
        log = self.logs.setdefault(partition, [])
        next_offset = sum(b.records[-1].offset + 1 - b.records[0].offset for b in map(_one, log))
        batch = bytearray(records)
        set_base_offset(batch, 0, next_offset)
        log.append(bytes(batch))
        return Result()

    def get_or_create_log(self, topic: str, partition: int) -> FakeLog:
        return FakeLog(self.logs.get(partition, []))


@dataclass
class FakeData:
    data: bytes

    def to_bytes(self) -> bytes:
        return self.data


@dataclass
class FakeLog:
    batches: list[bytes]
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return _one(self.batches[-1]).header.next_offset if self.batches else 0

    def read(self, offset: int, *, max_bytes: int, max_offset: int, with_bytes: bool) -> FakeData:
        return FakeData(b"".join(b for b in self.batches if _one(b).header.next_offset > offset))


def _one(batch: bytes) -> Any:
    return next(iter(iter_batches(batch)))


@dataclass
class FakeBroker:
    node_id: int = 1
    topic: TopicState | None = None
    replica_manager: FakeReplicaManager = field(default_factory=FakeReplicaManager)
    config: Config = field(
        default_factory=lambda: Config(
            {
                "group.initial.rebalance.delay.ms": 0,
                "group.min.session.timeout.ms": 10,
                "group.max.session.timeout.ms": 60_000,
                "group.max.size": 100,
                "offsets.retention.minutes": 10080,
                "offsets.retention.check.interval.ms": 600_000,
                "offsets.topic.num.partitions": NUM_PARTITIONS,
                "offsets.topic.replication.factor": 3,
                "offsets.topic.segment.bytes": 1 << 20,
                "offsets.commit.timeout.ms": 5000,
                "group.consumer.session.timeout.ms": 45_000,
                "group.consumer.heartbeat.interval.ms": 5_000,
                "group.consumer.assignors": ["uniform", "range"],
                "group.consumer.max.size": 100,
                "group.consumer.min.session.timeout.ms": 45_000,
                "group.consumer.max.session.timeout.ms": 60_000,
                "group.consumer.min.heartbeat.interval.ms": 5_000,
                "group.consumer.max.heartbeat.interval.ms": 15_000,
                "group.consumer.migration.policy": "bidirectional",
            }
        )
    )
    brokers: dict[int, BrokerInfo] = field(
        default_factory=lambda: {1: BrokerInfo(1, "127.0.0.1", 9092)}
    )

    listeners: list[Any] = field(default_factory=list)  # TopicManager's change listeners
    data_topics: dict[str, DataTopic] = field(default_factory=dict)

    def items(self) -> Any:
        """`TopicManager.topics.items()` as the shell reads it (`topics` is this fake)."""
        return self.data_topics.items()

    def __post_init__(self) -> None:
        self.replica_manager.owner = self

    @property
    def topics(self) -> FakeBroker:
        return self

    def get(self, name: str) -> TopicState | None:
        return self.topic if name == OFFSETS_TOPIC else None

    def partition(self, name: str, partition: int) -> PartitionState | None:
        if self.topic is None or name != OFFSETS_TOPIC:
            return None
        return self.topic.partitions.get(partition)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def racks(self) -> dict[int, str | None]:
        return {broker_id: None for broker_id in self.brokers}

    async def refresh_brokers(self) -> None:
        pass

    async def create_topic(
        self,
        name: str,
        partitions: int,
        factor: int,
        assignments: Any,
        configs: Any,
        *,
        validate_only: bool,
    ) -> TopicState:
        assert name == OFFSETS_TOPIC and factor == 1 and configs["cleanup.policy"] == "compact"
        self.topic = TopicState({p: PartitionState(1, 0) for p in range(partitions)})
        return self.topic


def service_of(broker: FakeBroker) -> GroupService:
    """The service over the fake broker, which plays every port it needs."""
    return GroupService(
        node_id=broker.node_id,
        topics=broker,  # type: ignore[arg-type]
        metadata=broker,  # type: ignore[arg-type]
        admin=broker,  # type: ignore[arg-type]
        replicas=broker.replica_manager,  # type: ignore[arg-type]
        config=lambda: broker.config,  # type: ignore[arg-type,return-value]
    )


def join_request(member_id: str = "", *, rebalance_timeout_ms: int = 30_000) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(Protocol("range", b"meta"),),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id="c",
        client_host="/127.0.0.1",
        api_version=5,
    )


async def form_group(service: GroupService, rebalance_timeout_ms: int = 30_000) -> tuple[str, int]:
    first = await service.join_group(join_request())
    assert first.error == ErrorCode.member_id_required
    joined = await service.join_group(
        join_request(first.member_id, rebalance_timeout_ms=rebalance_timeout_ms)
    )
    assert joined.error == ErrorCode.none and joined.leader == first.member_id
    synced = await service.sync_group(
        SyncGroupRequest(
            "g",
            joined.generation_id,
            first.member_id,
            None,
            None,
            None,
            ((first.member_id, b"assignment"),),
        ),
        10_000,
    )
    assert synced.error == ErrorCode.none and synced.assignment == b"assignment"
    return first.member_id, joined.generation_id


def commit(member_id: str, generation: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        "g", generation, member_id, None, -1, (CommitPartition("t", 0, offset, 2, "m"),)
    )


async def test_find_coordinator_creates_the_offsets_topic() -> None:
    broker = FakeBroker()
    service = service_of(broker)
    error, info = await service.find_coordinator("g")
    assert error == ErrorCode.none and info is not None and info.node_id == 1
    assert broker.topic is not None and len(broker.topic.partitions) == NUM_PARTITIONS


async def test_failover_answers_not_coordinator_then_reloads_from_the_log() -> None:
    broker = FakeBroker()
    service = service_of(broker)
    await service.find_coordinator("g")
    member_id, generation = await form_group(service)
    errors = await service.offset_commit(commit(member_id, generation, 42))
    assert [e.error for e in errors] == [ErrorCode.none]
    partition = partition_for("g", NUM_PARTITIONS)
    assert broker.replica_manager.logs[partition]  # group metadata + offset records

    assert broker.topic is not None
    broker.topic.partitions[partition] = PartitionState(leader=2, leader_epoch=1)
    heartbeat = HeartbeatRequest("g", generation, member_id, None)
    assert await service.heartbeat(heartbeat) == ErrorCode.not_coordinator
    assert (await service.offset_fetch("g", None)).error == ErrorCode.not_coordinator

    broker.topic.partitions[partition] = PartitionState(leader=1, leader_epoch=2)
    fetched = await service.offset_fetch("g", (TopicPartition("t", 0),))
    assert [(p.offset, p.leader_epoch, p.metadata) for p in fetched.partitions] == [(42, 2, "m")]
    assert await service.heartbeat(heartbeat) == ErrorCode.none  # loaded Stable, same generation
    description = await service.describe_group("g")
    assert description.state == "Stable" and description.members[0].assignment == b"assignment"


async def test_failed_append_reports_and_rebuilds_from_the_log() -> None:
    broker = FakeBroker()
    service = service_of(broker)
    await service.find_coordinator("g")
    member_id, generation = await form_group(service)
    assert [e.error for e in await service.offset_commit(commit(member_id, generation, 1))] == [
        ErrorCode.none
    ]
    broker.replica_manager.append_error = int(ErrorCode.not_leader_or_follower)
    failed = await service.offset_commit(commit(member_id, generation, 2))
    assert [e.error for e in failed] == [ErrorCode.not_coordinator]
    broker.replica_manager.append_error = 0
    fetched = await service.offset_fetch("g", (TopicPartition("t", 0),))
    assert fetched.partitions[0].offset == 1  # the unacknowledged commit is not there


async def test_the_timer_completes_a_rebalance_at_its_timeout() -> None:
    broker = FakeBroker()
    service = service_of(broker)
    await service.find_coordinator("g")
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        member_id, generation = await form_group(service, rebalance_timeout_ms=300)
        second = await service.join_group(join_request())
        with trio.fail_after(5):
            # The new member's join is parked until the old one rejoins or 300 ms pass.
            joined = await service.join_group(
                join_request(second.member_id, rebalance_timeout_ms=300)
            )
        assert joined.error == ErrorCode.none
        assert joined.generation_id == generation + 1
        assert (
            await service.heartbeat(HeartbeatRequest("g", generation, member_id, None))
            == ErrorCode.unknown_member_id
        )
        nursery.cancel_scope.cancel()


async def test_a_stale_metadata_cache_makes_no_coordinator() -> None:
    """A node restarted after a failover may read a metadata cache that still names it the
    leader of the group's partition: only the replica manager's leadership (LeaderAndIsr)
    makes it the coordinator, else it would answer OffsetFetch from its own stale log."""
    broker = FakeBroker()
    service = service_of(broker)
    await service.find_coordinator("g")
    member_id, generation = await form_group(service)
    assert [e.error for e in await service.offset_commit(commit(member_id, generation, 7))] == [
        ErrorCode.none
    ]
    broker.replica_manager.demoted = True  # the topic still says node 1 leads, epoch 0
    fetched = await service.offset_fetch("g", (TopicPartition("t", 0),))
    assert fetched.error == ErrorCode.not_coordinator
    assert service._partitions == {}
    broker.replica_manager.demoted = False
    fetched = await service.offset_fetch("g", (TopicPartition("t", 0),))
    assert [p.offset for p in fetched.partitions] == [7]


def kip848_heartbeat(
    member_id: str, epoch: int, owned: frozenset[tuple[uuid.UUID, int]] | None
) -> ConsumerHeartbeatRequest:
    return ConsumerHeartbeatRequest(
        group_id="g848",
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=("t",) if epoch == 0 else None,
        subscribed_topic_regex=None,
        server_assignor=None,
        owned=None if owned is None else group_by_topic(owned),
        client_id="c",
        client_host="/127.0.0.1",
        api_version=1,
    )


async def test_kip848_group_is_rebuilt_from_the_log_after_a_failover() -> None:
    broker = FakeBroker()
    topic_id = uuid.UUID(int=7)
    broker.data_topics["t"] = DataTopic(topic_id, {p: None for p in range(4)})
    service = service_of(broker)
    await service.find_coordinator("g848")
    a = await service.consumer_group_heartbeat(kip848_heartbeat("a", 0, frozenset()))
    a_owned = flatten(a.assignment or ())
    assert a.member_epoch == 1 and len(a_owned) == 4
    b = await service.consumer_group_heartbeat(kip848_heartbeat("b", 0, frozenset()))
    assert b.member_epoch == 2 and b.assignment == ()  # a still holds everything
    step = await service.consumer_group_heartbeat(kip848_heartbeat("a", 1, a_owned))
    assert step.member_epoch == 1 and len(flatten(step.assignment or ())) == 2  # revoking

    partition = partition_for("g848", NUM_PARTITIONS)
    assert broker.topic is not None
    broker.topic.partitions[partition] = PartitionState(leader=2, leader_epoch=1)
    moved = await service.consumer_group_heartbeat(kip848_heartbeat("b", 2, frozenset()))
    assert moved.error == ErrorCode.not_coordinator
    broker.topic.partitions[partition] = PartitionState(leader=1, leader_epoch=2)

    # the new coordinator knows a's pending revocation: b still gets nothing
    again = await service.consumer_group_heartbeat(kip848_heartbeat("b", 2, frozenset()))
    assert again.error == ErrorCode.none and again.member_epoch == 2
    assert not flatten(again.assignment or ())
    kept = flatten(step.assignment or ())
    done = await service.consumer_group_heartbeat(kip848_heartbeat("a", 1, kept))
    assert done.member_epoch == 2
    last = await service.consumer_group_heartbeat(kip848_heartbeat("b", 2, frozenset()))
    assert flatten(last.assignment or ()) == a_owned - kept
    described = await service.consumer_group_describe("g848")
    assert described.state == "Stable" and described.epoch == 2
