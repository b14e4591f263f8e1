"""An ISR write whose quorum outcome is unknown (a timeout) is neither success nor failure
(issue 12, item 6): the leader keeps the pending expansion in its maximal ISR and re-issues
the same conditional write until it resolves, so the ISR it computes the HW from is never
smaller than the one the tree may hold."""

from __future__ import annotations

import random

import pytest

from tests.node.replication.sim import LAG_MS, SimCluster
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)
from trafka.node.replication.leader import IsrWriteOutcome, PartitionLeaderState

TP = TopicPartition("t", 0)
A, B = 1, 2


def expansion_committed_behind_the_leaders_back() -> SimCluster:
    cluster = SimCluster((A, B), {0: (A, B)}, min_insync_replicas=1)
    cluster.fetch(B, TP)  # KIP-101 truncation round
    cluster.brokers[B].isolated = True
    cluster.advance(LAG_MS + 1)
    cluster.leader_checks()  # B dropped: ISR {A}
    state = cluster.tree.partition_state(TP)
    assert state is not None and state.data.isr == (A,)
    cluster.brokers[B].isolated = False
    cluster.next_isr_write_unknown = True  # the expansion commits, the leader times out
    cluster.fetch(B, TP)  # caught up: the expansion is proposed
    state = cluster.tree.partition_state(TP)
    assert state is not None and state.data.isr == (A, B)
    # B stops fetching; A takes a write and B falls behind for longer than the lag time.
    cluster.brokers[B].isolated = True
    cluster.produce(TP)
    cluster.advance(LAG_MS + 1)
    cluster.complete_produces()
    return cluster


def test_a_timed_out_expansion_that_committed_still_holds_the_high_watermark() -> None:
    cluster = expansion_committed_behind_the_leaders_back()
    leader = cluster.brokers[A].leaders[TP]
    assert BrokerId(B) in leader.maximal_isr()
    assert cluster.acked[TP] == {}, "acknowledged while B, in the tree's ISR, lacks it"
    cluster.check_invariants()
    # The periodic check re-issues the write: it conflicts (it committed), the leader adopts
    # the tree's ISR, and the next check shrinks B out properly; then the write is acked.
    cluster.leader_checks()
    assert leader.isr == (BrokerId(A), BrokerId(B)) and leader.pending_isr is None
    cluster.leader_checks()
    cluster.complete_produces()
    state = cluster.tree.partition_state(TP)
    assert state is not None and state.data.isr == (A,)
    assert cluster.acked[TP] == {0: 0}
    cluster.check_invariants()


def test_a_timed_out_write_that_never_applied_is_reissued_and_commits() -> None:
    cluster = SimCluster((A, B), {0: (A, B)}, min_insync_replicas=1)
    cluster.fetch(B, TP)
    cluster.brokers[B].isolated = True
    cluster.advance(LAG_MS + 1)
    cluster.next_isr_write_unknown = False  # lost
    cluster.leader_checks()
    leader = cluster.brokers[A].leaders[TP]
    assert leader.pending_isr == (BrokerId(A),) and leader.pending_in_doubt
    assert leader.isr == (BrokerId(A), BrokerId(B))  # a shrink counts only once written
    cluster.leader_checks()  # re-issued: commits now
    assert leader.isr == (BrokerId(A),) and leader.pending_isr is None
    state = cluster.tree.partition_state(TP)
    assert state is not None and state.data.isr == (A,)


def test_unknown_outcome_keeps_the_proposal_pending_and_blocks_new_ones() -> None:
    state = PartitionLeaderState.become_leader(
        TP,
        BrokerId(A),
        leader_epoch=LeaderEpoch(1),
        controller_epoch=ControllerEpoch(1),
        replicas=(BrokerId(A), BrokerId(B)),
        isr=(BrokerId(A),),
        zk_version=ZkVersion(3),
        log_end_offset=Offset(0),
        high_watermark=Offset(0),
        now_ms=0,
    )
    outcome = state.on_follower_fetch(BrokerId(B), Offset(0), 1)
    assert outcome.isr_write is not None
    assert not state.on_isr_write_result(IsrWriteOutcome.UNKNOWN, ZkVersion(-1), 2)
    assert state.pending_isr == (BrokerId(A), BrokerId(B))
    assert BrokerId(B) in state.maximal_isr()
    again = state.maybe_shrink_isr(3)
    assert again == outcome.isr_write  # the same conditional write, re-issued
    assert state.on_isr_write_result(IsrWriteOutcome.COMMITTED, ZkVersion(4), 4) is False
    assert state.isr == (BrokerId(A), BrokerId(B)) and state.zk_version == 4
    assert not state.pending_in_doubt and state.maybe_shrink_isr(5) is None


@pytest.mark.parametrize("seed", range(8))
def test_random_walks_with_unknown_isr_write_outcomes_keep_every_invariant(seed: int) -> None:
    cluster = SimCluster(
        (1, 2, 3, 4),
        {0: (1, 2, 3), 1: (2, 3, 4)},
        rng=random.Random(seed),
        unknown_isr_writes=0.3,
    )
    for _ in range(400):
        cluster.step()
    cluster.heal_and_converge()
    assert any("unknown" in line for line in cluster.trace)
