"""A broker's fencing decisions: stale controllers and stale leader epochs (EXT-06, KIP-320).

Pure decisions for the replica manager's LeaderAndIsr / StopReplica / UpdateMetadata and
Fetch / OffsetForLeaderEpoch handlers:

- a controller request whose controller epoch is older than the newest the broker has seen
  is rejected with STALE_CONTROLLER_EPOCH (ZK-10, KR-04); a newer one raises the mark;
- a LeaderAndIsr partition state whose leader epoch is not newer than the one the broker
  holds is ignored, answered per partition with STALE_CONTROLLER_EPOCH (Kafka's ZK-era
  `becomeLeaderOrFollower`); otherwise it says become leader or become follower;
- a Fetch / OffsetForLeaderEpoch carrying `current_leader_epoch` older than the leader's is
  FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH (the leader has not heard yet), -1 skips
  the check (old clients).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from trafka.node.replication.ids import (
    INITIAL_CONTROLLER_EPOCH,
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
)


@dataclass(slots=True)
class ControllerEpochFence:
    """The newest controller epoch this broker has accepted (in memory; reset on restart,
    as Kafka's `ReplicaManager.controllerEpoch`)."""

    controller_epoch: ControllerEpoch = INITIAL_CONTROLLER_EPOCH

    def admit(self, request_controller_epoch: int) -> ErrorCode:
        if request_controller_epoch < self.controller_epoch:
            return ErrorCode.stale_controller_epoch
        self.controller_epoch = ControllerEpoch(request_controller_epoch)
        return ErrorCode.none


class Role(enum.Enum):
    LEADER = "become leader"
    FOLLOWER = "become follower"
    IGNORE = "ignore (not newer)"


@dataclass(frozen=True, slots=True)
class RoleDecision:
    role: Role
    error: ErrorCode


def leader_and_isr_role(
    local_broker: BrokerId,
    state_leader: BrokerId,
    state_leader_epoch: LeaderEpoch,
    current_leader_epoch: LeaderEpoch | None,
) -> RoleDecision:
    """What one LeaderAndIsr partition state asks of this broker."""
    if current_leader_epoch is not None and state_leader_epoch <= current_leader_epoch:
        return RoleDecision(Role.IGNORE, ErrorCode.stale_controller_epoch)
    role = Role.LEADER if state_leader == local_broker else Role.FOLLOWER
    return RoleDecision(role, ErrorCode.none)


def check_current_leader_epoch(
    leader_epoch: LeaderEpoch, request_current_leader_epoch: int
) -> ErrorCode:
    """KIP-320 fencing of Fetch and OffsetForLeaderEpoch on the leader."""
    if request_current_leader_epoch < 0:
        return ErrorCode.none
    if request_current_leader_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if request_current_leader_epoch > leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.none
