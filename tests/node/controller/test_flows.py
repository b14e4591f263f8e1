"""Controller flows driven through the quorum's real tree (CTL-25, 29, 33, 36-38, 41-44)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.node.controller import harness
from tests.node.controller.harness import (
    Driver,
    create_topic,
    leader_changes_isr,
    new_tree,
    register,
    request_deletion,
    unregister,
    write_plan,
    write_preferred,
)
from trafka.node.controller.effects import (
    CheckVersion,
    LeaderAndIsrRequest,
    SetNode,
    StopReplicaRequest,
    TimerKind,
    UpdateMetadataRequest,
)
from trafka.node.controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    CancelReassignment,
    ControlledShutdown,
    PartitionReassignment,
    PreferredReplicaElection,
    StopReplicaResponse,
    TopicChange,
    TopicDeletion,
    UncleanLeaderElection,
)
from trafka.node.controller.machine import ControllerConfig
from trafka.node.controller.payloads import (
    CONTROLLER_EPOCH_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    delete_topic_path,
    partition_state_path,
    topic_path,
)
from trafka.node.controller.selectors import ElectionFailureReason
from trafka.node.controller.states import PartitionState, ReplicaState
from trafka.node.replication.ids import NO_LEADER, BrokerId, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.fixture(autouse=True, params=[harness.RealTree], ids=["real"])
def tree_class(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every flow runs on the quorum's real ZNodeTree behind LocalTransport."""
    monkeypatch.setattr(harness, "TREE_CLASS", request.param)


def ids(*brokers: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(b) for b in brokers)


def started(
    brokers: tuple[int, ...], topic: dict[int, tuple[int, ...]], **config: object
) -> Driver:
    tree = new_tree(*brokers)
    driver = Driver.elect(tree, brokers[0], ControllerConfig(**config))  # type: ignore[arg-type]
    create_topic(tree, "t", topic)
    driver.run(TopicChange(tree.topics()))
    return driver


def requests_of(step: object, kind: type) -> dict[int, list[object]]:
    out: dict[int, list[object]] = {}
    for send in step.requests:  # type: ignore[attr-defined]
        if isinstance(send.request, kind):
            out.setdefault(send.broker_id, []).append(send.request)
    return out


def test_failover_increments_epoch_and_fences_later_writes() -> None:
    tree = new_tree(1, 2, 3)
    driver = Driver.elect(tree, 1)
    assert tree.get(CONTROLLER_EPOCH_PATH).epoch == 1 and driver.controller.epoch == 1
    assert driver.steps[0].timers[0].kind is TimerKind.AUTO_LEADER_REBALANCE
    create_topic(tree, "t", {0: (1, 2, 3)})
    step = driver.run(TopicChange(tree.topics()))
    assert step.writes[0] == CheckVersion(CONTROLLER_EPOCH_PATH, 1)
    # A second controller takes over; the first one's next multi fails and it resigns.
    successor = Driver.elect(tree, 2)
    assert successor.controller.epoch == 2
    unregister(tree, 3)
    stale = driver.run(BrokerChange(tree.brokers()))
    assert stale.resigned and not driver.controller.is_active
    state = driver.state(T0)  # the stale controller's ISR shrink never landed
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch) == (
        1, 0, ids(1, 2, 3), 1,
    )  # fmt: skip


def test_topic_creation_through_the_state_machines() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3), 1: (2, 3, 1)})
    assert driver.state(T0).leader == 1 and driver.state(T0).isr == ids(1, 2, 3)
    assert driver.state(T1).leader == 2 and driver.state(T1).leader_epoch == 0
    step = driver.steps[-1]
    leader_and_isr = requests_of(step, LeaderAndIsrRequest)
    assert sorted(leader_and_isr) == [1, 2, 3]
    request = leader_and_isr[1][0]
    assert isinstance(request, LeaderAndIsrRequest) and request.controller_epoch == 1
    assert [s.tp for s in request.partition_states] == [T0, T1]  # batched per broker
    assert all(s.is_new for s in request.partition_states)
    assert sorted(requests_of(step, UpdateMetadataRequest)) == [1, 2, 3]
    context = driver.controller.context
    assert context is not None
    assert context.partition_state(T0) is PartitionState.ONLINE
    assert context.replica_state(T0, BrokerId(3)) is ReplicaState.ONLINE


def test_leader_failure_elects_from_isr_and_bumps_epoch() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    unregister(driver.tree, 1)
    step = driver.run(BrokerChange(driver.tree.brokers()))
    state = driver.state(T0)
    assert state.leader == 2 and state.isr == ids(2, 3) and state.leader_epoch == 1
    assert 1 not in requests_of(step, UpdateMetadataRequest)  # no channel to a dead broker
    assert sorted(requests_of(step, LeaderAndIsrRequest)) == [2, 3]


def test_no_live_isr_leaves_partition_offline_unless_unclean_enabled() -> None:
    for unclean in (False, True):
        driver = started((1, 2), {0: (1, 2)}, unclean_leader_election_enable=unclean)
        driver.run(leader_changes_isr(driver.tree, T0, (1,)))  # follower 2 fell behind
        unregister(driver.tree, 1)
        step = driver.run(BrokerChange(driver.tree.brokers()))
        state = driver.state(T0)
        context = driver.controller.context
        assert context is not None
        if unclean:
            assert state.leader == 2 and state.isr == ids(2)
            assert step.elections[0].unclean
        else:
            assert state.leader == NO_LEADER and state.isr == ids(1)  # last ISR member kept
            assert (
                T0,
                ElectionFailureReason.NO_LIVE_ISR_AND_UNCLEAN_DISABLED,
            ) in step.failed_elections
            assert context.partition_state(T0) is PartitionState.OFFLINE
            # The last ISR member comes back: a clean election.
            register(driver.tree, 1)
            driver.run(BrokerChange(driver.tree.brokers()))
            assert driver.state(T0).leader == 1


def test_reassignment_follows_the_seeds_table() -> None:
    driver = started((1, 2, 3, 4, 5, 6), {0: (1, 2, 3)})
    tree = driver.tree
    write_plan(tree, {T0: (4, 5, 6)})
    step = driver.run(PartitionReassignment(tree.reassignment()))
    # step 2 of the table: AR {1,2,3,4,5,6}, leader/ISR 1/{1,2,3}, epoch bumped.
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3, 4, 5, 6)
    assert tree.get(topic_path("t")).adding_replicas == {0: (4, 5, 6)}  # KIP-455 fields
    assert tree.get(topic_path("t")).removing_replicas == {0: (1, 2, 3)}
    assert driver.state(T0).leader == 1 and driver.state(T0).isr == ids(1, 2, 3)
    assert driver.state(T0).leader_epoch == 1
    assert sorted(requests_of(step, LeaderAndIsrRequest)) == [1, 2, 3, 4, 5, 6]
    # step 4: the leader adds the new replicas to the ISR as they catch up.
    driver.run(leader_changes_isr(tree, T0, (1, 2, 3, 4, 5)))
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3, 4, 5, 6)
    final = driver.run(leader_changes_isr(tree, T0, (1, 2, 3, 4, 5, 6)))
    # Within the completing multi: leader 4 first (step 7), ISR shrunk (step 8), AR last.
    states = [
        op.data
        for op in final.writes
        if isinstance(op, SetNode) and op.path == partition_state_path(T0)
    ]
    pairs = [(s.leader, s.isr) for s in states]  # type: ignore[union-attr]
    assert pairs[0] == (4, ids(1, 2, 3, 4, 5, 6))
    assert pairs[-1] == (4, ids(4, 5, 6))
    paths = [op.path for op in final.writes if isinstance(op, SetNode)]
    assert paths.index(topic_path("t")) > max(
        i for i, p in enumerate(paths) if p == partition_state_path(T0)
    )
    assert tree.get(topic_path("t")).partitions[0] == ids(4, 5, 6)
    assert tree.get(topic_path("t")).adding_replicas == {}
    assert driver.state(T0).leader == 4 and driver.state(T0).isr == ids(4, 5, 6)
    assert not tree.exists(REASSIGN_PARTITIONS_PATH)
    stops = requests_of(final, StopReplicaRequest)
    assert sorted(stops) == [1, 2, 3]
    assert any(r.delete_partitions for r in stops[1])  # type: ignore[attr-defined]


def test_failover_resumes_a_half_done_reassignment_from_the_tree() -> None:
    driver = started((1, 2, 3, 4, 5, 6), {0: (1, 2, 3)})
    tree = driver.tree
    write_plan(tree, {T0: (4, 5, 6)})
    driver.run(PartitionReassignment(tree.reassignment()))
    # The controller dies after phase A; broker 2 wins /controller.
    unregister(tree, 1)
    successor = Driver.elect(tree, 2)
    assert successor.controller.epoch == 2
    context = successor.controller.context
    assert context is not None and T0 in context.partitions_being_reassigned
    assert driver.state(T0).leader == 2  # broker 1 was dead at failover: OfflinePartition selector
    successor.run(leader_changes_isr(tree, T0, (2, 3, 4, 5, 6)))
    assert tree.get(topic_path("t")).partitions[0] == ids(4, 5, 6)
    assert driver.state(T0).leader == 4 and driver.state(T0).isr == ids(4, 5, 6)
    assert not tree.exists(REASSIGN_PARTITIONS_PATH)


def test_a_pure_addition_records_adding_replicas_and_waits_for_the_isr() -> None:
    driver = started((1, 2, 3), {0: (1, 2)})
    tree = driver.tree
    write_plan(tree, {T0: (1, 2, 3)})
    driver.run(PartitionReassignment(tree.reassignment()))
    # AR == RAR after step 1, but broker 3 has not caught up: still in progress.
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3)
    assert tree.get(topic_path("t")).adding_replicas == {0: (3,)}
    assert tree.get(topic_path("t")).removing_replicas == {}
    assert tree.exists(REASSIGN_PARTITIONS_PATH)
    # A failover in between recovers OAR {1,2} from the adding replicas.
    successor = Driver.elect(tree, 2)
    context = successor.controller.context
    assert context is not None
    assert context.partitions_being_reassigned[T0].original_replicas == ids(1, 2)
    successor.run(leader_changes_isr(tree, T0, (1, 2, 3)))
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3)
    assert tree.get(topic_path("t")).adding_replicas == {}
    assert not tree.exists(REASSIGN_PARTITIONS_PATH)


def test_a_plan_naming_the_current_replicas_completes_at_once() -> None:
    driver = started((1, 2, 3), {0: (1, 2)})
    tree = driver.tree
    write_plan(tree, {T0: (1, 2)})
    driver.run(PartitionReassignment(tree.reassignment()))
    assert not tree.exists(REASSIGN_PARTITIONS_PATH)
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2)


def test_deletion_waits_for_a_dead_broker_and_completes_when_it_returns() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    tree = driver.tree
    unregister(tree, 3)
    driver.run(BrokerChange(tree.brokers()))
    request_deletion(tree, "t")
    step = driver.run(TopicDeletion(("t",)))
    stops = requests_of(step, StopReplicaRequest)
    assert sorted(stops) == [1, 2] and any(r.delete_partitions for r in stops[1])  # type: ignore[attr-defined]
    metadata = requests_of(step, UpdateMetadataRequest)[1][0]
    assert metadata.partition_states[0].leader == -2  # type: ignore[attr-defined]
    for broker in (1, 2):
        driver.run(StopReplicaResponse(BrokerId(broker), {T0: ErrorCode.none}))
    context = driver.controller.context
    assert context is not None and "t" in context.topics_ineligible_for_deletion
    assert tree.exists(topic_path("t")) and tree.exists(delete_topic_path("t"))
    register(tree, 3)
    back = driver.run(BrokerChange(tree.brokers()))
    assert any(r.delete_partitions for r in requests_of(back, StopReplicaRequest)[3])  # type: ignore[attr-defined]
    driver.run(StopReplicaResponse(BrokerId(3), {T0: ErrorCode.none}))
    assert not tree.exists(topic_path("t")) and not tree.exists(delete_topic_path("t"))
    assert "t" not in context.topics


def test_deletion_is_ineligible_while_reassigning() -> None:
    driver = started((1, 2, 3, 4), {0: (1, 2)})
    tree = driver.tree
    write_plan(tree, {T0: (3, 4)})
    driver.run(PartitionReassignment(tree.reassignment()))
    request_deletion(tree, "t")
    step = driver.run(TopicDeletion(("t",)))
    assert not requests_of(step, StopReplicaRequest)
    driver.run(leader_changes_isr(tree, T0, (1, 2, 3, 4)))  # reassignment completes...
    context = driver.controller.context
    assert context is not None
    assert context.replica_state(T0, BrokerId(3)) is ReplicaState.REPLICA_DELETION_STARTED


def test_failed_replica_deletion_is_retried() -> None:
    driver = started((1, 2), {0: (1, 2)})
    request_deletion(driver.tree, "t")
    driver.run(TopicDeletion(("t",)))
    driver.run(StopReplicaResponse(BrokerId(1), {T0: ErrorCode.none}))
    retry = driver.run(StopReplicaResponse(BrokerId(2), {T0: ErrorCode.kafka_storage_error}))
    assert list(requests_of(retry, StopReplicaRequest)) == [2]
    driver.run(StopReplicaResponse(BrokerId(2), {T0: ErrorCode.none}))
    assert not driver.tree.exists(topic_path("t"))


def test_preferred_election_from_the_admin_path() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    tree = driver.tree
    unregister(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    register(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    assert driver.state(T0).leader == 2
    driver.run(leader_changes_isr(tree, T0, (2, 3, 1)))  # broker 1 caught up
    write_preferred(tree, (T0,))
    driver.run(PreferredReplicaElection((T0,)))
    assert driver.state(T0).leader == 1
    assert not tree.exists(PREFERRED_REPLICA_ELECTION_PATH)
    again = driver.run(PreferredReplicaElection((T0,), from_admin_path=False))
    assert again.failed_elections == ((T0, ElectionFailureReason.PREFERRED_REPLICA_ALREADY_LEADER),)


def test_auto_rebalance_respects_the_imbalance_percentage() -> None:
    driver = started((1, 2), {p: (1, 2) if p % 2 == 0 else (2, 1) for p in range(10)})
    tree = driver.tree
    unregister(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    register(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    for p in range(0, 10, 2):
        driver.run(leader_changes_isr(tree, TopicPartition("t", p), (2, 1)))
    # Broker 1 is preferred for 5 partitions and leads none: 100% > 10%.
    step = driver.run(AutoPreferredReplicaLeaderElection(now_ms=300_000))
    assert sorted(e.tp.partition for e in step.elections) == [0, 2, 4, 6, 8]
    assert step.timers[0].at_ms == 600_000
    quiet = ControllerConfig(leader_imbalance_per_broker_percentage=100)
    calm = started((1, 2), {0: (1, 2)}, leader_imbalance_per_broker_percentage=100)
    assert calm.controller.config == quiet
    unregister(calm.tree, 1)
    calm.run(BrokerChange(calm.tree.brokers()))
    register(calm.tree, 1)
    calm.run(BrokerChange(calm.tree.brokers()))
    assert not calm.run(AutoPreferredReplicaLeaderElection(now_ms=1)).elections


def test_controlled_shutdown_moves_leaders_first() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3), 1: (2, 1, 3)})
    tree = driver.tree
    info = tree.brokers()[0]
    step = driver.run(ControlledShutdown(BrokerId(1), info.broker_epoch))
    assert step.answers[0].error is ErrorCode.none and step.answers[0].partitions_remaining == ()
    assert driver.state(T0).leader == 2 and driver.state(T0).isr == ids(2, 3)
    assert driver.state(T1).leader == 2 and driver.state(T1).isr == ids(2, 3)
    stops = requests_of(step, StopReplicaRequest)[1]
    assert [(r.delete_partitions, r.partitions) for r in stops] == [(False, (T1,))]  # type: ignore[attr-defined]
    # Then the broker goes away: nothing left to elect.
    unregister(tree, 1)
    after = driver.run(BrokerChange(tree.brokers()))
    assert not after.elections
    stale = driver.run(ControlledShutdown(BrokerId(2), tree.brokers()[0].broker_epoch - 1))
    assert stale.answers[0].error is ErrorCode.stale_broker_epoch


def test_conflicting_isr_write_makes_the_controller_reload_and_retry() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    tree = driver.tree
    leader_changes_isr(tree, T0, (1, 2))  # written, but the notification is not delivered yet
    unregister(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    assert driver.failed_multis == 1
    state = driver.state(T0)
    assert state.leader == 2 and state.isr == ids(2)  # from the fresh ISR {1,2}, not {1,2,3}


def test_partition_modifications_create_new_partitions() -> None:
    from trafka.node.controller.events import PartitionModifications

    driver = started((1, 2), {0: (1, 2)})
    tree = driver.tree
    data = tree.get(topic_path("t"))
    from trafka.metadata_quorum import znodes

    tree.set(topic_path("t"), znodes.TopicAssignment({**data.partitions, 1: (2, 1)}), -1)
    versioned = tree.topics()["t"]
    driver.run(PartitionModifications("t", versioned))
    assert driver.state(T1).leader == 2


def test_no_invalid_transitions_in_these_flows() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    unregister(driver.tree, 2)
    driver.run(BrokerChange(driver.tree.brokers()))
    register(driver.tree, 2)
    driver.run(BrokerChange(driver.tree.brokers()))
    assert list(driver.controller.invalid_transitions) == []


def test_bounced_broker_is_failed_then_started_and_ends_with_leader_and_isr() -> None:
    # Found by the simulation: a broker re-registered (new epoch) must not be left with a
    # StopReplica that arrives after its LeaderAndIsr.
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    tree = driver.tree
    unregister(tree, 2)
    register(tree, 2)  # same id, new broker epoch, in one BrokerChange
    step = driver.run(BrokerChange(tree.brokers()))
    assert 2 in requests_of(step, LeaderAndIsrRequest)
    assert 2 not in requests_of(step, StopReplicaRequest)
    assert driver.state(T0).isr == ids(1, 3)  # it left the ISR; the leader re-adds it


def test_cancel_reverts_to_the_original_replicas() -> None:
    for failover_first in (False, True):
        driver = started((1, 2, 3, 4, 5, 6), {0: (1, 2, 3)})
        tree = driver.tree
        write_plan(tree, {T0: (4, 5, 6)})
        driver.run(PartitionReassignment(tree.reassignment()))
        driver.run(leader_changes_isr(tree, T0, (1, 2, 3, 4)))  # 4 caught up, 5 and 6 not
        if failover_first:  # OAR must come back from the tree's adding_replicas
            driver = Driver.elect(tree, 2)
        step = driver.run(CancelReassignment((T0,)))
        assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3)
        assert tree.get(topic_path("t")).adding_replicas == {}
        assert driver.state(T0).leader == 1 and driver.state(T0).isr == ids(1, 2, 3)
        assert not tree.exists(REASSIGN_PARTITIONS_PATH)
        deleted = {
            broker
            for broker, requests in requests_of(step, StopReplicaRequest).items()
            if any(r.delete_partitions for r in requests)  # type: ignore[attr-defined]
        }
        assert deleted == {4, 5, 6}


def test_unclean_election_on_request_only_for_leaderless_partitions() -> None:
    driver = started((1, 2), {0: (1, 2), 1: (2, 1)})
    tree = driver.tree
    driver.run(leader_changes_isr(tree, T0, (1,)))
    unregister(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    assert driver.state(T0).leader == NO_LEADER
    step = driver.run(UncleanLeaderElection((T0, T1)))
    assert driver.state(T0).leader == 2 and driver.state(T0).isr == ids(2)
    assert [(e.tp, e.unclean) for e in step.elections] == [(T0, True)]
    assert step.failed_elections == ((T1, ElectionFailureReason.ELECTION_NOT_NEEDED),)


def test_a_deposed_controller_sends_nothing_even_without_writes() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3)})
    tree = driver.tree
    Driver.elect(tree, 2)  # epoch 2 elsewhere; broker 1 did not notice yet
    register(tree, 4)
    step = driver.run(BrokerChange(tree.brokers()))  # would be UpdateMetadata only
    assert step.resigned and step.requests == ()
    assert driver.failed_multis == 1


def test_reassignment_removes_a_dead_old_replica_from_the_isr() -> None:
    # Found by the simulation: a removed replica already Offline (its broker died before a
    # controller failover) must still leave the ISR at step 8.
    driver = started((1, 2, 3, 4), {0: (1, 2, 3)})
    tree = driver.tree
    write_plan(tree, {T0: (1, 2, 4)})
    driver.run(PartitionReassignment(tree.reassignment()))
    unregister(tree, 3)
    successor = Driver.elect(tree, 2)  # broker 3 dead at failover: still in the ISR
    assert 3 in successor.state(T0).isr
    successor.run(leader_changes_isr(tree, T0, (*successor.state(T0).isr, 4)))
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 4)
    assert successor.state(T0).isr == ids(1, 2, 4)


def test_controlled_shutdown_survives_a_conflicting_write() -> None:
    driver = started((1, 2, 3), {0: (1, 2, 3), 1: (2, 1, 3)})
    tree = driver.tree
    leader_changes_isr(tree, T1, (2, 1))  # a leader's ISR write the controller has not seen
    step = driver.run(ControlledShutdown(BrokerId(1), tree.brokers()[0].broker_epoch))
    assert driver.failed_multis == 1  # reloaded from the tree and redone
    assert step.answers and step.answers[0].partitions_remaining == ()
    assert driver.state(T0).leader == 2 and 1 not in driver.state(T0).isr
    assert driver.state(T1).isr == ids(2)
    # While it is shutting down, no election hands broker 1 a partition back.
    unregister(tree, 3)
    driver.run(BrokerChange(tree.brokers()))
    assert driver.state(T0).leader == 2 and driver.state(T1).leader == 2


def test_resigned_controller_ignores_events() -> None:
    from trafka.node.controller.events import ControllerResign

    driver = started((1, 2), {0: (1, 2)})
    assert driver.run(ControllerResign()).resigned
    unregister(driver.tree, 1)
    assert driver.run(BrokerChange(driver.tree.brokers())) == driver.steps[-1]
    assert driver.steps[-1].writes == () and driver.steps[-1].requests == ()
    assert driver.state(T0).leader == 1  # nobody acted


def test_delete_topic_disabled_only_clears_the_request() -> None:
    driver = started((1, 2), {0: (1, 2)}, delete_topic_enable=False)
    request_deletion(driver.tree, "t")
    step = driver.run(TopicDeletion(("t",)))
    assert not driver.tree.exists(delete_topic_path("t"))
    assert driver.tree.exists(topic_path("t")) and not requests_of(step, StopReplicaRequest)


def test_deleting_an_unknown_topic_just_removes_the_request() -> None:
    driver = started((1, 2), {0: (1, 2)})
    request_deletion(driver.tree, "nope")
    driver.run(TopicDeletion(("nope",)))
    assert not driver.tree.exists(delete_topic_path("nope"))  # CTL-28 4.1


def test_a_changed_target_keeps_the_original_replicas_for_cancel() -> None:
    driver = started((1, 2, 3, 4, 5), {0: (1, 2)})
    tree = driver.tree
    write_plan(tree, {T0: (3, 4)})
    driver.run(PartitionReassignment(tree.reassignment()))
    write_plan(tree, {T0: (3, 5)})  # the operator changes the target mid-way
    driver.run(PartitionReassignment(tree.reassignment()))
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2, 3, 4, 5)
    driver.run(CancelReassignment((T0,)))
    assert tree.get(topic_path("t")).partitions[0] == ids(1, 2)
    assert driver.state(T0).isr == ids(1, 2)


def test_the_first_controller_of_a_fresh_cluster_creates_the_epoch() -> None:
    tree = new_tree(1, 2, with_epoch=False)
    driver = Driver.elect(tree, 1)
    assert tree.get(CONTROLLER_EPOCH_PATH).epoch == 1 and driver.controller.epoch == 1
    create_topic(tree, "t", {0: (1, 2)})
    step = driver.run(TopicChange(tree.topics()))
    assert step.writes[0] == CheckVersion(CONTROLLER_EPOCH_PATH, 0)
    assert driver.state(T0).controller_epoch == 1
    assert Driver.elect(tree, 2).controller.epoch == 2


def test_elections_for_unknown_partitions_report_unknown_topic_or_partition() -> None:
    driver = started((1, 2), {0: (1, 2)})
    missing = TopicPartition("nope", 0)
    preferred = driver.run(PreferredReplicaElection((missing,), from_admin_path=False))
    assert preferred.failed_elections == ((missing, ElectionFailureReason.UNKNOWN_PARTITION),)
    unclean = driver.run(UncleanLeaderElection((missing,)))
    assert unclean.failed_elections == ((missing, ElectionFailureReason.UNKNOWN_PARTITION),)
