"""Every legal and illegal edge of the partition and replica state machines (CTL-14, CTL-23)."""

from __future__ import annotations

import itertools

import pytest

from trafka.node.controller.states import (
    PARTITION_VALID_PREVIOUS_STATES,
    REPLICA_VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    PartitionState,
    ReplicaState,
    is_legal,
    transition_to,
)

P = PartitionState
R = ReplicaState

# The seeds' tables, written out edge by edge (source, target).
PARTITION_EDGES = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
REPLICA_EDGES = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE),
    (R.ONLINE, R.ONLINE),
    (R.OFFLINE, R.ONLINE),
    (R.NEW, R.OFFLINE),
    (R.ONLINE, R.OFFLINE),
    (R.OFFLINE, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT),
    (R.OFFLINE, R.NON_EXISTENT),
    # Kafka's retry edges [EXT], documented in states.py.
    (R.REPLICA_DELETION_INELIGIBLE, R.OFFLINE),
    (R.REPLICA_DELETION_INELIGIBLE, R.ONLINE),
}


@pytest.mark.parametrize("source,target", sorted(itertools.product(P, P), key=str))
def test_partition_edge(source: PartitionState, target: PartitionState) -> None:
    legal = (source, target) in PARTITION_EDGES
    assert is_legal(source, target) is legal
    if legal:
        assert transition_to(source, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            transition_to(source, target)


@pytest.mark.parametrize("source,target", sorted(itertools.product(R, R), key=str))
def test_replica_edge(source: ReplicaState, target: ReplicaState) -> None:
    legal = (source, target) in REPLICA_EDGES
    assert is_legal(source, target) is legal
    if legal:
        assert transition_to(source, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            transition_to(source, target)


def test_mappings_cover_every_state() -> None:
    assert set(PARTITION_VALID_PREVIOUS_STATES) == set(P)
    assert set(REPLICA_VALID_PREVIOUS_STATES) == set(R)
    assert len(R) == 7  # D7: all seven of 000's replica states


def test_kafka_state_names() -> None:
    assert [s.value for s in P] == [
        "NonExistentPartition",
        "NewPartition",
        "OnlinePartition",
        "OfflinePartition",
    ]
    assert R.REPLICA_DELETION_INELIGIBLE.value == "ReplicaDeletionIneligible"
