"""The node's config service: the effective broker config, topic LogConfigs, and the
DescribeConfigs / AlterConfigs / IncrementalAlterConfigs operations.

* **Broker config** (`config`): replaced, never mutated, on every dynamic change: this
  broker's `/config/brokers/<id>` and the cluster default `/config/brokers/<default>`,
  written here (followed by a change notification) or re-read when another broker's
  notification arrives (`apply_config_change`, `rescan_configs`).
* **Topic configs**: `/config/topics/<t>` through the topic cache; `log_config_for` builds
  (and caches) the effective `LogConfig`: broker topic defaults < topic overrides. The open
  logs of a changed topic get their new LogConfig at once.
* **Who else follows**: `on_broker_config` (the controller's default of
  `unclean.leader.election.enable`, Kafka's `enableDefaultUncleanLeaderElection`),
  `on_notified_topics` (the controller re-reads those topics' configs, Kafka's
  TopicConfigHandler -> `enableTopicUncleanLeaderElection`; None: every topic) and
  `on_throttles` (the replica manager re-reads its KIP-73 throttles) and
  `on_quota_entities` (the quota service re-reads client quota entities) and
  `on_group_configs` (the group coordinator applies a group's KIP-848 overrides).
* **Group configs** (KIP-848, resource type GROUP 32): `/config/groups/<g>`, described and
  altered here (`trafka.node.config.group`, validated by `trafka.group.group_configs`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.group_configs import GroupConfigError, validate_group_configs
from trafka.log.config import LogConfig
from trafka.metadata_quorum import znodes
from trafka.node.config.broker import (
    BROKER_CONFIG_DEFS,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
    definition,
)
from trafka.node.config.changes import (
    DEFAULT_BROKER_ENTITY,
    Entity,
    EntityType,
    broker_entity_path,
    group_entity_path,
    notify_config_change,
    topic_entity_path,
)
from trafka.node.config.group import GROUP_RESOURCE, describe_group_entries, group_config_of
from trafka.node.config.topic import TOPIC_CONFIG_DEFS
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, NoNode
from trafka.node.topics import TopicError, TopicManager

log = logging.getLogger("trafka.node.config")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs entry."""

    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    sensitive: bool
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    config_type: int = 0
    documentation: str | None = None


def _broker_config_entry(
    config_def: ConfigDef, value: str | None, source: ConfigSource, sensitive: bool
) -> ConfigEntry:
    """One DescribeConfigs entry of a broker config, its own only synonym."""
    return ConfigEntry(
        config_def.name,
        value,
        not config_def.dynamic,
        source,
        sensitive,
        ((config_def.name, value, source),),
        int(config_def.config_type),
        config_def.doc,
    )


def effective_log_config(config: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """A topic's LogConfig: the broker's topic defaults < the topic's overrides."""
    return LogConfig.from_properties({**config.topic_defaults(), **dict(overrides)})


async def read_dynamic_config(
    store: MetadataStore, node_id: int, config: BrokerConfig
) -> BrokerConfig:
    """`config` with this broker's `/config/brokers/<id>` and the cluster default `<default>`
    from the tree (`config` itself when both are unchanged)."""
    own = await _read_broker_entity(store, str(node_id))
    default = await _read_broker_entity(store, DEFAULT_BROKER_ENTITY)
    if own == config.dynamic_values and default == config.dynamic_default_values:
        return config
    log.info("dynamic broker configs: %s, cluster default %s", own, default)
    return config.with_dynamic(own, default)


async def _read_broker_entity(store: MetadataStore, entity: str) -> dict[str, Any]:
    raw = await store.get(znodes.broker_config_path(entity))
    if not raw:
        return {}
    values = {}
    try:
        stored = znodes.EntityConfig.from_json(raw).config
    except znodes.ZNodeFormatError:
        log.warning("ignoring malformed dynamic broker config %s", entity)
        return {}
    for key, text in stored.items():
        try:
            values[key] = definition(key).parse(text)
        except ValueError:
            log.warning("ignoring bad dynamic config %s=%r (%s)", key, text, entity)
    return values


ConfigTransform = Callable[[dict[str, str | None]], Mapping[str, str | None]]


MAX_GROUP_ENTITY_BYTES = 900
"""Bound on a sanitized group id with configs (`/config/groups/<id>` must fit the tree's
1024-byte paths); Kafka has none. Longer ids get INVALID_REQUEST."""

TOPIC_SEGMENT_BYTES_MIN = 1024 * 1024
"""`segment.bytes` minimum of Kafka 4 (KIP-1030; `segment.ms` keeps its minimum of 1 ms
until Kafka 5). Enforced on topic configs and `log.segment.bytes`; the log layer itself
accepts smaller segments (its tests use them)."""


class ConfigService:
    """The effective broker config and the config APIs (see the module docstring)."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        node_id: int,
        config: BrokerConfig,
        topics: TopicManager,
        logs: LocalLogs,
    ) -> None:
        self._store = store
        self.node_id = node_id
        self.config = config
        self._topics = topics
        self._logs = logs
        self._log_configs: dict[str, tuple[BrokerConfig, Mapping[str, str], LogConfig]] = {}
        """topic -> (broker config, topic overrides, LogConfig) it was built from."""
        self.on_broker_config: list[Callable[[BrokerConfig], None]] = []
        self.on_notified_topics: list[Callable[[Sequence[str] | None], None]] = []
        self.on_throttles: list[Callable[[], None]] = []
        self.on_quota_entities: list[Callable[[str | None], None]] = []
        """Client quota entities changed: the entity path (`users/alice`), None: all
        (`trafka.node.quota.service.QuotaService.apply_path`)."""
        self.on_group_configs: list[Callable[[str, Mapping[str, str]], None]] = []
        """A group's dynamic configs (group id, its complete overrides; {}: none left)."""
        self._groups_with_configs: set[str] = set()
        """Group ids whose non-empty overrides the listeners were last given (a rescan tells
        them about the ones whose node went away)."""
        topics.listeners.append(self.forget_log_configs)

    # ---- topic LogConfigs -------------------------------------------------------------------
    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's effective LogConfig: broker topic defaults < topic overrides.

        Cached per topic (the Produce path asks on every request): an entry is valid while
        `self.config` (replaced, never mutated, on every broker dynamic config change) and
        the topic's `TopicState.configs` (replaced on AlterConfigs, (re)creation and every
        refresh from the tree) are the very objects it was built from. The TopicManager
        listener and `forget_log_configs` also drop entries on create/change/delete and
        broker config changes, so the cache holds at most one entry per existing topic.
        Unknown topics are built each time and not cached (bounded by the topic count)."""
        state = self._topics.get(topic)
        if state is None:
            return LogConfig.from_properties(self.config.topic_defaults())
        cached = self._log_configs.get(topic)
        if cached is not None and cached[0] is self.config and cached[1] is state.configs:
            return cached[2]
        log_config = effective_log_config(self.config, state.configs)
        self._log_configs[topic] = (self.config, state.configs, log_config)
        return log_config

    def forget_log_configs(self, topic: str | None = None) -> None:
        """Drop the cached LogConfig of `topic` (a TopicManager listener), or all of them."""
        if topic is None:
            self._log_configs.clear()
        else:
            self._log_configs.pop(topic, None)

    def validate_topic_configs(self, configs: Mapping[str, str]) -> None:
        try:
            log_config = effective_log_config(self.config, configs)
        except (ValueError, KeyError) as error:
            raise TopicError(ErrorCode.invalid_config, str(error) or "Invalid config") from None
        if log_config.segment_bytes < TOPIC_SEGMENT_BYTES_MIN:
            # Kafka 4 (KIP-1030): smaller segments roll a file per produce.
            raise TopicError(
                ErrorCode.invalid_config,
                f"Invalid value {log_config.segment_bytes} for configuration segment.bytes: "
                f"Value must be at least {TOPIC_SEGMENT_BYTES_MIN}",
            )

    # ---- DescribeConfigs ----------------------------------------------------------------------
    def describe_topic_configs(
        self, topic: str, overrides: Mapping[str, str] | None = None
    ) -> list[ConfigEntry]:
        """Every topic key with its value and source (DYNAMIC_TOPIC_CONFIG or a broker
        synonym or the default), Kafka's DescribeConfigs semantics."""
        if overrides is None:
            state = self._topics.get(topic)
            overrides = dict(state.configs) if state is not None else {}
        entries = []
        for name, (config_type, default, doc) in TOPIC_CONFIG_DEFS.items():
            synonyms: list[tuple[str, str | None, ConfigSource]] = []
            if name in overrides:
                value: str | None = overrides[name]
                source = ConfigSource.DYNAMIC_TOPIC_CONFIG
                synonyms.append((name, value, source))
            else:
                value, source = default, ConfigSource.DEFAULT_CONFIG
            synonym = self.config.topic_synonym(name)
            if synonym is not None:
                broker_key, broker_value, broker_source = synonym
                if name not in overrides:
                    value, source = broker_value, broker_source
                    if name == "retention.ms":
                        value = str(self.config.log_retention_ms)
                    if broker_source is ConfigSource.DEFAULT_CONFIG:
                        source = ConfigSource.DEFAULT_CONFIG
                synonyms.append((broker_key, broker_value, broker_source))
            entries.append(
                ConfigEntry(
                    name, value, False, source, False, tuple(synonyms), int(config_type), doc
                )
            )
        return entries

    def describe_broker_configs(self) -> list[ConfigEntry]:
        return [
            _broker_config_entry(config_def, *self.config.describe(config_def.name))
            for config_def in BROKER_CONFIG_DEFS
        ]

    def describe_default_broker_configs(self) -> list[ConfigEntry]:
        """The cluster-wide dynamic defaults (`/config/brokers/<default>`), as Kafka answers
        DescribeConfigs for the BROKER resource "": only the keys set there."""
        defaults = self.config.dynamic_default_values
        return [
            _broker_config_entry(
                config_def,
                None if config_def.sensitive else config_def.render(defaults[config_def.name]),
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                config_def.sensitive,
            )
            for config_def in BROKER_CONFIG_DEFS
            if config_def.name in defaults
        ]

    async def read_group_configs(self, group_id: str) -> dict[str, str]:
        """`/config/groups/<g>` from this node's replica of the tree ({} when absent)."""
        raw = await self._store.get(znodes.group_config_path(group_id))
        if not raw:
            return {}
        try:
            return dict(znodes.EntityConfig.from_json(raw).config)
        except znodes.ZNodeFormatError:
            log.warning("ignoring malformed config of group %s", group_id)
            return {}

    async def describe_group_configs(self, group_id: str) -> list[ConfigEntry]:
        """Every group key (KIP-848): the override (DYNAMIC_GROUP_CONFIG) or the broker's."""
        overrides = await self.read_group_configs(group_id)
        return [
            ConfigEntry(name, value, False, source, False, synonyms, config_type, doc)
            for name, value, source, synonyms, config_type, doc in describe_group_entries(
                self.config, overrides
            )
        ]

    async def groups_with_configs(self) -> list[str]:
        """The group ids that have a `/config/groups` node (ListConfigResources)."""
        try:
            children = await self._store.children(znodes.CONFIG_GROUPS)
        except NoNode:
            return []
        return sorted(znodes.desanitize_entity_name(child) for child in children)

    # ---- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------
    async def set_broker_configs(
        self, configs: Mapping[str, str | None], *, cluster_default: bool = False
    ) -> None:
        """Dynamic broker configs: this broker's (`/config/brokers/<id>`) or, with
        `cluster_default`, every broker's (`/config/brokers/<default>`); None deletes a key.
        The write is followed by a config change notification so every broker re-reads it."""
        current = (
            self.config.dynamic_default_values if cluster_default else self.config.dynamic_values
        )
        dynamic = dict(current)
        for key, raw in configs.items():
            config_def = definition(key)
            if not config_def.dynamic:
                raise TopicError(
                    ErrorCode.invalid_request, f"Cannot update these configs dynamically: {key}"
                )
            if raw is None:
                dynamic.pop(key, None)
            else:
                dynamic[key] = config_def.parse(raw)
        rendered = {k: definition(k).render(v) or "" for k, v in dynamic.items()}
        entity = DEFAULT_BROKER_ENTITY if cluster_default else str(self.node_id)
        await self._store.put(
            znodes.broker_config_path(entity), znodes.EntityConfig(rendered).to_json()
        )
        await notify_config_change(self._store, broker_entity_path(entity))
        if cluster_default:
            self.use_config(self.config.with_dynamic(self.config.dynamic_values, dynamic))
        else:
            self.use_config(self.config.with_dynamic(dynamic))

    def use_config(self, config: BrokerConfig) -> None:
        """A new effective broker config (dynamic values changed): topic LogConfigs that
        inherit a broker default follow, in the caches and in the open logs, and so do the
        `on_broker_config` listeners."""
        self.config = config
        self.forget_log_configs()
        self._sync_log_configs(list(self._topics.topics))
        self._refresh_throttles()
        for listener in self.on_broker_config:
            listener(config)

    async def alter_configs(
        self,
        resource_type: int,
        name: str,
        transform: ConfigTransform,
        *,
        validate_only: bool,
    ) -> tuple[int, str | None]:
        """AlterConfigs / IncrementalAlterConfigs: (error_code, error_message). A BROKER
        resource is this broker's id, or "" for the cluster-wide default (Kafka's)."""
        try:
            if resource_type == TOPIC_RESOURCE:
                await self._alter_topic_configs(name, transform, validate_only=validate_only)
            elif resource_type == GROUP_RESOURCE:
                await self._alter_group_configs(name, transform, validate_only=validate_only)
            elif resource_type == BROKER_RESOURCE and name in ("", str(self.node_id)):
                cluster_default = name == ""
                values = (
                    self.config.dynamic_default_values
                    if cluster_default
                    else self.config.dynamic_values
                )
                current: dict[str, str | None] = {
                    k: definition(k).render(v) for k, v in values.items()
                }
                wanted = dict(transform(current))
                changes = {k: wanted.get(k) for k in set(current) | set(wanted)}
                if validate_only:
                    for key, raw in changes.items():
                        if raw is not None:
                            definition(key).parse(raw)
                else:
                    await self.set_broker_configs(changes, cluster_default=cluster_default)
            else:
                return int(ErrorCode.invalid_request), f"Unsupported resource {name!r}"
        except TopicError as error:
            return int(error.error_code), error.message
        except ValueError as error:  # ConfigError from the broker config table
            return int(ErrorCode.invalid_config), str(error)
        return 0, None

    async def _alter_topic_configs(
        self, name: str, transform: ConfigTransform, *, validate_only: bool
    ) -> None:
        state = self._topics.get(name)
        if state is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        new = {k: v for k, v in transform(dict(state.configs)).items() if v is not None}
        unknown = sorted(k for k in new if k not in TOPIC_CONFIG_DEFS)
        if unknown:
            raise TopicError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
        self.validate_topic_configs(new)
        if validate_only:
            return
        await self._topics.set_configs(name, new)
        # Every other broker re-reads the topic's configs (Kafka's config change notification).
        await notify_config_change(self._store, topic_entity_path(name))
        self.forget_log_configs(name)
        self._sync_log_configs([name])
        self._refresh_throttles()

    async def _alter_group_configs(
        self, group_id: str, transform: ConfigTransform, *, validate_only: bool
    ) -> None:
        if not group_id:
            raise TopicError(ErrorCode.invalid_request, "Group name can't be empty.")
        if len(znodes.sanitize_entity_name(group_id).encode()) > MAX_GROUP_ENTITY_BYTES:
            # the znode path's bound (trafka.metadata_quorum.tree.MAX_PATH_BYTES)
            raise TopicError(ErrorCode.invalid_request, "Group name is too long for configs.")
        await self._store.sync()
        current: dict[str, str | None] = dict(await self.read_group_configs(group_id))
        wanted = {k: v for k, v in transform(current).items() if v is not None}
        try:
            validate_group_configs(wanted, group_config_of(self.config))
        except GroupConfigError as error:
            raise TopicError(ErrorCode.invalid_config, str(error)) from None
        if validate_only:
            return
        path = znodes.group_config_path(group_id)
        if wanted:
            await self._store.put(path, znodes.EntityConfig(wanted).to_json())
        else:
            try:
                await self._store.delete(path)
            except NoNode:
                pass
        await notify_config_change(self._store, group_entity_path(group_id))
        self._give_group_configs(group_id, wanted)

    def _give_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        if configs:
            self._groups_with_configs.add(group_id)
        else:
            self._groups_with_configs.discard(group_id)
        for listener in self.on_group_configs:
            listener(group_id, configs)

    async def _reload_group_configs(self, group_ids: Sequence[str] | None) -> None:
        """Re-read the named groups' configs (None: every `/config/groups` child, and the
        groups whose node went away) and hand them to the `on_group_configs` listeners."""
        if group_ids is None:
            present = await self.groups_with_configs()
            group_ids = sorted(set(present) | self._groups_with_configs)
        for group_id in group_ids:
            self._give_group_configs(group_id, await self.read_group_configs(group_id))

    # ---- config change notifications (trafka.node.config.changes) ---------------------------
    async def apply_config_change(self, entity: Entity) -> None:
        """One notified entity: re-read it from the local replica of the tree and apply it;
        a topic this node does not know, another broker's entity or an unchanged config
        change nothing. A topic's change also reaches the `on_notified_topics` listeners."""
        if entity.entity_type.is_quota:
            for quota_listener in self.on_quota_entities:
                quota_listener(entity.path)
            return
        if entity.entity_type is EntityType.GROUPS:
            await self._reload_group_configs([znodes.desanitize_entity_name(entity.name)])
            return
        if entity.entity_type is EntityType.TOPICS:
            await self._reload_topic_configs([entity.name])
            for listener in self.on_notified_topics:
                listener([entity.name])
        elif entity.name in (str(self.node_id), DEFAULT_BROKER_ENTITY):
            await self.reload_dynamic_configs()
        self._refresh_throttles()

    async def rescan_configs(self) -> None:
        """Re-read every entity this node uses: its broker configs and every known topic's
        (and let the `on_notified_topics` listeners re-read every topic's)."""
        await self.reload_dynamic_configs()
        await self._reload_topic_configs(list(self._topics.topics))
        await self._reload_group_configs(None)
        self._refresh_throttles()
        for listener in self.on_notified_topics:
            listener(None)
        for quota_listener in self.on_quota_entities:
            quota_listener(None)

    async def reload_dynamic_configs(self) -> None:
        """This broker's `/config/brokers/<id>` and the cluster default `<default>`, at start
        and on every change notification of either (a no-op when both are unchanged)."""
        config = await read_dynamic_config(self._store, self.node_id, self.config)
        if config is not self.config:
            self.use_config(config)

    async def _reload_topic_configs(self, names: Sequence[str]) -> None:
        for name in names:
            raw = await self._store.get(znodes.topic_config_path(name))
            try:
                configs = znodes.EntityConfig.from_json(raw).config if raw else {}
            except znodes.ZNodeFormatError:
                log.warning("ignoring malformed config of topic %s", name)
                continue
            if self._topics.apply_configs(name, configs):
                log.info("topic %s configs changed: %s", name, dict(configs))
        self._sync_log_configs(names)

    def _sync_log_configs(self, names: Sequence[str]) -> None:
        """Hand the open logs of `names` their effective LogConfig when it changed."""
        for name in names:
            if self._topics.get(name) is None:
                continue
            wanted = self.log_config_for(name)
            if self._logs.config_for(name) != wanted:
                self._logs.set_topic_config(name, wanted)

    def _refresh_throttles(self) -> None:
        for listener in self.on_throttles:
            listener()
