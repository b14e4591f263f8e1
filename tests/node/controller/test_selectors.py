"""The leader selectors (CTL-17..20): each rule, each failure."""

from __future__ import annotations

from trafka.node.controller.selectors import (
    Election,
    ElectionFailure,
    ElectionFailureReason,
    controlled_shutdown_leader,
    new_partition_leader,
    no_op_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from trafka.node.replication.ids import BrokerId


def b(*ids: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(i) for i in ids)


def live(*ids: int) -> frozenset[BrokerId]:
    return frozenset(BrokerId(i) for i in ids)


def test_offline_prefers_first_live_isr_member_in_assignment_order() -> None:
    result = offline_partition_leader(
        b(1, 2, 3), isr=b(3, 2), live_brokers=live(2, 3), unclean_leader_election_enable=False
    )
    assert result == Election(leader=BrokerId(2), isr=b(3, 2), receivers=b(2, 3))


def test_offline_new_isr_is_the_live_isr_members() -> None:
    result = offline_partition_leader(
        b(1, 2, 3), isr=b(1, 2, 3), live_brokers=live(1, 3), unclean_leader_election_enable=False
    )
    assert result == Election(leader=BrokerId(1), isr=b(1, 3), receivers=b(1, 3))


def test_offline_without_live_isr_fails_when_unclean_disabled() -> None:
    result = offline_partition_leader(
        b(1, 2, 3), isr=b(1), live_brokers=live(2, 3), unclean_leader_election_enable=False
    )
    assert result == ElectionFailure(ElectionFailureReason.NO_LIVE_ISR_AND_UNCLEAN_DISABLED)


def test_offline_unclean_picks_first_live_replica_as_sole_isr() -> None:
    result = offline_partition_leader(
        b(1, 2, 3), isr=b(1), live_brokers=live(3, 2), unclean_leader_election_enable=True
    )
    assert result == Election(leader=BrokerId(2), isr=b(2), receivers=b(2, 3), unclean=True)


def test_offline_no_live_replica() -> None:
    result = offline_partition_leader(
        b(1, 2), isr=b(1, 2), live_brokers=live(5), unclean_leader_election_enable=True
    )
    assert result == ElectionFailure(ElectionFailureReason.NO_REPLICA_ONLINE)


def test_new_partition_first_live_replica_and_live_isr() -> None:
    assert new_partition_leader(b(1, 2, 3), live(2, 3)) == Election(
        leader=BrokerId(2), isr=b(2, 3), receivers=b(2, 3)
    )
    assert new_partition_leader(b(1), live(2)) == ElectionFailure(
        ElectionFailureReason.NO_REPLICA_ONLINE
    )


def test_reassigned_picks_first_live_target_in_isr() -> None:
    result = reassigned_partition_leader(
        b(4, 5, 6), isr=b(1, 2, 3, 5, 6), live_brokers=live(1, 2, 3, 5, 6)
    )
    assert result == Election(leader=BrokerId(5), isr=b(1, 2, 3, 5, 6), receivers=b(4, 5, 6))
    dead_target = reassigned_partition_leader(b(4, 5), isr=b(1, 4, 5), live_brokers=live(1))
    assert dead_target == ElectionFailure(ElectionFailureReason.NO_REASSIGNED_REPLICA_IN_ISR)


def test_preferred_replica() -> None:
    ok = preferred_replica_leader(b(1, 2, 3), BrokerId(2), isr=b(2, 1), live_brokers=live(1, 2))
    assert ok == Election(leader=BrokerId(1), isr=b(2, 1), receivers=b(1, 2))
    already = preferred_replica_leader(b(1, 2), BrokerId(1), isr=b(1, 2), live_brokers=live(1, 2))
    assert already == ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_ALREADY_LEADER)
    out_of_isr = preferred_replica_leader(b(1, 2), BrokerId(2), isr=b(2), live_brokers=live(1, 2))
    assert out_of_isr == ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_NOT_AVAILABLE)
    dead = preferred_replica_leader(b(1, 2), BrokerId(2), isr=b(1, 2), live_brokers=live(2))
    assert dead == ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_NOT_AVAILABLE)


def test_controlled_shutdown_moves_leader_off_the_stopping_broker() -> None:
    result = controlled_shutdown_leader(
        b(1, 2, 3), isr=b(1, 2, 3), live_or_shutting_down=live(1, 2, 3), shutting_down=live(1)
    )
    assert result == Election(leader=BrokerId(2), isr=b(2, 3), receivers=b(1, 2, 3))
    alone = controlled_shutdown_leader(
        b(1, 2), isr=b(1), live_or_shutting_down=live(1, 2), shutting_down=live(1)
    )
    assert alone == ElectionFailure(ElectionFailureReason.NO_LEADER_OUTSIDE_SHUTTING_DOWN)


def test_no_op_keeps_leader_and_isr() -> None:
    assert no_op_leader(b(1, 2, 3), BrokerId(2), b(2, 3), live(2, 3)) == Election(
        leader=BrokerId(2), isr=b(2, 3), receivers=b(2, 3)
    )


def test_every_failure_maps_to_an_elect_leaders_error() -> None:
    from kio.schema.errors import ErrorCode

    for reason in ElectionFailureReason:
        assert ElectionFailure(reason).error is not ErrorCode.none
    already = ElectionFailure(ElectionFailureReason.PREFERRED_REPLICA_ALREADY_LEADER)
    assert already.error is ErrorCode.election_not_needed
