"""Broker-side fencing: stale controller epochs, stale leader epochs, KIP-320."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.node.replication.fencing import (
    ControllerEpochFence,
    Role,
    check_current_leader_epoch,
    leader_and_isr_role,
)
from trafka.node.replication.ids import BrokerId, LeaderEpoch


def test_older_controller_epochs_are_rejected() -> None:
    fence = ControllerEpochFence()
    assert fence.admit(2) is ErrorCode.none
    assert fence.admit(1) is ErrorCode.stale_controller_epoch
    assert fence.admit(2) is ErrorCode.none
    assert fence.admit(3) is ErrorCode.none and fence.controller_epoch == 3


def test_leader_and_isr_roles() -> None:
    me = BrokerId(1)
    assert leader_and_isr_role(me, BrokerId(1), LeaderEpoch(0), None).role is Role.LEADER
    assert (
        leader_and_isr_role(me, BrokerId(2), LeaderEpoch(4), LeaderEpoch(3)).role is Role.FOLLOWER
    )
    stale = leader_and_isr_role(me, BrokerId(1), LeaderEpoch(3), LeaderEpoch(3))
    assert stale.role is Role.IGNORE and stale.error is ErrorCode.stale_controller_epoch


def test_current_leader_epoch_in_fetches() -> None:
    assert check_current_leader_epoch(LeaderEpoch(5), 5) is ErrorCode.none
    assert check_current_leader_epoch(LeaderEpoch(5), 4) is ErrorCode.fenced_leader_epoch
    assert check_current_leader_epoch(LeaderEpoch(5), 6) is ErrorCode.unknown_leader_epoch
    assert check_current_leader_epoch(LeaderEpoch(5), -1) is ErrorCode.none
