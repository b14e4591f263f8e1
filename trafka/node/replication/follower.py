"""The follower's side of one partition: truncate by leader epoch, then fetch (KIP-101/279/320).

A pure state machine the replica fetcher drives (one per followed partition):

    TRUNCATING --OffsetForLeaderEpoch answer, decision complete--> FETCHING
    TRUNCATING --answer, follower lacks the leader's epoch (KIP-279)--> TRUNCATING (ask again)
    FETCHING   --Fetch answer-->                                    FETCHING
    any        --FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER-->
               unchanged: back off and wait for the controller's next LeaderAndIsr

`become_follower` starts in TRUNCATING (the seeds' "truncate to HW" of REP-26 is replaced by
the epoch handshake, REP-25, EXT-08). `next_request` says what to send; the `on_*` methods
take the answers and say what to do with the local log. Every answer must belong to this
state object: a response that arrives after a new LeaderAndIsr replaced it is stale and
must be dropped (the simulation showed that applying one lowers a new leader's HW).

Not implemented here: the fetch session (KIP-227), throttling, sizes (the fetcher's).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from trafka.node.replication.ids import BrokerId, LeaderEpoch, Offset, TopicPartition
from trafka.node.replication.leader import follower_high_watermark
from trafka.node.replication.truncation import (
    EpochEndOffset,
    EpochLookup,
    TruncationDecision,
    request_epoch,
    truncation_offset,
)


class FollowerPhase(enum.Enum):
    TRUNCATING = "asking OffsetForLeaderEpoch"
    FETCHING = "fetching from the leader"


@dataclass(frozen=True, slots=True)
class EpochRequest:
    """OffsetForLeaderEpoch (key 23) for one partition, sent with replica id = this broker."""

    tp: TopicPartition
    current_leader_epoch: LeaderEpoch
    leader_epoch: LeaderEpoch


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower Fetch (key 1) for one partition."""

    tp: TopicPartition
    fetch_offset: Offset
    current_leader_epoch: LeaderEpoch


class FetchAction(enum.Enum):
    APPEND = "append the records, then set the HW"
    TRUNCATE_TO_LEADER_END = "the fetch offset is past the leader's end: truncate there"
    BACK_OFF = "retry after replica.fetch.backoff.ms; a LeaderAndIsr will come"


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    action: FetchAction
    high_watermark: Offset | None = None
    truncate_to: Offset | None = None


RETRY_LATER = frozenset(
    {
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.replica_not_available,
    }
)


@dataclass(slots=True)
class PartitionFollowerState:
    """What a follower knows while it follows `leader` in `leader_epoch`."""

    tp: TopicPartition
    leader: BrokerId
    leader_epoch: LeaderEpoch
    phase: FollowerPhase = FollowerPhase.TRUNCATING
    ask_epoch: LeaderEpoch | None = None

    @classmethod
    def become_follower(
        cls, tp: TopicPartition, leader: BrokerId, leader_epoch: LeaderEpoch
    ) -> PartitionFollowerState:
        return cls(tp, leader, leader_epoch)

    def next_request(
        self, local_cache: EpochLookup, local_log_end_offset: int
    ) -> EpochRequest | FetchRequest:
        if self.phase is FollowerPhase.TRUNCATING:
            epoch = self.ask_epoch if self.ask_epoch is not None else request_epoch(local_cache)
            return EpochRequest(self.tp, self.leader_epoch, epoch)
        return FetchRequest(self.tp, Offset(local_log_end_offset), self.leader_epoch)

    def on_epoch_answer(
        self,
        error: ErrorCode,
        answer: EpochEndOffset,
        local_cache: EpochLookup,
        local_log_end_offset: int,
        local_high_watermark: int,
    ) -> TruncationDecision | None:
        """The leader's OffsetForLeaderEpoch answer. Returns where to truncate the local log
        (None: nothing to do now, retry later)."""
        if error is not ErrorCode.none:
            return None
        decision = truncation_offset(
            answer, local_cache, local_log_end_offset, local_high_watermark
        )
        if decision.complete:
            self.phase = FollowerPhase.FETCHING
            self.ask_epoch = None
        else:
            self.ask_epoch = decision.next_request_epoch
        return decision

    def on_fetch_answer(
        self,
        error: ErrorCode,
        leader_high_watermark: int,
        leader_log_end_offset: int,
        fetch_offset: int,
        records_count: int,
    ) -> FetchOutcome:
        """The leader's Fetch answer for this partition. On APPEND, the follower's HW is
        min(its LEO after the append, the leader's HW) (REP-13)."""
        if error is ErrorCode.none:
            new_end = fetch_offset + records_count
            return FetchOutcome(
                FetchAction.APPEND,
                high_watermark=follower_high_watermark(new_end, leader_high_watermark),
            )
        if error is ErrorCode.offset_out_of_range and fetch_offset > leader_log_end_offset:
            return FetchOutcome(
                FetchAction.TRUNCATE_TO_LEADER_END, truncate_to=Offset(leader_log_end_offset)
            )
        return FetchOutcome(FetchAction.BACK_OFF)


def follower_log_start_offset(
    leader_log_start_offset: int, local_log_start_offset: int, local_high_watermark: int
) -> Offset | None:
    """The log start offset a follower adopts after any Fetch answer, or None to keep its
    own (Kafka's `maybeIncrementLogStartOffset(leaderLogStartOffset, LeaderOffsetIncremented)`
    on every fetched partition, issue 12 item 6): records removed by DeleteRecords or
    retention on the leader are gone from the follower too, so they do not come back when
    it becomes leader. It only moves up, and never past the follower's own HW (Kafka
    refuses a start above the HW; a follower that far behind is caught by OFFSET_OUT_OF_RANGE
    on its next fetch)."""
    target = min(leader_log_start_offset, local_high_watermark)
    if target > local_log_start_offset:
        return Offset(target)
    return None
