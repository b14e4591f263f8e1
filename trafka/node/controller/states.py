"""The controller's partition and replica state machines as data (CTL-13..16, CTL-22..23).

The states, their legal previous states and one `transition_to()` that asserts the edge
(STYLE 4, after Kafka's `ClassicGroupState.java` and h11's `_state.py`). The *actions* of a
transition (znode writes, LeaderAndIsr, StopReplica ...) are performed by
`trafka.node.controller.machine`; this module only says which edges exist.

Partition edges are exactly the seeds' table CTL-14. Replica edges are the seeds' table
CTL-23 (000's seven states, D7) plus two of Kafka's edges that the seeds' "deletion failed;
wait for a controller retry" needs but does not spell out [EXT]:

- ReplicaDeletionIneligible -> OfflineReplica: the retry (Kafka's
  `TopicDeletionManager.markTopicForDeletionRetry`), after which the replica goes
  Offline -> ReplicaDeletionStarted again;
- ReplicaDeletionIneligible -> OnlineReplica: the replica's broker came back (CTL-41 step 2
  moves every replica on a new broker to OnlineReplica).

Same-state moves other than Online -> Online (a legal "resend the state" edge, CTL-14 and
CTL-23) are not edges; the machine skips them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar


class PartitionState(enum.Enum):
    """State of one partition in the controller (CTL-13).

    NON_EXISTENT: never created, or created and then deleted.
        -> NEW when the topic (or the added partition) appears in `/brokers/topics/<t>`:
           the controller takes the assignment from its context.
    NEW: replicas assigned, no leader and no ISR yet.
        -> ONLINE: the first live replica becomes leader, the live replicas become the ISR
           (D17), the state is *created* at `.../partitions/<p>/state`, LeaderAndIsr goes to
           every replica and UpdateMetadata to every live broker.
        -> OFFLINE: mark only.
    ONLINE: a leader is elected; the normal working state.
        -> ONLINE: a leader selector (CTL-17..20) chooses leader, ISR and receivers; the
           state is written conditionally on its version (CTL-42 step 3.3); LeaderAndIsr to
           the receivers, UpdateMetadata to every live broker.
        -> OFFLINE: mark only (the leader's broker died, or the topic is being deleted).
    OFFLINE: a leader was elected once but its broker is gone.
        -> ONLINE: as ONLINE -> ONLINE, with the OfflinePartition selector.
        -> NON_EXISTENT: mark only (topic deletion finished).
    """

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(enum.Enum):
    """State of one replica (a partition on one broker) in the controller (CTL-22).

    NON_EXISTENT: not created yet, or deleted (the final state).
        -> NEW: LeaderAndIsr with the current leader and ISR to the new replica and
           UpdateMetadata for the partition to every live broker.
    NEW: created by topic creation or reassignment; can only become a follower.
        -> ONLINE: add it to the assigned replicas (in the context).
        -> OFFLINE: as ONLINE -> OFFLINE.
    ONLINE: started and in the assigned list; may be leader or follower.
        -> ONLINE: resend LeaderAndIsr (current leader and ISR) and UpdateMetadata.
        -> OFFLINE: StopReplica (no delete) to the replica; remove it from the ISR with a
           conditional write; LeaderAndIsr (new ISR) to the leader; UpdateMetadata.
    OFFLINE: its broker died or is shutting down.
        -> ONLINE: as ONLINE -> ONLINE (the broker came back).
        -> REPLICA_DELETION_STARTED: StopReplica (delete) to the replica's broker.
        -> NON_EXISTENT: 004's four-state shortcut (StopReplica with delete).
    REPLICA_DELETION_STARTED: deletion sent, waiting for the broker's answer.
        -> REPLICA_DELETION_SUCCESSFUL: the broker answered the StopReplica(delete).
        -> REPLICA_DELETION_INELIGIBLE: it answered with an error, or its broker died.
    REPLICA_DELETION_SUCCESSFUL: deleted on the broker.
        -> NON_EXISTENT: automatic; the context drops the replica.
    REPLICA_DELETION_INELIGIBLE: deletion failed; the controller retries later.
        -> OFFLINE: the retry [EXT, Kafka's markTopicForDeletionRetry].
        -> ONLINE: the replica's broker came back [EXT, Kafka's valid previous state].
    """

    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    REPLICA_DELETION_STARTED = "ReplicaDeletionStarted"
    REPLICA_DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    REPLICA_DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


P = PartitionState
R = ReplicaState

PARTITION_VALID_PREVIOUS_STATES: Mapping[PartitionState, frozenset[PartitionState]] = {
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE}),
}
"""CTL-14: the target state -> the states it may be entered from. All else is illegal."""

REPLICA_VALID_PREVIOUS_STATES: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.REPLICA_DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.REPLICA_DELETION_INELIGIBLE}),
    R.REPLICA_DELETION_STARTED: frozenset({R.OFFLINE}),
    R.REPLICA_DELETION_SUCCESSFUL: frozenset({R.REPLICA_DELETION_STARTED}),
    R.REPLICA_DELETION_INELIGIBLE: frozenset({R.REPLICA_DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.REPLICA_DELETION_SUCCESSFUL, R.OFFLINE}),
}
"""CTL-23 (+ the two [EXT] edges in the module docstring): target -> legal previous states."""

VALID_PREVIOUS_STATES: Mapping[enum.Enum, frozenset[enum.Enum]] = {
    **{
        target: frozenset[enum.Enum](previous)
        for target, previous in PARTITION_VALID_PREVIOUS_STATES.items()
    },
    **{
        target: frozenset[enum.Enum](previous)
        for target, previous in REPLICA_VALID_PREVIOUS_STATES.items()
    },
}
"""Both machines' edges in one mapping (the two enums never share a member)."""


class IllegalStateTransition(AssertionError):
    """A state machine was asked to take an edge the seeds do not allow."""


S = TypeVar("S", PartitionState, ReplicaState)


def is_legal(current: S, target: S) -> bool:
    """Whether `current -> target` is an edge of its state machine."""
    return current in VALID_PREVIOUS_STATES[target]


def transition_to(current: S, target: S) -> S:
    """Return `target` if `current -> target` is legal; raise `IllegalStateTransition`.

    An illegal edge is a bug in the controller, never a consequence of bad input, hence an
    AssertionError subclass (STYLE 10).
    """
    if not is_legal(current, target):
        raise IllegalStateTransition(f"illegal transition {current.value} -> {target.value}")
    return target
