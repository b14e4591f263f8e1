"""The classic group state machine (GRP-12, GRP-13; apache/kafka `ClassicGroupState.java`)."""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """States of a classic (JoinGroup/SyncGroup) group.

    EMPTY: no members; offsets may exist. A group starts here (first JoinGroup or a simple
        OffsetCommit). OffsetCommit from "simple" consumers (generation -1) and OffsetFetch
        are served; JoinGroup moves to PREPARING_REBALANCE; offset expiry with no offsets
        left, or DeleteGroups, moves to DEAD.
    PREPARING_REBALANCE: members are (re)joining; JoinGroup requests are parked until every
        known member has rejoined or the rebalance timeout (or the initial delay,
        `group.initial.rebalance.delay.ms`, for a group that was empty) passes. Heartbeats
        answer REBALANCE_IN_PROGRESS; OffsetCommit of the current generation is accepted.
        Moves to COMPLETING_REBALANCE (members left) or EMPTY (nobody rejoined).
    COMPLETING_REBALANCE (the seeds' "AwaitingSync"): the join finished and the leader is
        computing the assignment; followers' SyncGroups are parked. OffsetCommit answers
        REBALANCE_IN_PROGRESS. The leader's SyncGroup moves to STABLE; a member leaving,
        expiring or joining with new metadata moves back to PREPARING_REBALANCE.
    STABLE: the generation's assignment is distributed; heartbeats, commits and fetches are
        answered normally. A new member, the leader rejoining, changed metadata, a leave or
        an expiry moves to PREPARING_REBALANCE.
    DEAD: no members and no metadata: the group was deleted or its offsets all expired, or
        the coordinator unloaded it. Requests get COORDINATOR_NOT_AVAILABLE (so clients
        look the coordinator up again) and the group object is dropped.
    """

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def kafka_name(self) -> str:
        """The name DescribeGroups/ListGroups report (Kafka's `toString`)."""
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


def check_transition(current: GroupState, target: GroupState) -> None:
    """Raise AssertionError unless `current -> target` is a legal edge."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise AssertionError(f"illegal group state transition {current.value} -> {target.value}")


def parse_state_filter(name: str) -> GroupState | None:
    """ListGroups v4 `states_filter` entries match case-insensitively (KIP-518)."""
    for state in GroupState:
        if state.value.lower() == name.lower():
            return state
    return None
