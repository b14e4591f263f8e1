"""KIP-848 online migration (`group.consumer.migration.policy`), pure: a classic group whose
members move one by one to the consumer protocol and back, offsets kept throughout."""

from __future__ import annotations

import itertools
import uuid

import pytest
from kio.schema.errors import ErrorCode

from trafka.group.config import GroupConfig
from trafka.group.consumer_group import flatten
from trafka.group.consumer_protocol import (
    assigned_partitions,
    encode_assignment,
    encode_subscription,
)
from trafka.group.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupMemberMetadataRecord,
    MemberMetadataValue,
    decode_consumer_record,
    encode_consumer_key,
    encode_consumer_value,
)
from trafka.group.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeavingMember,
    OffsetCommitRequest,
    Protocol,
    RequestId,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
)

from .test_consumer_group import Cluster

_ids = itertools.count(1)


def config(policy: str = "bidirectional") -> GroupConfig:
    return GroupConfig(group_initial_rebalance_delay_ms=0, consumer_migration_policy=policy)


class Classic:
    """A classic consumer-protocol client (eager, like librdkafka's range assignor)."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster, self.name = cluster, name
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, list[int]] = {}

    def join_request(self, owned: dict[str, list[int]] | None = None) -> JoinGroupRequest:
        metadata = encode_subscription(["t"], owned=owned if owned is not None else {})
        return JoinGroupRequest(
            group_id="g",
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(Protocol("range", metadata),),
            session_timeout_ms=10_000,
            rebalance_timeout_ms=20_000,
            client_id=self.name,
            client_host="/127.0.0.1",
            api_version=7,
        )

    def join(self, owned: dict[str, list[int]] | None = None) -> JoinGroupResult:
        effects = self.cluster.coordinator.join_group(
            RequestId(next(_ids)),
            self.join_request(owned),
            self.cluster.now_ms,
            self.cluster.topics,
        )
        self.cluster._keep(effects.records)
        (reply,) = effects.replies
        result = reply.result
        assert isinstance(result, JoinGroupResult)
        if result.error is ErrorCode.member_id_required:
            self.member_id = result.member_id
            return self.join(owned)
        if result.error is ErrorCode.none:
            self.member_id, self.generation = result.member_id, result.generation_id
        return result

    def sync(self) -> SyncGroupResult:
        request = SyncGroupRequest(
            "g", self.generation, self.member_id, None, "consumer", "range", ()
        )
        effects = self.cluster.coordinator.sync_group(
            RequestId(next(_ids)), request, self.cluster.now_ms
        )
        (reply,) = effects.replies
        result = reply.result
        assert isinstance(result, SyncGroupResult)
        if result.error is ErrorCode.none:
            parsed = assigned_partitions(result.assignment)
            assert parsed is not None
            self.owned = {t: sorted(p) for t, p in parsed.items()}
        return result

    def heartbeat(self) -> ErrorCode:
        return self.cluster.coordinator.heartbeat(
            HeartbeatRequest("g", self.generation, self.member_id, None), self.cluster.now_ms
        )

    def rebalance(self) -> None:
        """What an eager client does on REBALANCE_IN_PROGRESS: revoke everything, rejoin, sync."""
        self.owned = {}
        assert self.join().error is ErrorCode.none
        assert self.sync().error is ErrorCode.none

    def leave(self) -> ErrorCode:
        result, effects = self.cluster.coordinator.leave_group(
            "g", (LeavingMember(self.member_id, None),), self.cluster.now_ms
        )
        self.cluster._keep(effects.records)
        return result.members[0].error

    def commit(self, offset: int) -> ErrorCode:
        request = OffsetCommitRequest(
            "g",
            self.generation,
            self.member_id,
            None,
            -1,
            (CommitPartition("t", 0, offset, -1, None),),
            api_version=7,
        )
        errors, effects = self.cluster.coordinator.offset_commit(request, self.cluster.now_ms)
        self.cluster._keep(effects.records)
        return errors[0].error


def classic_group(cluster: Cluster) -> tuple[Classic, Classic]:
    """Two classic members, the leader assigning partitions 0-2 to a and 3-5 to b."""
    a, b = Classic(cluster, "a"), Classic(cluster, "b")
    assert a.join().error is ErrorCode.none  # alone: generation 1 at once
    assert a.sync().error is ErrorCode.none
    for client in (b, a):  # b's join parks; a rejoins on REBALANCE_IN_PROGRESS
        if client is a:
            assert a.heartbeat() is ErrorCode.rebalance_in_progress
        effects = cluster.coordinator.join_group(
            RequestId(next(_ids)), client.join_request(), cluster.now_ms, cluster.topics
        )
        cluster._keep(effects.records)
        for reply in effects.replies:
            result = reply.result
            assert isinstance(result, JoinGroupResult)
            if result.error is ErrorCode.member_id_required:
                client.member_id = result.member_id
                effects = cluster.coordinator.join_group(
                    RequestId(next(_ids)), client.join_request(), cluster.now_ms, cluster.topics
                )
                cluster._keep(effects.records)
    generation = cluster.coordinator.generation_id("g")
    assert generation == 2
    a.generation = b.generation = generation
    leader = cluster.coordinator.leader_id("g")
    assignments = (
        (a.member_id, encode_assignment({"t": [0, 1, 2]})),
        (b.member_id, encode_assignment({"t": [3, 4, 5]})),
    )
    for client in (a, b) if leader == a.member_id else (b, a):
        request = SyncGroupRequest(
            "g",
            client.generation,
            client.member_id,
            None,
            "consumer",
            "range",
            assignments if client.member_id == leader else (),
        )
        synced = cluster.coordinator.sync_group(RequestId(next(_ids)), request, cluster.now_ms)
        cluster._keep(synced.records)
    a.owned, b.owned = {"t": [0, 1, 2]}, {"t": [3, 4, 5]}
    assert cluster.coordinator.list_groups()[0].state == "Stable"
    assert a.commit(17) is ErrorCode.none
    return a, b


def owners(cluster: Cluster) -> dict[str, list[int]]:
    described = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert described.error is ErrorCode.none
    return {m.client_id: [p for _, _, ps in m.assignment for p in ps] for m in described.members}


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_a_consumer_member_cannot_join_a_classic_group_without_upgrade(policy: str) -> None:
    cluster = Cluster(config=config(policy))
    classic_group(cluster)
    refused = cluster.heartbeat(str(uuid.uuid4()), 0)
    assert refused.error is ErrorCode.group_id_not_found
    assert refused.error_message == "Group g is not a consumer group."
    assert cluster.coordinator.list_groups()[0].group_type == "classic"


def test_members_move_to_the_consumer_protocol_one_by_one_and_keep_the_offsets() -> None:
    cluster = Cluster(config=config())
    a, b = classic_group(cluster)
    generation = a.generation
    c_id = str(uuid.uuid4())
    joined = cluster.heartbeat(c_id, 0)  # confluent-kafka with group.protocol=consumer
    assert joined.error is ErrorCode.none
    assert cluster.coordinator.list_groups()[0].group_type == "consumer"
    # the classic members kept their partitions: c waits for what they must release
    assert owners(cluster) == {"a": [0, 1, 2], "b": [3, 4, 5], "c": []}
    described = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert {m.client_id: m.classic for m in described.members} == {
        "a": True,
        "b": True,
        "c": False,
    }
    assert joined.member_epoch == generation + 1
    # the classic members learn about the rebalance through their heartbeats
    assert a.heartbeat() is ErrorCode.rebalance_in_progress
    assert b.heartbeat() is ErrorCode.rebalance_in_progress
    a.rebalance()
    b.rebalance()
    assert a.generation == b.generation == generation + 1
    step = cluster.heartbeat(c_id, joined.member_epoch, owned=frozenset())
    assert step.error is ErrorCode.none
    held = owners(cluster)
    assert sorted(held["a"] + held["b"] + held["c"]) == list(range(6))
    assert len(held["a"]) == len(held["b"]) == len(held["c"]) == 2
    assert a.heartbeat() is ErrorCode.none and b.heartbeat() is ErrorCode.none
    # offsets: committed before, readable and committable by classic members after
    assert (
        cluster.coordinator.offset_fetch("g", (TopicPartition("t", 0),)).partitions[0].offset == 17
    )
    assert a.commit(18) is ErrorCode.none
    a.generation -= 1
    assert a.commit(19) is ErrorCode.illegal_generation
    a.generation += 1
    # a moves to the consumer protocol: leaves as a classic member, joins as a consumer one
    assert a.leave() is ErrorCode.none
    d_id = str(uuid.uuid4())
    assert cluster.heartbeat(d_id, 0).error is ErrorCode.none
    assert b.heartbeat() is ErrorCode.rebalance_in_progress
    b.rebalance()
    described = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert {m.member_id for m in described.members} == {b.member_id, c_id, d_id}
    # the state survives a reload (the classic member metadata is in the records)
    reloaded = cluster.reload()
    assert reloaded.consumer_group_describe("g", cluster.topics) == described
    cluster.coordinator = reloaded
    assert b.heartbeat() is ErrorCode.none


def _upgraded(cluster: Cluster) -> tuple[Classic, Classic, str, int]:
    a, b = classic_group(cluster)
    c_id = str(uuid.uuid4())
    joined = cluster.heartbeat(c_id, 0)
    a.rebalance()
    b.rebalance()
    epoch = cluster.heartbeat(c_id, joined.member_epoch, owned=frozenset()).member_epoch
    return a, b, c_id, epoch


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    cluster = Cluster(config=config())
    a, b, c_id, epoch = _upgraded(cluster)
    assert cluster.heartbeat(c_id, -1).member_epoch == -1
    listing = cluster.coordinator.list_groups()[0]
    assert (listing.group_type, listing.state) == ("classic", "PreparingRebalance")
    # the classic members rejoin a classic rebalance, offsets intact
    assert a.heartbeat() is ErrorCode.rebalance_in_progress
    a_join = cluster.coordinator.join_group(
        RequestId(next(_ids)), a.join_request(), cluster.now_ms, cluster.topics
    )
    b_join = cluster.coordinator.join_group(
        RequestId(next(_ids)), b.join_request(), cluster.now_ms, cluster.topics
    )
    replies = [
        r.result for r in a_join.replies + b_join.replies if isinstance(r.result, JoinGroupResult)
    ]
    assert sorted(r.member_id for r in replies) == sorted([a.member_id, b.member_id])
    assert {r.generation_id for r in replies} == {epoch + 1}
    assert (
        cluster.coordinator.offset_fetch("g", (TopicPartition("t", 0),)).partitions[0].offset == 17
    )
    reloaded = cluster.reload()
    assert reloaded.list_groups()[0].group_type == "classic"


def test_without_downgrade_the_group_stays_a_consumer_group() -> None:
    cluster = Cluster(config=config("upgrade"))
    a, _, c_id, _ = _upgraded(cluster)
    assert cluster.heartbeat(c_id, -1).member_epoch == -1
    assert cluster.coordinator.list_groups()[0].group_type == "consumer"
    assert a.heartbeat() is ErrorCode.rebalance_in_progress
    a.rebalance()
    assert a.heartbeat() is ErrorCode.none


def test_a_fenced_consumer_member_downgrades_too() -> None:
    cluster = Cluster(config=config())
    a, b, _, _ = _upgraded(cluster)
    for _ in range(5):  # the classic members keep heartbeating; c falls silent
        cluster.advance(9_000)
        a.heartbeat()
        b.heartbeat()
    assert cluster.coordinator.list_groups()[0].group_type == "classic"


def test_classic_member_errors() -> None:
    cluster = Cluster(config=config())
    a, _, c_id, _ = _upgraded(cluster)
    a.generation += 5
    assert a.heartbeat() is ErrorCode.illegal_generation
    assert a.sync().error is ErrorCode.illegal_generation
    ghost = Classic(cluster, "ghost")
    ghost.member_id = "nobody"
    assert ghost.heartbeat() is ErrorCode.unknown_member_id
    assert ghost.join().error is ErrorCode.none  # an unknown id joins as new (Kafka's)
    assert ghost.leave() is ErrorCode.none
    # a consumer-protocol member id is not a classic member
    consumer = Classic(cluster, "c")
    consumer.member_id, consumer.generation = c_id, a.generation - 5
    assert consumer.heartbeat() is ErrorCode.unknown_member_id
    # a classic member that misses its rejoin is fenced after its rebalance timeout
    a.generation -= 5
    cluster.heartbeat(str(uuid.uuid4()), 0)  # a new member: everyone must rejoin
    assert a.heartbeat() is ErrorCode.rebalance_in_progress
    cluster.advance(20_001)
    assert a.heartbeat() is ErrorCode.unknown_member_id


def test_classic_member_metadata_record_round_trip() -> None:
    value = MemberMetadataValue(
        None,
        "r1",
        "c",
        "/h",
        ("t",),
        None,
        20_000,
        None,
        ClassicMemberMetadata(10_000, (("range", b"\x00\x01"), ("roundrobin", b""))),
    )
    record = ConsumerGroupMemberMetadataRecord("g", "m", value)
    assert (
        decode_consumer_record(encode_consumer_key(record), encode_consumer_value(record)) == record
    )


@pytest.mark.parametrize("policy", ["bidirectional", "disabled"])
def test_a_classic_member_joins_a_consumer_group_whatever_the_policy(policy: str) -> None:
    """As Kafka: a classic JoinGroup to a non-empty consumer group is served by the consumer
    group (KIP-394's MEMBER_ID_REQUIRED first), independently of the migration policy."""
    cluster = Cluster(config=config(policy))
    c_id = str(uuid.uuid4())
    joined = cluster.heartbeat(c_id, 0)
    d = Classic(cluster, "d")
    assert d.join().error is ErrorCode.none
    assert d.sync().error is ErrorCode.none
    assert d.owned == {}  # c must release its partitions first
    assert d.heartbeat() is ErrorCode.none
    step = cluster.heartbeat(c_id, joined.member_epoch, owned=flatten(joined.assignment or ()))
    cluster.heartbeat(c_id, step.member_epoch, owned=flatten(step.assignment or ()))
    assert d.heartbeat() is ErrorCode.rebalance_in_progress  # released: rejoin to get them
    d.rebalance()
    assert len(d.owned["t"]) == 3
    held = owners(cluster)
    assert sorted(held["c"] + held["d"]) == list(range(6))
