"""BrokerConfig: Kafka's names and defaults, layering, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.node.config.broker import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    parse_properties,
)


def test_embedded_defaults_for_a_single_node() -> None:
    config = BrokerConfig.build(3)
    assert [listener.uri() for listener in config.listeners] == ["PLAINTEXT://localhost:9092"]
    assert config.log_dirs == [Path("data") / "node-3"]
    assert [(v.node_id, v.host, v.port) for v in config.quorum_voters] == [(3, "localhost", 9093)]
    assert config.get_int("num.partitions") == 1
    assert config.get_int("message.max.bytes") == 1048588
    assert config.get_int("offsets.topic.num.partitions") == 50
    assert config.get_int("group.initial.rebalance.delay.ms") == 3000
    assert config.get_bool("auto.create.topics.enable") is True
    assert config.get_bool("unclean.leader.election.enable") is False
    assert config.log_retention_ms == 168 * 3600 * 1000


def test_properties_then_set_overrides_and_sources() -> None:
    properties = parse_properties(
        "# comment\nnum.partitions=4\nlog.retention.hours = 1\nlisteners: PLAINTEXT://127.0.0.1:1\n"
    )
    config = BrokerConfig.build(1, properties, ["num.partitions=6", "log.retention.ms=5000"])
    assert config.get_int("num.partitions") == 6
    assert config.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("num.io.threads") is ConfigSource.DEFAULT_CONFIG
    assert config.log_retention_ms == 5000  # ms wins over hours
    assert config.topic_defaults()["retention.ms"] == "5000"
    assert config.listeners[0].port == 1


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("no.such.key=1", "unknown configuration 'no.such.key'"),
        ("num.partitions=abc", "invalid value 'abc' for configuration num.partitions"),
        ("num.partitions=0", "value must be at least 1"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("listeners=PLAINTEXT:/x", "expected NAME://host:port"),
        (
            "controller.quorum.voters=2@localhost:9093",
            "If process.roles contains the 'controller' role, the node id 1 must be included "
            "in the set of voters controller.quorum.voters=2",
        ),
        ("process.roles=", "at least one role"),
        ("process.roles=broker,broker", "Duplicate role names found in `process.roles`"),
        ("process.roles=controller", "a controller-only node is not implemented"),
        ("process.roles=observer", "string must be one of: broker, controller"),
        ("novalue", "expected key=value"),
    ],
)
def test_bad_keys_and_values_give_one_line_errors(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.build(1, {}, [override])
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message


def test_missing_node_id_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"node\.id"):
        BrokerConfig.build(None)


def test_topic_synonyms_name_the_broker_key() -> None:
    config = BrokerConfig.build(1, {}, ["log.retention.hours=2"])
    assert config.topic_synonym("retention.ms") == (
        "log.retention.hours",
        "2",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    default = BrokerConfig.build(1).topic_synonym("max.message.bytes")
    assert default == ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG)


def test_broker_id_follows_node_id_and_may_not_disagree() -> None:
    config = BrokerConfig.build(node_id=3)
    assert config.get("broker.id") == 3
    assert BrokerConfig.build(properties={"broker.id": "4"}).node_id == 4
    with pytest.raises(ConfigError, match=r"broker\.id=5: it must equal node\.id=3"):
        BrokerConfig.build(node_id=3, overrides=["broker.id=5"])


def test_roles_against_the_voter_set_follow_kafkas_rules() -> None:
    voters = "controller.quorum.voters=1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"
    combined = BrokerConfig.build(2, {}, [voters])
    assert combined.process_roles == ["broker", "controller"]
    assert combined.is_controller and combined.is_quorum_voter
    broker_only = BrokerConfig.build(4, {}, [voters, "process.roles=broker"])
    assert not broker_only.is_controller and not broker_only.is_quorum_voter
    assert "4@" not in broker_only.quorum_properties()["controller.quorum.voters"]
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.build(3, {}, [voters, "process.roles=broker"])
    assert str(caught.value) == (
        "invalid configuration process.roles=broker: If process.roles contains just the "
        "'broker' role, the node id 3 must not be included in the set of voters "
        "controller.quorum.voters=1,2,3"
    )
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.build(4, {}, [voters, "process.roles=controller,broker"])
    assert "the node id 4 must be included in the set of voters" in str(caught.value)
    # Without voters the embedded default would make it its own one-voter quorum.
    with pytest.raises(ConfigError, match=r"a broker-only node needs controller\.quorum\.voters"):
        BrokerConfig.build(5, {}, ["process.roles=broker"])
    # The embedded single-node defaults stay a one-voter combined node.
    single = BrokerConfig.build(1, {}, [])
    assert single.is_controller and single.is_quorum_voter
    assert single.quorum_properties()["controller.quorum.voters"] == "1@localhost:9093"


def test_kip848_timeouts_within_their_bounds() -> None:
    config = BrokerConfig.build(1, {}, [])
    assert config.get_int("group.consumer.session.timeout.ms") == 45000
    assert config.get_int("group.consumer.heartbeat.interval.ms") == 5000
    assert config.get("group.consumer.assignors") == ["uniform", "range"]
    fast = BrokerConfig.build(
        1,
        {},
        [
            "group.consumer.heartbeat.interval.ms=1000",
            "group.consumer.min.heartbeat.interval.ms=1000",
        ],
    )
    assert fast.get_int("group.consumer.heartbeat.interval.ms") == 1000
    with pytest.raises(ConfigError, match=r"group\.consumer\.heartbeat\.interval\.ms=1000: must"):
        BrokerConfig.build(1, {}, ["group.consumer.heartbeat.interval.ms=1000"])
    with pytest.raises(ConfigError, match=r"group\.consumer\.session\.timeout\.ms=70000"):
        BrokerConfig.build(1, {}, ["group.consumer.session.timeout.ms=70000"])
    with pytest.raises(ConfigError, match=r"less than group\.consumer\.session\.timeout\.ms"):
        BrokerConfig.build(
            1,
            {},
            [
                "group.consumer.heartbeat.interval.ms=15000",
                "group.consumer.session.timeout.ms=45000",
                "group.consumer.min.session.timeout.ms=1000",
                "group.consumer.session.timeout.ms=10000",
            ],
        )
    with pytest.raises(ConfigError):
        BrokerConfig.build(1, {}, ["group.consumer.assignors=sticky"])
