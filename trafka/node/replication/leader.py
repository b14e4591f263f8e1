"""The leader's bookkeeping for one partition: remote LEOs, HW, ISR changes, acks=all.

Pure and synchronous (STYLE 1, 5): every method takes `now_ms` where time matters and
returns what the shell must do. The replica manager owns one `PartitionLeaderState` per led
partition, calls it from the Produce and Fetch handlers, and executes the `IsrWrite`s.

High watermark (REP-07, REP-14, REP-15, D3 exclusive). The HW is the smallest LEO among the
leader and every follower that is in the ISR *or* caught up within
`replica.lag.time.max.ms` (REP-15 (b): a replica about to rejoin must not be overtaken).
It is recomputed on the seeds' four triggers -- `become_leader` (1), a committed ISR shrink
(2, `on_isr_write_result`), an append (3, `on_append`), a follower fetch (4,
`on_follower_fetch`) -- and never moves back while this broker leads.

ISR (REP-21, REP-36). A follower is out of sync when it has not caught up with the leader's
LEO for longer than `replica.lag.time.max.ms` (Kafka's `lastCaughtUpTimeMs` rule: a fetch
at the leader's LEO catches up *now*; a fetch at or past the LEO the leader had at the
previous fetch catches up *as of that previous fetch*). It rejoins when its LEO reaches the
HW and the start of the current leader epoch. Each change is a conditional write of the
partition state (version = the last known `zk_version`) plus a sequential
`/isr_change_notification` child (ZK-12); only one write is in flight at a time. A shrink
takes effect only once written (so the HW never counts on a smaller ISR than the
controller's); an expansion counts for the HW as soon as it is proposed (it can only lower
the HW, which is safe; Kafka's "maximal ISR").

A write whose outcome is unknown (the quorum timed out: it may still commit) stays pending
(`IsrWriteOutcome.UNKNOWN`): the expansion keeps counting for the HW, no other change is
proposed, and the periodic check re-issues the same conditional write
(`maybe_shrink_isr`), which either commits or conflicts; on a conflict the shell adopts the
tree's ISR when it still names this leader and epoch. So the ISR the leader uses is never
smaller than one the tree may hold (issue 12, item 6; Kafka's ZK client re-reads the state
to decide a write lost to a connection loss, `checkLeaderAndIsrZkData`).

acks=all (REP-30, EXT-10). Before the append: ISR smaller than `min.insync.replicas` ->
NOT_ENOUGH_REPLICAS. After it: the request completes when the HW reaches the offset after
its last record; if the ISR shrank below the minimum meanwhile the answer is
NOT_ENOUGH_REPLICAS_AFTER_APPEND; if leadership is lost, NOT_LEADER_OR_FOLLOWER; at its
deadline, REQUEST_TIMED_OUT.

Not implemented here: the fetch purgatory (long-poll), HW checkpoint files, follower
fetchers (shell code in the replica manager).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)

UNKNOWN_OFFSET = Offset(-1)
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
"""Kafka's default since 2.5 (D26: 10 s before)."""


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (REP-09: the "remote LEO")."""

    log_end_offset: Offset = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: Offset = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0


class IsrWriteOutcome(enum.Enum):
    """What the shell learned of an `IsrWrite`."""

    COMMITTED = "the conditional write committed"
    CONFLICT = "the write failed (version conflict, too large): it never applies"
    UNKNOWN = "the quorum timed out or lost the connection: it may still commit"


@dataclass(frozen=True, slots=True)
class IsrWrite:
    """Effect: write the partition state with the new ISR, conditionally.

    The shell performs, atomically: set `.../partitions/<p>/state` to
    {leader, leader_epoch, isr, controller_epoch} if its version is `expected_zk_version`,
    and create a sequential `/isr_change_notification/isr_change_` child naming `tp`.
    It reports back through `on_isr_write_result`.
    """

    tp: TopicPartition
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: ControllerEpoch
    expected_zk_version: ZkVersion


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """What a follower fetch changed."""

    high_watermark_advanced: bool
    isr_write: IsrWrite | None = None


_NOTHING_CHANGED = FetchOutcome(high_watermark_advanced=False)


@dataclass(slots=True)
class PartitionLeaderState:
    """Leader-side replica bookkeeping of one partition, for one leader epoch."""

    tp: TopicPartition
    local_broker: BrokerId
    leader_epoch: LeaderEpoch
    controller_epoch: ControllerEpoch
    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    zk_version: ZkVersion
    log_end_offset: Offset
    high_watermark: Offset
    leader_epoch_start_offset: Offset
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    min_insync_replicas: int = 1
    followers: dict[BrokerId, FollowerState] = field(default_factory=dict)
    pending_isr: tuple[BrokerId, ...] | None = None
    pending_in_doubt: bool = False
    """The pending write's outcome is unknown; `maybe_shrink_isr` re-issues it."""
    leading_since_epoch: LeaderEpoch | None = None
    """The leader epoch at which this broker's unbroken leadership began (`leader_epoch`
    when None): a LeaderAndIsr that bumps the epoch and keeps this broker leader (the
    controller removing a dead follower from the ISR) does not end it, so the appends
    waiting for acks=all stay valid (`acks_all_outcome`)."""

    # -- trigger 1: becoming leader --------------------------------------------------------

    @classmethod
    def become_leader(
        cls,
        tp: TopicPartition,
        local_broker: BrokerId,
        *,
        leader_epoch: LeaderEpoch,
        controller_epoch: ControllerEpoch,
        replicas: tuple[BrokerId, ...],
        isr: tuple[BrokerId, ...],
        zk_version: ZkVersion,
        log_end_offset: Offset,
        high_watermark: Offset,
        now_ms: int,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        min_insync_replicas: int = 1,
        leading_since_epoch: LeaderEpoch | None = None,
    ) -> PartitionLeaderState:
        """LeaderAndIsr made this broker leader. Followers' LEOs are unknown until they
        fetch; ISR members count as caught up now (Kafka's `makeLeader`).

        `leading_since_epoch`: when this broker led the partition already (a new epoch, the
        same leader), the epoch its leadership began at; None for a new leadership."""
        state = cls(
            tp=tp,
            local_broker=local_broker,
            leader_epoch=leader_epoch,
            controller_epoch=controller_epoch,
            replicas=replicas,
            isr=isr,
            zk_version=zk_version,
            log_end_offset=log_end_offset,
            high_watermark=Offset(min(high_watermark, log_end_offset)),
            leader_epoch_start_offset=log_end_offset,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            min_insync_replicas=min_insync_replicas,
            leading_since_epoch=(
                leader_epoch if leading_since_epoch is None else leading_since_epoch
            ),
        )
        # ISR members outside the assignment (a stale request) still hold the HW back.
        for replica in (*replicas, *(r for r in isr if r not in replicas)):
            if replica != local_broker:
                caught_up = now_ms if replica in isr else 0
                state.followers[replica] = FollowerState(last_caught_up_time_ms=caught_up)
        state.maybe_increment_high_watermark(now_ms)
        return state

    # -- the high watermark ---------------------------------------------------------------

    def maximal_isr(self) -> frozenset[BrokerId]:
        """Committed ISR plus a proposed expansion (never a proposed shrink)."""
        pending = self.pending_isr or ()
        return frozenset(self.isr) | (frozenset(pending) & frozenset(self.replicas))

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """REP-15: HW = min LEO over leader + qualifying followers; only ever increases."""
        candidate = self.log_end_offset
        if candidate <= self.high_watermark:
            return False  # the minimum is at most the leader's LEO (most follower fetches)
        maximal_isr = self.maximal_isr()
        for broker, follower in self.followers.items():
            recently_caught_up = (
                follower.log_end_offset >= 0
                and now_ms - follower.last_caught_up_time_ms <= self.replica_lag_time_max_ms
            )
            if broker in maximal_isr or recently_caught_up:
                candidate = Offset(min(candidate, max(follower.log_end_offset, 0)))
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # -- trigger 3: produce ---------------------------------------------------------------

    def on_append(self, new_log_end_offset: Offset, now_ms: int) -> bool:
        """The leader appended (REP-12); returns whether the HW advanced."""
        assert new_log_end_offset >= self.log_end_offset, "the leader's LEO never goes back"
        self.log_end_offset = new_log_end_offset
        return self.maybe_increment_high_watermark(now_ms)

    # -- trigger 4: follower fetch --------------------------------------------------------

    def on_follower_fetch(
        self, follower: BrokerId, fetch_offset: Offset, now_ms: int
    ) -> FetchOutcome:
        """A follower fetched from `fetch_offset` (its LEO, REP-11, REP-34)."""
        state = self.followers.get(follower)
        if state is None:
            return _NOTHING_CHANGED
        if fetch_offset >= self.log_end_offset:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_time_ms = max(
                state.last_caught_up_time_ms, state.last_fetch_time_ms
            )
        state.log_end_offset = Offset(min(fetch_offset, self.log_end_offset))
        state.last_fetch_leader_log_end_offset = self.log_end_offset
        state.last_fetch_time_ms = now_ms
        isr_write = self._maybe_expand_isr(follower, state)
        advanced = self.maybe_increment_high_watermark(now_ms)
        if isr_write is None and not advanced:
            return _NOTHING_CHANGED
        return FetchOutcome(high_watermark_advanced=advanced, isr_write=isr_write)

    def _maybe_expand_isr(self, follower: BrokerId, state: FollowerState) -> IsrWrite | None:
        if follower in self.isr or self.pending_isr is not None:
            return None
        caught_up = (
            state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )
        if not caught_up:
            return None
        new_isr = tuple(r for r in self.replicas if r in self.isr or r == follower)
        return self._propose(new_isr)

    # -- ISR shrink (trigger 2 once committed) ----------------------------------------------

    def out_of_sync_replicas(self, now_ms: int) -> tuple[BrokerId, ...]:
        """ISR followers that have not caught up for longer than replica.lag.time.max.ms."""
        return tuple(
            broker
            for broker in self.isr
            if broker != self.local_broker
            and broker in self.followers
            and now_ms - self.followers[broker].last_caught_up_time_ms
            > self.replica_lag_time_max_ms
        )

    def maybe_shrink_isr(self, now_ms: int) -> IsrWrite | None:
        """The periodic check (Kafka runs it every replica.lag.time.max.ms / 2). A write in
        doubt is re-issued unchanged (same ISR, same expected version) until it resolves."""
        if self.pending_isr is not None:
            if self.pending_in_doubt:
                return self._write_for(self.pending_isr)
            return None
        lagging = set(self.out_of_sync_replicas(now_ms))
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    def _propose(self, new_isr: tuple[BrokerId, ...]) -> IsrWrite:
        self.pending_isr = new_isr
        self.pending_in_doubt = False
        return self._write_for(new_isr)

    def _write_for(self, new_isr: tuple[BrokerId, ...]) -> IsrWrite:
        return IsrWrite(
            tp=self.tp,
            leader=self.local_broker,
            leader_epoch=self.leader_epoch,
            isr=new_isr,
            controller_epoch=self.controller_epoch,
            expected_zk_version=self.zk_version,
        )

    def on_isr_write_result(
        self, outcome: bool | IsrWriteOutcome, new_zk_version: ZkVersion, now_ms: int
    ) -> bool:
        """The shell's answer to the pending `IsrWrite` (True/False: committed/conflict).
        On success the ISR and version are applied (then the HW may move: trigger 2). On a
        conflict the proposal is dropped; the shell adopts the tree's state if it still
        names this leader and epoch, else the controller's LeaderAndIsr brings the truth.
        On an unknown outcome the proposal stays pending and in doubt (module docstring).
        Returns whether the HW advanced."""
        if outcome is True:
            outcome = IsrWriteOutcome.COMMITTED
        elif outcome is False:
            outcome = IsrWriteOutcome.CONFLICT
        proposed = self.pending_isr
        if proposed is not None and outcome is IsrWriteOutcome.UNKNOWN:
            self.pending_in_doubt = True
            return False
        self.pending_isr = None
        self.pending_in_doubt = False
        if proposed is None or outcome is not IsrWriteOutcome.COMMITTED:
            return False
        self.isr = proposed
        self.zk_version = new_zk_version
        return self.maybe_increment_high_watermark(now_ms)

    # -- acks=all -------------------------------------------------------------------------

    def check_before_append(self, acks: int) -> ErrorCode:
        """NOT_ENOUGH_REPLICAS when acks=all and the ISR is below min.insync.replicas."""
        if acks == -1 and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas
        return ErrorCode.none


def follower_high_watermark(log_end_offset: int, leader_high_watermark: int) -> Offset:
    """REP-13: a follower's HW after a fetch: min(its LEO, the HW in the response)."""
    return Offset(min(log_end_offset, leader_high_watermark))


def acks_all_outcome(
    leader: PartitionLeaderState | None,
    leader_epoch_at_append: LeaderEpoch,
    required_offset: Offset,
    now_ms: int,
    deadline_ms: int,
) -> ErrorCode | None:
    """Decide a parked acks=all produce (the produce purgatory's `tryComplete`).

    `required_offset` is the offset after the request's last record. Returns None to keep
    waiting, else the error code to answer with (ErrorCode.none = success).

    The wait fails with NOT_LEADER_OR_FOLLOWER only when this broker's leadership that took
    the append has ended (Kafka's `checkEnoughReplicasReachOffset`: only a leader that is no
    longer local fails it). A new leader epoch with the same leader (the controller shrank
    the ISR of a dead follower) keeps it waiting: a leader never truncates its own log, so
    the records are still there. Leadership lost and regained starts a new
    `leading_since_epoch`, after the append's epoch: the log may have been truncated.
    """
    if leader is None or leader.leader_epoch < leader_epoch_at_append:
        return ErrorCode.not_leader_or_follower
    since = leader.leading_since_epoch
    if since is None:
        since = leader.leader_epoch
    if since > leader_epoch_at_append:
        return ErrorCode.not_leader_or_follower
    if leader.high_watermark >= required_offset:
        if len(leader.isr) < leader.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none
    if now_ms >= deadline_ms:
        return ErrorCode.request_timed_out
    return None
