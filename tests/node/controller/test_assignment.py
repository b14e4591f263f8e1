"""Replica assignment against Kafka's known outputs (AdminRackAwareTest, ReplicaAssignmentTest)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from trafka.node.replica_assignment import (
    AssignmentError,
    BrokerPlacement,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
    start_index_for_added_partitions,
)
from trafka.node.replication.ids import BrokerId


def placements(racks: dict[int, str | None]) -> list[BrokerPlacement]:
    return [BrokerPlacement(BrokerId(i), racks[i]) for i in sorted(racks)]


def as_lists(assignment: dict[int, tuple[BrokerId, ...]]) -> dict[int, list[int]]:
    return {p: [int(r) for r in replicas] for p, replicas in assignment.items()}


def test_rack_unaware_known_output() -> None:
    # Kafka's ReplicaAssignmentTest / AdminTest.testReplicaAssignment: 5 brokers, 10x3, index 0.
    brokers = placements({i: None for i in range(5)})
    assert as_lists(assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0)) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_alternated_list_known_output() -> None:
    rack_map = {
        BrokerId(0): "rack1", BrokerId(1): "rack3", BrokerId(2): "rack3",
        BrokerId(3): "rack2", BrokerId(4): "rack2", BrokerId(5): "rack1",
    }  # fmt: skip
    assert rack_alternated_broker_list(rack_map) == [0, 3, 1, 5, 4, 2]
    del rack_map[BrokerId(5)]
    assert rack_alternated_broker_list(rack_map) == [0, 3, 1, 4, 2]


def test_rack_aware_known_output() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    brokers = placements({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"})
    assert as_lists(
        assign_replicas_to_brokers(brokers, 7, 3, fixed_start_index=0, start_partition_id=0)
    ) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_spreads_racks_with_random_start(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas_to_brokers(placements(racks), 6, 3, rng=random.Random(seed))
    for replicas in assignment.values():
        assert len({racks[int(r)] for r in replicas}) == 3
        assert len(set(replicas)) == 3
    # Leaders and replicas evenly spread (AdminRackAwareTest.checkReplicaDistribution).
    assert Counter(r[0] for r in assignment.values()) == Counter({BrokerId(i): 1 for i in range(6)})
    assert set(Counter(r for rs in assignment.values() for r in rs).values()) == {3}


def test_more_replicas_than_racks_covers_every_rack() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas_to_brokers(placements(racks), 6, 5, rng=random.Random(7))
    for replicas in assignment.values():
        assert len(replicas) == 5 and len(set(replicas)) == 5
        assert len({racks[int(r)] for r in replicas}) == 3


def test_random_start_is_seeded() -> None:
    brokers = placements({i: None for i in range(4)})
    first = assign_replicas_to_brokers(brokers, 8, 2, rng=random.Random(42))
    assert first == assign_replicas_to_brokers(brokers, 8, 2, rng=random.Random(42))


def test_errors_name_kafka_codes() -> None:
    brokers = placements({0: None, 1: None})
    with pytest.raises(AssignmentError) as partitions:
        assign_replicas_to_brokers(brokers, 0, 1, fixed_start_index=0)
    assert partitions.value.error_name == "INVALID_PARTITIONS"
    with pytest.raises(AssignmentError) as factor:
        assign_replicas_to_brokers(brokers, 1, 3, fixed_start_index=0)
    assert factor.value.error_name == "INVALID_REPLICATION_FACTOR"
    with pytest.raises(AssignmentError) as racks:
        assign_replicas_to_brokers(placements({0: "a", 1: None}), 1, 1, fixed_start_index=0)
    assert racks.value.error_name == "INVALID_REPLICA_ASSIGNMENT"


def test_added_partitions_continue_the_pattern() -> None:
    brokers = placements({i: None for i in range(5)})
    whole = assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0)
    start = start_index_for_added_partitions(brokers, whole[0][0])
    added = assign_replicas_to_brokers(brokers, 4, 3, fixed_start_index=start, start_partition_id=6)
    # Kafka restarts the shift at the start index, so only the leaders continue the pattern.
    assert {p: r[0] for p, r in added.items()} == {p: whole[p][0] for p in range(6, 10)}
    assert as_lists(added) == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}
