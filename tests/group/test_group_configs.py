"""Per-group dynamic configs (KIP-848 GROUP resources): validation with Kafka's messages and
bounds, and the coordinator applying them to a running group (time as an input)."""

from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode

from trafka.group.config import GroupConfig
from trafka.group.coordinator import GroupCoordinator
from trafka.group.group_configs import (
    GroupConfigError,
    GroupConfigOverrides,
    validate_group_configs,
)
from trafka.metadata_quorum import znodes
from trafka.node.config.broker import BrokerConfig, ConfigSource
from trafka.node.config.group import describe_group_entries, group_config_of

from .test_consumer_group import Cluster

SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"


def test_valid_overrides_are_parsed() -> None:
    overrides = validate_group_configs({SESSION: "50000", HEARTBEAT: "6000"}, GroupConfig())
    assert overrides == GroupConfigOverrides(50_000, 6_000)
    assert validate_group_configs({}, GroupConfig()).is_empty()


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"session.timeout.ms": "1"}, "Unknown group config name: session.timeout.ms"),
        ({"share.record.lock.duration.ms": "1000"}, "Unknown group config name: share."),
        ({SESSION: "abc"}, f"Invalid value abc for configuration {SESSION}: Not a number"),
        ({SESSION: "0"}, f"Invalid value 0 for configuration {SESSION}: Value must be at least 1"),
        ({SESSION: "99999999999"}, "Not a number of type INT"),
        (
            {SESSION: "44999"},
            f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {SESSION: "60001"},
            f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {HEARTBEAT: "4999"},
            f"{HEARTBEAT} must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {HEARTBEAT: "15001"},
            f"{HEARTBEAT} must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        ),
    ],
)
def test_invalid_overrides_get_kafkas_messages(properties: dict[str, str], message: str) -> None:
    with pytest.raises(GroupConfigError, match=message.replace(".", r"\.")):
        validate_group_configs(properties, GroupConfig())


def test_session_must_exceed_heartbeat_with_the_broker_values_for_absent_keys() -> None:
    config = GroupConfig(
        consumer_min_session_timeout_ms=1000,
        consumer_session_timeout_ms=6000,
        consumer_max_heartbeat_interval_ms=60_000,
    )
    with pytest.raises(GroupConfigError, match=f"{SESSION} must be greater than {HEARTBEAT}"):
        validate_group_configs({HEARTBEAT: "6000"}, config)
    with pytest.raises(GroupConfigError, match=f"{SESSION} must be greater than {HEARTBEAT}"):
        validate_group_configs({SESSION: "5000"}, config)
    assert validate_group_configs({SESSION: "7000", HEARTBEAT: "6000"}, config)


def test_stored_overrides_are_read_leniently() -> None:
    assert GroupConfigOverrides.from_properties({SESSION: "x", HEARTBEAT: "-3"}).is_empty()
    assert GroupConfigOverrides.from_properties({SESSION: "50000"}) == GroupConfigOverrides(50_000)


def test_broker_bounds_come_from_the_broker_config() -> None:
    config = group_config_of(
        BrokerConfig.build(1, {"group.consumer.max.session.timeout.ms": "90000"})
    )
    assert config.consumer_max_session_timeout_ms == 90_000
    assert validate_group_configs({SESSION: "90000"}, config)


def test_describe_entries_show_the_override_and_the_broker_synonym() -> None:
    broker = BrokerConfig.build(1)
    entries = {e[0]: e for e in describe_group_entries(broker, {SESSION: "50000"})}
    assert list(entries) == [HEARTBEAT, SESSION]
    _, value, source, synonyms, _, _ = entries[SESSION]
    assert (value, source) == ("50000", ConfigSource.DYNAMIC_GROUP_CONFIG)
    assert synonyms == (
        (SESSION, "50000", ConfigSource.DYNAMIC_GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", ConfigSource.DEFAULT_CONFIG),
    )
    _, value, source, synonyms, _, _ = entries[HEARTBEAT]
    assert (value, source) == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert int(ConfigSource.DYNAMIC_GROUP_CONFIG) == 8


def test_group_config_path_is_sanitized() -> None:
    assert znodes.group_config_path("a b/c*") == "/config/groups/a%20b%2Fc%2A"
    assert znodes.desanitize_entity_name("a%20b%2Fc%2A") == "a b/c*"


# --- the coordinator applies them to running groups -----------------------------------------


def test_heartbeat_interval_and_session_timeout_follow_the_group_config() -> None:
    cluster = Cluster()
    first = cluster.heartbeat("m1", 0)
    assert first.error is ErrorCode.none
    assert first.heartbeat_interval_ms == 5_000
    cluster.coordinator.set_group_config("g", GroupConfigOverrides(50_000, 7_000))
    second = cluster.heartbeat("m1", first.member_epoch)
    assert second.heartbeat_interval_ms == 7_000
    # the session was re-armed with 50 s: alive at 49 s, fenced at 50 s
    cluster.advance(49_000)
    assert cluster.heartbeat("m1", first.member_epoch).error is ErrorCode.none
    cluster.advance(50_000)
    assert cluster.heartbeat("m1", first.member_epoch).error is ErrorCode.unknown_member_id


def test_removing_the_override_restores_the_broker_values() -> None:
    cluster = Cluster()
    cluster.coordinator.set_group_config("g", GroupConfigOverrides(None, 9_000))
    joined = cluster.heartbeat("m1", 0)
    assert joined.heartbeat_interval_ms == 9_000
    assert cluster.heartbeat("m1", joined.member_epoch, group="g").heartbeat_interval_ms == 9_000
    cluster.coordinator.set_group_config("g", GroupConfigOverrides())
    assert cluster.heartbeat("m1", joined.member_epoch).heartbeat_interval_ms == 5_000
    # another group never saw the override
    assert cluster.heartbeat("m2", 0, group="h").heartbeat_interval_ms == 5_000


def test_a_reloaded_coordinator_restarts_sessions_with_the_group_timeout() -> None:
    cluster = Cluster()
    assert cluster.heartbeat("m1", 0).error is ErrorCode.none
    reloaded = GroupCoordinator.load(
        cluster.config,
        random.Random(3),
        cluster.log,
        cluster.now_ms,
        {"g": GroupConfigOverrides(58_000)},
    )
    assert reloaded.next_deadline_ms() == cluster.now_ms + 58_000
