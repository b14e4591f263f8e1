"""Follower truncation by OffsetForLeaderEpoch (KIP-101, KIP-279)."""

from __future__ import annotations

from tests.node.replication.epochs import Epochs
from trafka.node.replication.ids import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpoch, Offset
from trafka.node.replication.truncation import (
    EpochEndOffset,
    TruncationReason,
    leader_answer,
    request_epoch,
    truncation_offset,
)


def test_follower_with_all_committed_data_keeps_it() -> None:
    # REP-22 with epochs: B restarted with [m0, m1], HW 1; the leader A has epoch 0 up to 2.
    leader = Epochs([(0, 0)])
    follower = Epochs([(0, 0)])
    answer = leader_answer(leader, request_epoch(follower), log_end_offset=2)
    assert answer == EpochEndOffset(LeaderEpoch(0), Offset(2))
    decision = truncation_offset(answer, follower, local_log_end_offset=2, local_high_watermark=1)
    assert decision.offset == 2 and decision.complete
    assert decision.reason is TruncationReason.EPOCH_MATCH


def test_divergent_suffix_is_truncated_at_the_next_epoch_start() -> None:
    # REP-23 with epochs: A has [m0, m1] in epoch 0; B leads epoch 1 from offset 1.
    leader = Epochs([(0, 0), (1, 1)])
    follower = Epochs([(0, 0)])
    answer = leader_answer(leader, request_epoch(follower), log_end_offset=2)
    assert answer == EpochEndOffset(LeaderEpoch(0), Offset(1))
    decision = truncation_offset(answer, follower, local_log_end_offset=2, local_high_watermark=2)
    assert decision.offset == 1 and decision.complete


def test_follower_lacking_the_leaders_epoch_asks_again() -> None:
    # KIP-279: follower has epochs 0 and 2, leader has 0 and 1 (3 started later).
    leader = Epochs([(0, 0), (1, 5), (3, 8)])
    follower = Epochs([(0, 0), (2, 6)])
    answer = leader_answer(leader, request_epoch(follower), log_end_offset=10)
    assert answer == EpochEndOffset(LeaderEpoch(1), Offset(8))
    first = truncation_offset(answer, follower, local_log_end_offset=9, local_high_watermark=3)
    assert not first.complete and first.reason is TruncationReason.EPOCH_DIVERGED
    assert first.offset == 6 and first.next_request_epoch == 0
    second_answer = leader_answer(leader, first.next_request_epoch, log_end_offset=10)
    assert second_answer == EpochEndOffset(LeaderEpoch(0), Offset(5))
    second = truncation_offset(
        second_answer, follower, local_log_end_offset=6, local_high_watermark=3
    )
    assert second.complete and second.offset == 5


def test_never_truncates_above_the_local_end() -> None:
    leader = Epochs([(0, 0)])
    follower = Epochs([(0, 0)])
    answer = leader_answer(leader, 0, log_end_offset=100)
    assert truncation_offset(answer, follower, 7, 3).offset == 7


def test_no_epoch_information_falls_back_to_high_watermark() -> None:
    undefined = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    decision = truncation_offset(
        undefined, Epochs(), local_log_end_offset=9, local_high_watermark=4
    )
    assert decision.offset == 4
    assert decision.reason is TruncationReason.NO_EPOCH_FALLBACK_TO_HIGH_WATERMARK
