"""Properties of assignment and the selectors over arbitrary inputs (hypothesis)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.node.controller.selectors import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from trafka.node.replica_assignment import BrokerPlacement, assign_replicas_to_brokers
from trafka.node.replication.ids import BrokerId

brokers_st = st.lists(st.integers(0, 20), min_size=1, max_size=8, unique=True)


@settings(max_examples=200, deadline=None)
@given(
    brokers=brokers_st,
    partitions=st.integers(1, 40),
    data=st.data(),
    seed=st.integers(0, 2**32),
    racks=st.booleans(),
)
def test_assignment_places_distinct_replicas_and_spreads_leaders(
    brokers: list[int], partitions: int, data: st.DataObject, seed: int, racks: bool
) -> None:
    factor = data.draw(st.integers(1, len(brokers)))
    placements = [
        BrokerPlacement(BrokerId(b), f"r{b % 3}" if racks else None) for b in sorted(brokers)
    ]
    assignment = assign_replicas_to_brokers(placements, partitions, factor, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == factor and len(set(replicas)) == factor
        assert set(replicas) <= set(brokers)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(BrokerId(b), 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


replicas_st = st.lists(st.integers(1, 6), min_size=1, max_size=5, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    assignment=replicas_st,
    isr=st.sets(st.integers(1, 6)),
    live=st.sets(st.integers(1, 6)),
    unclean=st.booleans(),
)
def test_offline_selector_never_picks_a_dead_or_unclean_leader_unless_allowed(
    assignment: list[int], isr: set[int], live: set[int], unclean: bool
) -> None:
    ar = tuple(BrokerId(b) for b in assignment)
    isr_t = tuple(BrokerId(b) for b in sorted(isr & set(assignment)))
    result = offline_partition_leader(
        ar, isr_t, frozenset(BrokerId(b) for b in live), unclean_leader_election_enable=unclean
    )
    if isinstance(result, Election):
        assert result.leader in live and result.leader in assignment
        assert result.leader in result.isr and set(result.isr) <= live
        assert result.unclean == (result.leader not in isr_t)
        assert unclean or not result.unclean
    else:
        assert not (set(isr_t) & live) or not (set(assignment) & live)


@settings(max_examples=300, deadline=None)
@given(assignment=replicas_st, isr=st.sets(st.integers(1, 6)), stopping=st.sets(st.integers(1, 6)))
def test_controlled_shutdown_leader_is_never_stopping(
    assignment: list[int], isr: set[int], stopping: set[int]
) -> None:
    ar = tuple(BrokerId(b) for b in assignment)
    isr_t = tuple(BrokerId(b) for b in sorted(isr & set(assignment)))
    everyone = frozenset(BrokerId(b) for b in range(1, 7))
    result = controlled_shutdown_leader(
        ar, isr_t, everyone, frozenset(BrokerId(b) for b in stopping)
    )
    if isinstance(result, Election):
        assert result.leader not in stopping and result.leader in isr_t
        assert not set(result.isr) & stopping


@settings(max_examples=200, deadline=None)
@given(assignment=replicas_st, isr=st.sets(st.integers(1, 6)), live=st.sets(st.integers(1, 6)))
def test_preferred_selector_only_elects_the_first_replica(
    assignment: list[int], isr: set[int], live: set[int]
) -> None:
    ar = tuple(BrokerId(b) for b in assignment)
    result = preferred_replica_leader(
        ar,
        BrokerId(0),
        tuple(BrokerId(b) for b in sorted(isr)),
        frozenset(BrokerId(b) for b in live),
    )
    if isinstance(result, Election):
        assert result.leader == assignment[0] and result.leader in isr and result.leader in live
