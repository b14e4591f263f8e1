"""`unclean.leader.election.enable` as Kafka's controller applies it: per topic (the
`/config/topics/<t>` override, else the broker default), read from the tree at failover, and
changed at run time (`TopicConfigChange`, `UncleanLeaderElectionDefault`), which retries the
leaderless partitions it concerns (Kafka's onTopicUncleanLeaderElectionEnable /
onUncleanLeaderElectionEnable). ElectLeaders UNCLEAN ignores the config."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.node.controller import harness
from tests.node.controller.harness import (
    Driver,
    create_topic,
    leader_changes_isr,
    new_tree,
    request_deletion,
    set_topic_config,
    unregister,
)
from trafka.node.controller.events import (
    BrokerChange,
    StopReplicaResponse,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElection,
    UncleanLeaderElectionDefault,
)
from trafka.node.controller.machine import ControllerConfig
from trafka.node.controller.payloads import partition_state_path, unclean_override
from trafka.node.controller.selectors import ElectionFailureReason
from trafka.node.controller.states import PartitionState
from trafka.node.replication.ids import NO_LEADER, BrokerId, TopicPartition

T0 = TopicPartition("t", 0)
U0 = TopicPartition("u", 0)
ON = {"unclean.leader.election.enable": "true"}
OFF = {"unclean.leader.election.enable": "false"}
NO_LIVE_ISR = ElectionFailureReason.NO_LIVE_ISR_AND_UNCLEAN_DISABLED


@pytest.fixture(autouse=True, params=[harness.RealTree], ids=["real"])
def tree_class(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "TREE_CLASS", request.param)


def ids(*brokers: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(b) for b in brokers)


def leaderless(
    *,
    default: bool = False,
    configs: dict[str, dict[str, str]] | None = None,
    controller: int = 3,
) -> Driver:
    """Topics t and u on {1,2} (controller 3): follower 2 fell out of both ISRs, then
    leader 1 died. `configs` are written with the topics, as a CreateTopics does."""
    tree = new_tree(3, 1, 2)
    driver = Driver.elect(
        tree, controller, ControllerConfig(unclean_leader_election_enable=default)
    )
    for topic in ("t", "u"):
        if topic in (configs or {}):
            set_topic_config(tree, topic, (configs or {})[topic])
        create_topic(tree, topic, {0: (1, 2)})
    driver.run(TopicChange(tree.topics()))
    for topic, config in sorted((configs or {}).items()):  # as the shell reads a new topic
        driver.run(TopicConfigChange(topic, config))
    for tp in (T0, U0):
        driver.run(leader_changes_isr(tree, tp, (1,)))
    unregister(tree, 1)
    driver.run(BrokerChange(tree.brokers()))
    return driver


def offline(driver: Driver, tp: TopicPartition) -> bool:
    context = driver.controller.context
    assert context is not None
    state = driver.state(tp)
    return (
        context.partition_state(tp) is PartitionState.OFFLINE
        and state.leader == NO_LEADER
        and state.isr == ids(1)
    )


def test_the_topic_override_wins_over_the_broker_default() -> None:
    driver = leaderless(default=False, configs={"t": ON})
    assert driver.state(T0).leader == 2 and driver.state(T0).isr == ids(2)
    assert offline(driver, U0)

    driver = leaderless(default=True, configs={"u": OFF})
    assert driver.state(T0).leader == 2 and driver.state(T0).isr == ids(2)
    assert offline(driver, U0)


def test_enabling_the_topic_config_elects_its_leaderless_partitions_only() -> None:
    driver = leaderless()
    assert offline(driver, T0) and offline(driver, U0)
    set_topic_config(driver.tree, "t", ON)
    step = driver.run(TopicConfigChange("t", ON))
    assert [(e.tp, e.leader, e.unclean) for e in step.elections] == [(T0, 2, True)]
    assert driver.state(T0).leader == 2 and driver.state(T0).isr == ids(2)
    assert offline(driver, U0)  # another topic is not touched
    # Turning it off again changes the cache only; nothing to elect.
    step = driver.run(TopicConfigChange("t", OFF))
    assert step.elections == () and step.writes == ()


def test_a_config_change_that_keeps_it_disabled_elects_nothing() -> None:
    driver = leaderless()
    step = driver.run(TopicConfigChange("t", {"retention.ms": "1000", **OFF}))
    assert step.elections == () and step.writes == () and offline(driver, T0)
    step = driver.run(TopicConfigChange("t", {"retention.ms": "1000"}))
    assert step.elections == () and offline(driver, T0)


def test_enabling_the_broker_default_elects_topics_without_an_override_to_false() -> None:
    driver = leaderless(configs={"u": OFF})
    step = driver.run(UncleanLeaderElectionDefault(enabled=True))
    assert [(e.tp, e.unclean) for e in step.elections] == [(T0, True)]
    assert (U0, NO_LIVE_ISR) in step.failed_elections
    assert offline(driver, U0)
    assert driver.controller.config.unclean_leader_election_enable


def test_a_new_controller_reads_the_topic_configs_from_the_tree() -> None:
    driver = leaderless()
    set_topic_config(driver.tree, "t", ON)  # the notification never reached controller 3
    successor = Driver.elect(driver.tree, 2)
    assert successor.state(T0).leader == 2 and successor.state(T0).isr == ids(2)
    assert offline(successor, U0)


def test_a_failed_multi_reloads_the_configs_with_the_context() -> None:
    driver = leaderless()
    set_topic_config(driver.tree, "t", ON)
    # Someone else touched t-0's state since (the controller's version is stale): the step's
    # multi fails, the controller reloads from the tree and elects with the fresh configs.
    state = driver.tree.partition_state(T0)
    assert state is not None
    driver.tree.set(partition_state_path(T0), state.data, -1)
    driver.run(TopicConfigChange("t", ON))
    assert driver.failed_multis == 1
    assert driver.state(T0).leader == 2


def test_elect_leaders_unclean_ignores_a_topic_override_to_false() -> None:
    driver = leaderless(default=True, configs={"t": OFF})
    assert offline(driver, T0)
    step = driver.run(UncleanLeaderElection((T0,)))
    assert [(e.tp, e.unclean) for e in step.elections] == [(T0, True)]


def test_configs_of_unknown_or_deleted_topics_are_forgotten() -> None:
    tree = new_tree(1, 2)
    driver = Driver.elect(tree, 1)
    context = driver.controller.context
    assert context is not None
    assert driver.run(TopicConfigChange("v", ON)).writes == ()
    assert "v" not in context.topic_configs  # its TopicChange comes first
    create_topic(tree, "v", {0: (1, 2)})
    driver.run(TopicChange(tree.topics()))
    driver.run(TopicConfigChange("v", ON))
    assert context.topic_configs["v"] == ON
    request_deletion(tree, "v")
    driver.run(TopicDeletion(("v",)))
    for broker in (1, 2):
        driver.run(StopReplicaResponse(BrokerId(broker), {TopicPartition("v", 0): ErrorCode.none}))
    assert "v" not in context.topics and "v" not in context.topic_configs


def test_unclean_override_parses_as_kafka_parses_a_boolean() -> None:
    assert unclean_override({}) is None
    assert unclean_override({"unclean.leader.election.enable": " TRUE "}) is True
    assert unclean_override({"unclean.leader.election.enable": "False"}) is False
    assert unclean_override({"unclean.leader.election.enable": "yes"}) is None
