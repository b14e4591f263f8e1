"""Leader-side bookkeeping: the seeds' HW walkthroughs, ISR shrink/expand, acks=all."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)
from trafka.node.replication.leader import PartitionLeaderState, acks_all_outcome

TP = TopicPartition("t", 0)
T0 = 1_000_000
LAG_MS = 10_000


def leader(
    isr: tuple[int, ...] = (1, 2), replicas: tuple[int, ...] = (1, 2), min_isr: int = 1
) -> PartitionLeaderState:
    return PartitionLeaderState.become_leader(
        TP,
        BrokerId(1),
        leader_epoch=LeaderEpoch(0),
        controller_epoch=ControllerEpoch(1),
        replicas=tuple(BrokerId(r) for r in replicas),
        isr=tuple(BrokerId(r) for r in isr),
        zk_version=ZkVersion(0),
        log_end_offset=Offset(0),
        high_watermark=Offset(0),
        now_ms=T0,
        replica_lag_time_max_ms=LAG_MS,
        min_insync_replicas=min_isr,
    )


def test_rep17_hw_needs_one_more_fetch_round() -> None:
    state = leader()
    assert not state.on_append(Offset(1), T0)  # produce: HW stays 0
    assert state.high_watermark == 0
    first = state.on_follower_fetch(BrokerId(2), Offset(0), T0 + 1)  # round 1: remote LEO 0
    assert not first.high_watermark_advanced and state.high_watermark == 0
    second = state.on_follower_fetch(BrokerId(2), Offset(1), T0 + 2)  # round 2: remote LEO 1
    assert second.high_watermark_advanced and state.high_watermark == 1


def test_hw_never_goes_back_and_never_passes_leo() -> None:
    state = leader()
    state.on_append(Offset(5), T0)
    state.on_follower_fetch(BrokerId(2), Offset(5), T0)
    assert state.high_watermark == 5
    state.on_follower_fetch(BrokerId(2), Offset(3), T0 + 1)  # a stale fetch
    assert state.high_watermark == 5


def test_lagging_follower_is_shrunk_out_and_hw_moves_when_committed() -> None:
    state = leader()
    state.on_append(Offset(3), T0)
    assert state.maybe_shrink_isr(T0 + LAG_MS) is None
    write = state.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert write is not None and write.isr == (BrokerId(1),) and write.expected_zk_version == 0
    assert state.high_watermark == 0  # the shrink is not committed yet
    assert state.on_isr_write_result(True, ZkVersion(1), T0 + LAG_MS + 2)  # trigger 2
    assert state.isr == (BrokerId(1),) and state.high_watermark == 3


def test_follower_rejoins_when_it_reaches_the_hw() -> None:
    state = leader(isr=(1,))
    state.on_append(Offset(4), T0)
    assert state.high_watermark == 4
    behind = state.on_follower_fetch(BrokerId(2), Offset(2), T0 + 1)
    assert behind.isr_write is None
    caught_up = state.on_follower_fetch(BrokerId(2), Offset(4), T0 + 2)
    assert caught_up.isr_write is not None and caught_up.isr_write.isr == (BrokerId(1), BrokerId(2))
    state.on_isr_write_result(True, ZkVersion(1), T0 + 3)
    assert state.isr == (BrokerId(1), BrokerId(2))


def test_failed_isr_write_changes_nothing() -> None:
    state = leader()
    state.on_append(Offset(1), T0)
    assert state.maybe_shrink_isr(T0 + LAG_MS + 1) is not None
    assert not state.on_isr_write_result(False, ZkVersion(7), T0 + LAG_MS + 2)
    assert state.isr == (BrokerId(1), BrokerId(2)) and state.zk_version == 0


def test_acks_all_decisions() -> None:
    state = leader(min_isr=2)
    assert state.check_before_append(-1) is ErrorCode.none
    state.on_append(Offset(2), T0)
    assert acks_all_outcome(state, LeaderEpoch(0), Offset(2), T0, T0 + 100) is None
    state.on_follower_fetch(BrokerId(2), Offset(2), T0 + 1)
    assert acks_all_outcome(state, LeaderEpoch(0), Offset(2), T0 + 1, T0 + 100) is ErrorCode.none
    assert (
        acks_all_outcome(state, LeaderEpoch(1), Offset(2), T0 + 1, T0 + 100)
        is ErrorCode.not_leader_or_follower
    )
    assert (
        acks_all_outcome(None, LeaderEpoch(0), Offset(2), T0, T0 + 100)
        is ErrorCode.not_leader_or_follower
    )
    state.on_append(Offset(3), T0 + 2)
    assert (
        acks_all_outcome(state, LeaderEpoch(0), Offset(3), T0 + 100, T0 + 100)
        is ErrorCode.request_timed_out
    )


def test_acks_all_survives_a_new_epoch_of_the_same_leader_only() -> None:
    """The controller bumps the leader epoch when it drops a dead follower from the ISR;
    Kafka keeps the waiting produce (only a leader that is no longer local fails it)."""
    first = leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2)
    first.on_append(Offset(2), T0)
    assert acks_all_outcome(first, LeaderEpoch(0), Offset(2), T0, T0 + 100) is None
    bumped = PartitionLeaderState.become_leader(  # epoch 1: same leader, ISR without 3
        TP,
        BrokerId(1),
        leader_epoch=LeaderEpoch(1),
        controller_epoch=ControllerEpoch(1),
        replicas=(BrokerId(1), BrokerId(2), BrokerId(3)),
        isr=(BrokerId(1), BrokerId(2)),
        zk_version=ZkVersion(1),
        log_end_offset=Offset(2),
        high_watermark=Offset(0),
        now_ms=T0 + 1,
        replica_lag_time_max_ms=LAG_MS,
        min_insync_replicas=2,
        leading_since_epoch=first.leading_since_epoch,
    )
    assert acks_all_outcome(bumped, LeaderEpoch(0), Offset(2), T0 + 1, T0 + 100) is None
    bumped.on_follower_fetch(BrokerId(2), Offset(2), T0 + 2)
    assert acks_all_outcome(bumped, LeaderEpoch(0), Offset(2), T0 + 2, T0 + 100) is ErrorCode.none
    # Leadership lost and regained (epoch 2): the log may have been truncated meanwhile.
    regained = PartitionLeaderState.become_leader(
        TP,
        BrokerId(1),
        leader_epoch=LeaderEpoch(2),
        controller_epoch=ControllerEpoch(1),
        replicas=(BrokerId(1), BrokerId(2)),
        isr=(BrokerId(1), BrokerId(2)),
        zk_version=ZkVersion(2),
        log_end_offset=Offset(2),
        high_watermark=Offset(2),
        now_ms=T0 + 3,
    )
    assert regained.leading_since_epoch == 2
    assert (
        acks_all_outcome(regained, LeaderEpoch(0), Offset(2), T0 + 3, T0 + 100)
        is ErrorCode.not_leader_or_follower
    )


def test_min_insync_replicas_before_and_after_append() -> None:
    state = leader(min_isr=2)
    state.on_append(Offset(1), T0)
    state.maybe_shrink_isr(T0 + LAG_MS + 1)
    state.on_isr_write_result(True, ZkVersion(1), T0 + LAG_MS + 1)  # ISR {1}: HW -> 1
    assert state.check_before_append(-1) is ErrorCode.not_enough_replicas
    assert state.check_before_append(1) is ErrorCode.none
    outcome = acks_all_outcome(state, LeaderEpoch(0), Offset(1), T0 + LAG_MS + 2, T0 + 10**6)
    assert outcome is ErrorCode.not_enough_replicas_after_append


def test_follower_high_watermark_is_capped_by_its_log_end() -> None:
    from trafka.node.replication.leader import follower_high_watermark

    assert follower_high_watermark(3, 5) == 3  # REP-13
    assert follower_high_watermark(7, 5) == 5
