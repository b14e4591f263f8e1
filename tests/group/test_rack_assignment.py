"""Rack-aware server-side assignment (KIP-881's rule in `uniform` and `range`), pure."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from trafka.group.assignors import (
    Assignment,
    AssignorMember,
    PartitionRacks,
    range_assign,
    uniform_assign,
)
from trafka.group.consumer_group import ConsumerHeartbeatRequest, flatten
from trafka.group.consumer_records import (
    ConsumerGroupPartitionMetadataRecord,
    TopicMetadataEntry,
    decode_consumer_record,
    encode_consumer_key,
    encode_consumer_value,
    normalized_racks,
)

from .test_consumer_group import Cluster

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def member(
    member_id: str,
    rack: str | None,
    topics: frozenset[uuid.UUID] = frozenset({T1}),
    current: Assignment = frozenset(),
) -> AssignorMember:
    return AssignorMember(member_id, None, topics, current, rack)


def rack_of(
    assignment: dict[str, Assignment], racks: PartitionRacks, member_rack: dict[str, str]
) -> int:
    """How many assigned partitions have no replica on their member's rack."""
    return sum(
        1
        for member_id, partitions in assignment.items()
        for topic_id, partition in partitions
        if member_rack[member_id] not in racks[topic_id][partition]
    )


def sizes(assignment: dict[str, Assignment]) -> list[int]:
    return sorted(len(p) for p in assignment.values())


# single-replica partitions alternating between racks a and b
ALTERNATING: PartitionRacks = {T1: [("a",), ("b",)] * 4}


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_each_member_reads_from_its_rack_when_it_can(assign) -> None:  # type: ignore[no-untyped-def]
    members = {"m1": member("m1", "a"), "m2": member("m2", "b"), "m3": member("m3", "a")}
    racks = {"m1": "a", "m2": "b", "m3": "a"}
    unaware = assign(members, {T1: 8})
    aware = assign(members, {T1: 8}, ALTERNATING)
    assert sizes(aware) == sizes(unaware)
    assert rack_of(unaware, ALTERNATING, racks) > 0
    # rack a holds 4 partitions for 2 members (5 or 6 slots), rack b 4 for 1 member
    # (2 or 3 slots): at least 1 partition of rack b must cross
    assert rack_of(aware, ALTERNATING, racks) == 8 - 4 - min(4, len(aware["m2"]))
    assert set().union(*aware.values()) == {(T1, p) for p in range(8)}


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_without_member_racks_or_when_every_rack_has_a_replica_nothing_changes(assign) -> None:  # type: ignore[no-untyped-def]
    no_racks = {"m1": member("m1", None), "m2": member("m2", None)}
    assert assign(no_racks, {T1: 8}, ALTERNATING) == assign(no_racks, {T1: 8})
    racked = {"m1": member("m1", "a"), "m2": member("m2", "b")}
    everywhere: PartitionRacks = {T1: [("a", "b")] * 8}
    assert assign(racked, {T1: 8}, everywhere) == assign(racked, {T1: 8})
    assert assign(racked, {T1: 8}, {}) == assign(racked, {T1: 8})


def test_uniform_keeps_partitions_on_another_rack_rather_than_revoking() -> None:
    current = frozenset((T1, p) for p in range(4))  # m1 (rack a) holds 0-3 (racks a, b, a, b)
    members = {
        "m1": member("m1", "a", current=current),
        "m2": member("m2", "b", current=frozenset((T1, p) for p in range(4, 8))),
    }
    assert uniform_assign(members, {T1: 8}, ALTERNATING) == {
        "m1": current,
        "m2": frozenset((T1, p) for p in range(4, 8)),
    }


def test_uniform_gives_a_leavers_partitions_to_members_of_their_rack() -> None:
    members = {
        "m1": member("m1", "a", current=frozenset({(T1, 0), (T1, 1)})),
        "m2": member("m2", "b", current=frozenset({(T1, 2), (T1, 3)})),
        "m3": member("m3", "a", current=frozenset({(T1, 4), (T1, 5)})),
    }
    # m4 (partitions 6, 7) left; 6 is on rack a, 7 on rack b
    result = uniform_assign(members, {T1: 8}, ALTERNATING)
    assert (T1, 7) in result["m2"]
    assert (T1, 6) in result["m1"] | result["m3"]
    assert sizes(result) == [2, 3, 3]


def test_heterogeneous_uniform_prefers_the_rack_among_equally_loaded_members() -> None:
    members = {
        "m1": member("m1", "a", frozenset({T1, T2})),
        "m2": member("m2", "b", frozenset({T1})),
    }
    racks: PartitionRacks = {T1: [("b",), ("a",)], T2: [("a",)]}
    assert uniform_assign(members, {T1: 2, T2: 1})["m2"] == frozenset({(T1, 1)})
    result = uniform_assign(members, {T1: 2, T2: 1}, racks)
    assert result["m2"] == frozenset({(T1, 0)})
    assert result["m1"] == frozenset({(T1, 1), (T2, 0)})


def test_random_racks_keep_validity_and_the_rack_unaware_balance() -> None:
    rng = random.Random(848)
    for _ in range(200):
        member_count = rng.randint(1, 6)
        counts = {T1: rng.randint(0, 12), T2: rng.randint(1, 12)}
        partition_racks: PartitionRacks = {
            topic: [tuple(rng.sample("abc", rng.randint(0, 2))) for _ in range(count)]
            for topic, count in counts.items()
        }
        members = {
            f"m{i}": member(
                f"m{i}",
                rng.choice(["a", "b", "c", None]),
                frozenset(rng.sample([T1, T2], rng.randint(1, 2))),
                frozenset((T1, p) for p in range(counts[T1]) if rng.random() < 0.2),
            )
            for i in range(member_count)
        }
        for assign in (uniform_assign, range_assign):
            aware = assign(members, counts, partition_racks)
            unaware = assign(members, counts)
            owners = Counter(tp for partitions in aware.values() for tp in partitions)
            assert all(n == 1 for n in owners.values())
            subscribed = {
                (t, p)
                for m in members.values()
                for t in m.subscribed_topic_ids
                for p in range(counts[t])
            }
            assert set(owners) == subscribed
            for member_id, partitions in aware.items():
                assert all(t in members[member_id].subscribed_topic_ids for t, _ in partitions)
            if assign is range_assign:
                assert {m: len(p) for m, p in aware.items()} == {
                    m: len(p) for m, p in unaware.items()
                }
            elif len({m.subscribed_topic_ids for m in members.values()}) == 1:
                assert sizes(aware) == sizes(unaware)
            else:  # Kafka's balance property: no partition could go to a member 2 lighter
                for partitions in aware.values():
                    for topic_id, _ in partitions:
                        assert all(
                            len(aware[other]) >= len(partitions) - 1
                            for other in aware
                            if topic_id in members[other].subscribed_topic_ids
                        )


# --- through the coordinator ------------------------------------------------------------------


def racked_image() -> dict[str, TopicMetadataEntry]:
    return {"t": TopicMetadataEntry(T1, "t", 4, normalized_racks([["a"], ["b"], ["a"], ["b"]]))}


def join(
    cluster: Cluster, member_id: str, rack: str
) -> tuple[int, frozenset[tuple[uuid.UUID, int]]]:
    request = ConsumerHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        instance_id=None,
        rack_id=rack,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor=None,
        owned=(),
        client_id="c",
        client_host="/127.0.0.1",
        api_version=1,
    )
    result, effects = cluster.coordinator.consumer_group_heartbeat(
        request, cluster.topics, cluster.now_ms
    )
    cluster._keep(effects.records)
    assert result.error is ErrorCode.none
    return result.member_epoch, flatten(result.assignment or ())


def test_the_coordinator_assigns_by_rack_and_a_rack_change_moves_the_epoch() -> None:
    cluster = Cluster(topics=racked_image())
    join(cluster, "m-a", "a")
    join(cluster, "m-b", "b")
    described = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    targets = {m.member_id: m.target_assignment for m in described.members}
    assert targets["m-a"] == ((T1, "t", (0, 2)),)
    assert targets["m-b"] == ((T1, "t", (1, 3)),)
    epoch = described.epoch
    cluster.topics = {"t": TopicMetadataEntry(T1, "t", 4, normalized_racks([["b"]] * 4))}
    cluster.heartbeat("m-a", described.members[0].member_epoch)
    assert cluster.coordinator.consumer_group_describe("g", cluster.topics).epoch == epoch + 1


def test_partition_racks_survive_the_record_codec() -> None:
    entry = TopicMetadataEntry(T1, "t", 4, normalized_racks([["b", "a"], [], ["c"]]))
    assert entry.racks == (("a", "b"), (), ("c",))
    record = ConsumerGroupPartitionMetadataRecord("g", (entry, TopicMetadataEntry(T2, "u", 2)))
    key, value = encode_consumer_key(record), encode_consumer_value(record)
    assert decode_consumer_record(key, value) == record
