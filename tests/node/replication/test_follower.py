"""The follower's truncate-then-fetch state machine (KIP-101/279/320)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.node.replication.epochs import Epochs
from trafka.node.replication.follower import (
    EpochRequest,
    FetchAction,
    FetchRequest,
    FollowerPhase,
    PartitionFollowerState,
)
from trafka.node.replication.ids import BrokerId, LeaderEpoch, TopicPartition
from trafka.node.replication.truncation import leader_answer

TP = TopicPartition("t", 0)


def test_truncates_first_then_fetches_from_its_end() -> None:
    follower = PartitionFollowerState.become_follower(TP, BrokerId(2), LeaderEpoch(1))
    local, leader = Epochs([(0, 0)]), Epochs([(0, 0), (1, 1)])
    request = follower.next_request(local, 2)
    assert request == EpochRequest(TP, LeaderEpoch(1), LeaderEpoch(0))
    decision = follower.on_epoch_answer(
        ErrorCode.none, leader_answer(leader, request.leader_epoch, 2), local, 2, 2
    )
    assert decision is not None and decision.offset == 1
    assert follower.phase is FollowerPhase.FETCHING
    assert follower.next_request(local, 1) == FetchRequest(TP, 1, LeaderEpoch(1))  # type: ignore[arg-type]


def test_kip279_asks_again_with_its_own_older_epoch() -> None:
    follower = PartitionFollowerState.become_follower(TP, BrokerId(2), LeaderEpoch(4))
    local, leader = Epochs([(0, 0), (2, 6)]), Epochs([(0, 0), (1, 5), (3, 8)])
    first = follower.next_request(local, 9)
    assert isinstance(first, EpochRequest)
    decision = follower.on_epoch_answer(
        ErrorCode.none, leader_answer(leader, first.leader_epoch, 10), local, 9, 3
    )
    assert (
        decision is not None and decision.offset == 6 and follower.phase is FollowerPhase.TRUNCATING
    )
    second = follower.next_request(local, 6)
    assert isinstance(second, EpochRequest) and second.leader_epoch == 0


def test_fenced_answers_change_nothing() -> None:
    follower = PartitionFollowerState.become_follower(TP, BrokerId(2), LeaderEpoch(1))
    answer = leader_answer(Epochs([(0, 0)]), 0, 5)
    assert follower.on_epoch_answer(ErrorCode.fenced_leader_epoch, answer, Epochs(), 0, 0) is None
    assert follower.phase is FollowerPhase.TRUNCATING
    follower.phase = FollowerPhase.FETCHING
    back_off = follower.on_fetch_answer(ErrorCode.unknown_leader_epoch, 5, 5, 3, 0)
    assert back_off.action is FetchAction.BACK_OFF


def test_fetch_answers() -> None:
    follower = PartitionFollowerState.become_follower(TP, BrokerId(2), LeaderEpoch(1))
    follower.phase = FollowerPhase.FETCHING
    appended = follower.on_fetch_answer(
        ErrorCode.none,
        leader_high_watermark=4,
        leader_log_end_offset=9,
        fetch_offset=2,
        records_count=3,
    )
    assert appended.action is FetchAction.APPEND and appended.high_watermark == 4
    capped = follower.on_fetch_answer(ErrorCode.none, 9, 9, 2, 3)
    assert capped.high_watermark == 5  # REP-13: never above its own end
    out_of_range = follower.on_fetch_answer(ErrorCode.offset_out_of_range, 3, 3, 5, 0)
    assert (
        out_of_range.action is FetchAction.TRUNCATE_TO_LEADER_END and out_of_range.truncate_to == 3
    )
