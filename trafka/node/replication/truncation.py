"""Where a follower truncates its log: leader epochs (KIP-101/279), not the high watermark.

REP-22 and REP-23 show why truncating to the (checkpointed) high watermark loses committed
data or lets replicas diverge: the follower's HW lags the leader's by one fetch round
(REP-24). With leader epochs (REP-25, EXT-08) a replica that becomes follower asks the
leader, with OffsetForLeaderEpoch, where the leader's log for the follower's latest epoch
ends, and truncates there instead:

1. The follower sends its latest epoch `E` (from its epoch cache).
2. The leader answers `(E', end_offset)`: `E'` is the largest epoch it knows that is <= E,
   `end_offset` the start offset of the leader's next epoch after E' (or its LEO if E' is
   its current epoch). `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` means it knows no epoch
   <= E.
3. If the follower also has `E'`, it truncates to `min(end_offset, its own end offset of E')`
   and is done. If it has no entry for `E'` (KIP-279), it truncates to its own end offset
   for the largest epoch <= E' and asks again with that epoch.

The cache itself is `trafka.log.leader_epoch.LeaderEpochCache`; this module only needs its
`end_offset_for_epoch` and `latest_epoch`, declared as `EpochLookup` so the decision stays a
pure function of its inputs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from trafka.node.replication.ids import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpoch,
    Offset,
)


class EpochLookup(Protocol):
    """The part of the leader-epoch cache the truncation decision reads."""

    @property
    def latest_epoch(self) -> int | None: ...

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's `LeaderEpochFileCache.endOffsetFor`: (largest epoch <= requested, end)."""
        ...


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An OffsetForLeaderEpoch answer for one partition (error handling is the caller's)."""

    leader_epoch: LeaderEpoch
    end_offset: Offset


class TruncationReason(enum.Enum):
    EPOCH_MATCH = "truncated to the end of the common epoch"
    EPOCH_DIVERGED = "follower lacks the leader's epoch; truncated, asking again"
    NO_EPOCH_FALLBACK_TO_HIGH_WATERMARK = "no usable epoch: fell back to the high watermark"


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    """Truncate the follower's log to `offset`; if not `complete`, ask the leader again
    about `next_request_epoch` before fetching (KIP-279)."""

    offset: Offset
    complete: bool
    reason: TruncationReason
    next_request_epoch: LeaderEpoch = UNDEFINED_EPOCH


def request_epoch(cache: EpochLookup) -> LeaderEpoch:
    """The epoch a new follower asks about: its latest (UNDEFINED_EPOCH if it has none)."""
    latest = cache.latest_epoch
    return UNDEFINED_EPOCH if latest is None else LeaderEpoch(latest)


def leader_answer(cache: EpochLookup, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
    """The leader's side of OffsetForLeaderEpoch for one partition."""
    epoch, end_offset = cache.end_offset_for_epoch(requested_epoch, log_end_offset)
    return EpochEndOffset(LeaderEpoch(epoch), Offset(end_offset))


def truncation_offset(
    answer: EpochEndOffset,
    local_cache: EpochLookup,
    local_log_end_offset: int,
    local_high_watermark: int,
) -> TruncationDecision:
    """The follower's decision after the leader's answer (Kafka's
    `AbstractFetcherThread.getOffsetTruncationState`).

    Never truncates above the local LEO. Falls back to the high watermark only when there is
    no epoch information at all (an empty cache or a leader that knows no epoch <= ours),
    which is also what Kafka does.
    """
    if answer.end_offset == UNDEFINED_EPOCH_OFFSET or answer.leader_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(
            offset=Offset(min(local_high_watermark, local_log_end_offset)),
            complete=True,
            reason=TruncationReason.NO_EPOCH_FALLBACK_TO_HIGH_WATERMARK,
        )
    local_epoch, local_end = local_cache.end_offset_for_epoch(
        answer.leader_epoch, local_log_end_offset
    )
    if local_epoch == UNDEFINED_EPOCH or local_end == UNDEFINED_EPOCH_OFFSET:
        return TruncationDecision(
            offset=Offset(min(local_high_watermark, local_log_end_offset)),
            complete=True,
            reason=TruncationReason.NO_EPOCH_FALLBACK_TO_HIGH_WATERMARK,
        )
    if local_epoch != answer.leader_epoch:
        return TruncationDecision(
            offset=Offset(min(local_end, local_log_end_offset)),
            complete=False,
            reason=TruncationReason.EPOCH_DIVERGED,
            next_request_epoch=LeaderEpoch(local_epoch),
        )
    return TruncationDecision(
        offset=Offset(min(answer.end_offset, local_end, local_log_end_offset)),
        complete=True,
        reason=TruncationReason.EPOCH_MATCH,
    )
