"""The four partition leader selectors (CTL-17..20) and the NoOp one (EXT-13).

Each selector is a pure function of the partition's assignment (AR, in order), its current
leader and ISR and the brokers' liveness, and returns an `Election` -- the seeds' triple
(new leader, new ISR, replicas that receive LeaderAndIsr) -- or an `ElectionFailure` with a
typed reason. The caller bumps the leader epoch and writes the result conditionally
(CTL-42 step 3.3). "First" always means first in assignment order, so the preferred replica
(CTL-36) wins whenever it qualifies and results are deterministic.
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from trafka.node.replication.ids import BrokerId


@dataclass(frozen=True, slots=True)
class Election:
    """A selector's answer: the seeds' triple (CTL-17 preamble)."""

    leader: BrokerId
    isr: tuple[BrokerId, ...]
    receivers: tuple[BrokerId, ...]
    unclean: bool = False
    """True when the leader came from outside the ISR (possible data loss, REP-32)."""


class ElectionFailureReason(enum.Enum):
    """Why a selector produced no leader (Kafka's exception names in brackets)."""

    NO_REPLICA_ONLINE = "no live replica [NoReplicaOnlineException]"
    NO_LIVE_ISR_AND_UNCLEAN_DISABLED = (
        "no live ISR member and unclean.leader.election.enable=false [NoReplicaOnlineException]"
    )
    NO_REASSIGNED_REPLICA_IN_ISR = "no live target replica is in the ISR"
    PREFERRED_REPLICA_NOT_AVAILABLE = "the preferred replica is dead or out of the ISR"
    PREFERRED_REPLICA_ALREADY_LEADER = "the preferred replica already leads [ElectionNotNeeded]"
    NO_LEADER_OUTSIDE_SHUTTING_DOWN = "every live ISR member is shutting down"
    ELECTION_NOT_NEEDED = "the partition has a leader [ElectionNotNeeded]"
    UNKNOWN_PARTITION = "no such partition (or its topic is being deleted)"


@dataclass(frozen=True, slots=True)
class ElectionFailure:
    reason: ElectionFailureReason

    @property
    def error(self) -> ErrorCode:
        """The error ElectLeaders answers for this partition (KIP-460)."""
        return ELECTION_ERRORS[self.reason]


ELECTION_ERRORS: dict[ElectionFailureReason, ErrorCode] = {
    ElectionFailureReason.NO_REPLICA_ONLINE: ErrorCode.eligible_leaders_not_available,
    ElectionFailureReason.NO_LIVE_ISR_AND_UNCLEAN_DISABLED: (
        ErrorCode.eligible_leaders_not_available
    ),
    ElectionFailureReason.NO_REASSIGNED_REPLICA_IN_ISR: ErrorCode.eligible_leaders_not_available,
    ElectionFailureReason.PREFERRED_REPLICA_NOT_AVAILABLE: (
        ErrorCode.preferred_leader_not_available
    ),
    ElectionFailureReason.PREFERRED_REPLICA_ALREADY_LEADER: ErrorCode.election_not_needed,
    ElectionFailureReason.NO_LEADER_OUTSIDE_SHUTTING_DOWN: (
        ErrorCode.eligible_leaders_not_available
    ),
    ElectionFailureReason.ELECTION_NOT_NEEDED: ErrorCode.election_not_needed,
    ElectionFailureReason.UNKNOWN_PARTITION: ErrorCode.unknown_topic_or_partition,
}
"""ElectLeaders error per failure reason (Kafka's ElectLeaders/KIP-460 codes)."""


ElectionResult = Election | ElectionFailure


def offline_partition_leader(
    assignment: tuple[BrokerId, ...],
    isr: tuple[BrokerId, ...],
    live_brokers: Set[BrokerId],
    *,
    unclean_leader_election_enable: bool,
) -> ElectionResult:
    """OfflinePartitionLeaderSelector (CTL-17, EXT-09): routine Offline/New -> Online.

    Leader: the first live replica that is in the ISR; new ISR = the live ISR members.
    Otherwise, only with `unclean.leader.election.enable`, the first live replica, which
    becomes the sole ISR member (REP-32). Receivers: the live assigned replicas.
    """
    live_assigned = tuple(r for r in assignment if r in live_brokers)
    if not live_assigned:
        return ElectionFailure(ElectionFailureReason.NO_REPLICA_ONLINE)
    live_isr = tuple(r for r in isr if r in live_brokers)
    for replica in live_assigned:
        if replica in live_isr:
            return Election(leader=replica, isr=live_isr, receivers=live_assigned)
    if not unclean_leader_election_enable:
        return ElectionFailure(ElectionFailureReason.NO_LIVE_ISR_AND_UNCLEAN_DISABLED)
    leader = live_assigned[0]
    return Election(leader=leader, isr=(leader,), receivers=live_assigned, unclean=True)


def new_partition_leader(
    assignment: tuple[BrokerId, ...], live_brokers: Set[BrokerId]
) -> ElectionResult:
    """New -> Online (CTL-14, CTL-16, D17): first live replica leads, live replicas are the ISR."""
    live_assigned = tuple(r for r in assignment if r in live_brokers)
    if not live_assigned:
        return ElectionFailure(ElectionFailureReason.NO_REPLICA_ONLINE)
    return Election(leader=live_assigned[0], isr=live_assigned, receivers=live_assigned)


def reassigned_partition_leader(
    target_replicas: tuple[BrokerId, ...],
    isr: tuple[BrokerId, ...],
    live_brokers: Set[BrokerId],
) -> ElectionResult:
    """ReassignedPartitionLeaderSelector (CTL-18), reassignment step 7.

    Leader: the first live replica of RAR that is in the ISR. ISR: unchanged.
    Receivers: RAR.
    """
    for replica in target_replicas:
        if replica in live_brokers and replica in isr:
            return Election(leader=replica, isr=isr, receivers=target_replicas)
    return ElectionFailure(ElectionFailureReason.NO_REASSIGNED_REPLICA_IN_ISR)


def preferred_replica_leader(
    assignment: tuple[BrokerId, ...],
    current_leader: BrokerId,
    isr: tuple[BrokerId, ...],
    live_brokers: Set[BrokerId],
) -> ElectionResult:
    """PreferredReplicaPartitionLeaderSelector (CTL-19, CTL-36).

    Leader: the first assigned replica, if it is alive and in the ISR. ISR: unchanged.
    Receivers: the assigned replicas that are alive.
    """
    if not assignment:
        return ElectionFailure(ElectionFailureReason.NO_REPLICA_ONLINE)
    preferred = assignment[0]
    if preferred == current_leader:
        return ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_ALREADY_LEADER)
    if preferred not in live_brokers or preferred not in isr:
        return ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_NOT_AVAILABLE)
    receivers = tuple(r for r in assignment if r in live_brokers)
    return Election(leader=preferred, isr=isr, receivers=receivers)


def controlled_shutdown_leader(
    assignment: tuple[BrokerId, ...],
    isr: tuple[BrokerId, ...],
    live_or_shutting_down: Set[BrokerId],
    shutting_down: Set[BrokerId],
) -> ElectionResult:
    """ControlledShutdownLeaderSelector (CTL-20, CTL-43).

    Leader: the first assigned replica in the ISR, alive and not shutting down.
    ISR: the current ISR minus the shutting-down brokers.
    Receivers: the assigned replicas that are alive or shutting down.
    """
    new_isr = tuple(r for r in isr if r not in shutting_down)
    receivers = tuple(r for r in assignment if r in live_or_shutting_down)
    for replica in assignment:
        if replica in new_isr and replica in live_or_shutting_down:
            return Election(leader=replica, isr=new_isr, receivers=receivers)
    return ElectionFailure(ElectionFailureReason.NO_LEADER_OUTSIDE_SHUTTING_DOWN)


def no_op_leader(
    assignment: tuple[BrokerId, ...],
    current_leader: BrokerId,
    isr: tuple[BrokerId, ...],
    live_brokers: Set[BrokerId],
) -> Election:
    """NoOpLeaderSelector (EXT-13): the current leader and ISR, to the live replicas."""
    return Election(
        leader=current_leader,
        isr=isr,
        receivers=tuple(r for r in assignment if r in live_brokers),
    )
