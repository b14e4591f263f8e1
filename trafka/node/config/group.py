"""The GROUP config resource (type 32, KIP-848): how `trafka.group.group_configs` plugs into
the config APIs.

* Storage: `/config/groups/<sanitized group id>` as an `EntityConfig`
  (`{"version":1,"config":{"consumer.session.timeout.ms":"50000"}}`), the ZooKeeper-style
  place of the GROUP ConfigRecords Kafka's KRaft metadata log holds; removing every key
  deletes the node. A change is followed by the notification `groups/<sanitized id>` so
  every broker re-reads it (`trafka.node.config.changes`); the group coordinator of the
  group's `__consumer_offsets` partition applies it (`GroupService.apply_group_config`).
* DescribeConfigs: every group key; an override with source DYNAMIC_GROUP_CONFIG (8), else
  the broker key it overrides (`group.consumer.session.timeout.ms`, ...) with its value and
  source (STATIC_BROKER_CONFIG or DEFAULT_CONFIG), that key as a synonym (Kafka's
  `ConfigHelper.createGroupConfigEntry`).
"""

from __future__ import annotations

from collections.abc import Mapping

from trafka.group.config import GroupConfig
from trafka.group.group_configs import GROUP_CONFIG_KEYS
from trafka.node.config.broker import BrokerConfig, ConfigSource, ConfigType

GROUP_RESOURCE = 32


def group_config_of(config: BrokerConfig) -> GroupConfig:
    """The coordinator's settings (`trafka.group.config.GroupConfig`) from the broker config."""
    return GroupConfig(
        group_initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        group_min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        group_max_size=config.get_int("group.max.size"),
        offsets_retention_minutes=config.get_int("offsets.retention.minutes"),
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        offsets_topic_num_partitions=config.get_int("offsets.topic.num.partitions"),
        consumer_session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        consumer_min_session_timeout_ms=config.get_int("group.consumer.min.session.timeout.ms"),
        consumer_max_session_timeout_ms=config.get_int("group.consumer.max.session.timeout.ms"),
        consumer_min_heartbeat_interval_ms=config.get_int(
            "group.consumer.min.heartbeat.interval.ms"
        ),
        consumer_max_heartbeat_interval_ms=config.get_int(
            "group.consumer.max.heartbeat.interval.ms"
        ),
        consumer_assignors=tuple(str(name) for name in config.get("group.consumer.assignors")),
        consumer_max_size=config.get_int("group.consumer.max.size"),
        consumer_migration_policy=str(config.get("group.consumer.migration.policy")),
    )


GroupConfigEntry = tuple[
    str, str | None, ConfigSource, tuple[tuple[str, str | None, ConfigSource], ...], int, str
]
"""(name, value, source, synonyms, config type, documentation) of one DescribeConfigs entry."""


def describe_group_entries(
    config: BrokerConfig, overrides: Mapping[str, str]
) -> list[GroupConfigEntry]:
    entries: list[GroupConfigEntry] = []
    for name, (broker_key, doc) in GROUP_CONFIG_KEYS.items():
        broker_value, broker_source, _ = config.describe(broker_key)
        if broker_source is not ConfigSource.DEFAULT_CONFIG:
            broker_source = ConfigSource.STATIC_BROKER_CONFIG
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            value: str | None = overrides[name]
            source = ConfigSource.DYNAMIC_GROUP_CONFIG
            synonyms.append((name, value, source))
        else:
            value, source = broker_value, broker_source
        synonyms.append((broker_key, broker_value, broker_source))
        entries.append((name, value, source, tuple(synonyms), int(ConfigType.INT), doc))
    return entries
