"""The broker: composition root of one node (config, metadata tree, logs, handlers, listener).

Start-up order (SEEDS BST-03, Kafka's BrokerState NOT_RUNNING -> STARTING -> RUNNING):

1. start this node's replica of the metadata quorum (`trafka.metadata_quorum`, a one-voter
   Raft group by default, journal in `<first log dir>/quorum`) and wait until it is ready;
   read or create `/cluster/id`;
2. open the log directories (`LogManager`: recovery, checkpoints);
3. load topics from the tree (`TopicManager.load`), so topics survive restarts;
4. bind the listeners (a busy port fails start-up with a one-line `StartupError`);
5. register `/brokers/ids/<id>` (ephemeral, Kafka's registration JSON; re-registered when
   the session is lost);
6. serve requests; run log maintenance (retention, flush, checkpoints) periodically in a
   worker thread; once, after a quorum barrier, delete stray logs (local logs the tree no
   longer assigns to this node, KAFKA-14616: `trafka.node.stray_logs`).

Shutdown (SIGTERM/SIGINT from knode): first a controlled shutdown (`controlled_shutdown`:
the ControlledShutdown request to the controller, which moves this node's leaders away;
bounded, retried), then stop accepting, cancel request tasks, close the logs (flush +
checkpoints), close the metadata store (the ephemeral registration goes away).

Cluster (issue 5): every voter (`process.roles=broker,controller`) runs a `ControllerService`
(it becomes the controller when it wins `/controller`); a broker-only node
(`process.roles=broker`) is a learner of the quorum and runs none. Every node runs a
`ReplicaManager` whose roles come from the controller's LeaderAndIsr, and `ReplicaFetchers`
for the partitions it follows. Topic creation, partition creation and deletion are written
to the tree and carried out by the controller; the admin calls here wait (bounded by
`ADMIN_WAIT_S`) until the local metadata cache shows the result, so a client that creates a
topic can produce at once. One node is simply a cluster of one: controller,
leader of everything, ISR of one.

Not implemented here: multiple log dirs beyond passing them to the LogManager, SSL/SASL
listeners.
"""

from __future__ import annotations

import errno
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId as BrokerIdWire

from trafka.metadata_quorum import znodes
from trafka.net import protocol
from trafka.net.headers import RequestHeader
from trafka.node.config import BrokerConfig, ConfigDef, ConfigSource, definition
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import HandlerRegistry, load_all
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, NodeExists, QuorumMetadataStore
from trafka.node.replica_manager import ReplicaManager
from trafka.node.stray_logs import LocalPartition, StrayDecision, find_stray_logs, read_tree_view
from trafka.node.topics import TopicError, TopicManager, TopicState, topic_id_text
from trafka.node.txn_service import TransactionService

log = logging.getLogger("trafka.node.broker")

MAINTENANCE_INTERVAL_S = 5.0
QUORUM_DIR_NAME = "quorum"
"""The quorum's journal lives in <first log dir>/quorum (no '-': not a partition dir)."""
QUORUM_WAIT_LOG_INTERVAL_S = 10.0
PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids a broker takes from /latest_producer_id_block at a time (Kafka's size)."""
ADMIN_WAIT_S = 10.0
"""How long CreateTopics / CreatePartitions / DeleteTopics wait for the controller's result."""
ADMIN_POLL_S = 0.02
STRAY_BARRIER_TIMEOUT_S = 30.0
"""One attempt at the quorum barrier before the stray-log check."""
STRAY_BARRIER_GIVE_UP_S = 600.0
"""Without a barrier by then the stray-log check is skipped (nothing is deleted)."""
STRAY_BARRIER_RETRY_S = 1.0


class StartupError(Exception):
    """A start-up failure with a one-line explanation (busy port, unreadable dir, ...)."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


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


def _first_os_error(raised: BaseException) -> OSError | None:
    if isinstance(raised, OSError):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        for inner in raised.exceptions:
            found = _first_os_error(inner)
            if found is not None:
                return found
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _generate_cluster_id() -> str:
    return topic_id_text(uuid.uuid4())


class Broker:
    """One trafka node. `await broker.run(task_status=...)` serves until cancelled."""

    def __init__(self, config: BrokerConfig, *, registry: HandlerRegistry | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.registry = registry or load_all()
        self.cluster_id = ""
        self.store: MetadataStore | None = None
        self.log_manager: LocalLogs | None = None
        self._topics: TopicManager | None = None
        self._replica_manager: ReplicaManager | None = None
        self.brokers: dict[int, BrokerInfo] = {}
        self.bound_ports: list[int] = []
        self._rng = random.Random()
        self._next_producer_id = 0
        self._producer_id_block_end = -1
        self._producer_id_lock = trio.Lock()
        self._supported: protocol.SupportedApis | None = None
        self._supported_ready = trio.Event()
        self.quorum_event_listeners: list[Callable[[Any], None]] = []
        """Called with every WatchEvent/SessionEvent of the node's quorum replica."""
        self.controller_service: Any = None
        """`trafka.node.controller_service.ControllerService` once serving; None on a broker-only
        node (process.roles=broker), which never runs the controller."""
        self.fetchers: Any = None
        self.group_service: Any = None
        self.transaction_service = TransactionService(self)  # trafka.node.txn_service
        """`trafka.node.group_service.GroupService`, created and started with the node."""
        self._log_configs: dict[str, tuple[BrokerConfig, Mapping[str, str], Any]] = {}
        """topic -> (broker config, topic overrides, LogConfig) it was built from."""

    # ---- services used by handlers -----------------------------------------------------------
    @property
    def topics(self) -> TopicManager:
        assert self._topics is not None, "broker not started"
        return self._topics

    @property
    def replica_manager(self) -> ReplicaManager:
        assert self._replica_manager is not None, "broker not started"
        return self._replica_manager

    @property
    def quorum(self) -> Any:
        """The node's `MetadataQuorum` (None when the store is not the replicated one)."""
        return getattr(self.store, "quorum", None)

    def live_broker_ids(self) -> list[int]:
        """The registered brokers: `/brokers/ids` in the local replica of the tree (fresher
        than the controller's last UpdateMetadata, e.g. right after start-up)."""
        quorum = self.quorum
        if quorum is None:
            return sorted(self.brokers)
        from trafka.metadata_quorum.tree import NoNodeError

        try:
            children = quorum.children_local(znodes.BROKER_IDS)
        except NoNodeError:
            return sorted(self.brokers)
        return sorted(int(child) for child in children if child.isdigit())

    def live_brokers(self) -> list[BrokerInfo]:
        result = []
        for broker_id in self.live_broker_ids():
            info = self.brokers.get(broker_id)
            if info is None:
                endpoint = self.endpoint_for(broker_id)
                if endpoint is None:
                    continue
                info = BrokerInfo(broker_id, endpoint[0], endpoint[1], None)
            result.append(info)
        return result

    def controller_id(self) -> int:
        """The active controller: the broker id in `/controller` (-1 when there is none)."""
        from trafka.node.controller_service import controller_id_in_tree

        store = self.store
        quorum = getattr(store, "quorum", None)
        if quorum is None:
            return self.node_id
        return controller_id_in_tree(quorum)

    def endpoint_for(self, broker_id: int) -> tuple[str, int] | None:
        """host, port of a registered broker (from the local replica of the tree)."""
        info = self.brokers.get(broker_id)
        quorum = getattr(self.store, "quorum", None)
        if quorum is not None:
            from trafka.metadata_quorum.tree import NoNodeError

            try:
                raw, _ = quorum.get_local(znodes.broker_path(broker_id))
                registration = znodes.BrokerRegistration.from_json(bytes(raw), broker_id)
                if registration.endpoints:
                    endpoint = registration.endpoints[0]
                    return endpoint.host, endpoint.port
            except (NoNodeError, znodes.ZNodeFormatError):
                pass
        return None if info is None else (info.host, info.port)

    def update_metadata(
        self,
        live_brokers: list[BrokerInfo],
        partitions: list[tuple[str, int, tuple[int, ...], int, int, tuple[int, ...]]],
    ) -> list[str]:
        """UpdateMetadata: the live brokers and partition states (topic, partition, replicas,
        leader, leader_epoch, isr); leader -2 means the topic is being deleted. Returns the
        topics this node does not know yet (the handler reads them from the tree)."""
        if live_brokers:
            self.brokers = {b.node_id: b for b in live_brokers}
        unknown: list[str] = []
        for topic, partition, replicas, leader, leader_epoch, isr in partitions:
            if leader == -2:
                self.topics.forget(topic)
                continue
            if self.topics.get(topic) is None:
                if topic not in unknown:
                    unknown.append(topic)
                continue
            self.topics.apply_partition_state(
                topic,
                partition,
                replicas=replicas,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=isr,
            )
        return unknown

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaders away before it stops (CTL-43,
        EXT-12): ControlledShutdown v3 with this registration's epoch, retried
        `controlled.shutdown.max.retries` times while partitions remain (backoff capped at
        1 s so SIGTERM stays prompt). Returns whether the controller confirmed."""
        from kio.static.primitive import i64

        from trafka.net.client import ClientError, KafkaConnection
        from trafka.net.messages.controlled_shutdown import ControlledShutdownRequestV3

        quorum = self.quorum
        if quorum is None or not self.config.get_bool("controlled.shutdown.enable"):
            return False
        stat = quorum.exists_local(znodes.broker_path(self.node_id))
        broker_epoch = -1 if stat is None else int(stat.czxid)
        backoff_s = min(1.0, self.config.get_int("controlled.shutdown.retry.backoff.ms") / 1000)
        for attempt in range(max(1, self.config.get_int("controlled.shutdown.max.retries"))):
            endpoint = self.endpoint_for(self.controller_id())
            if endpoint is not None:
                try:
                    connection = await KafkaConnection.connect(
                        endpoint[0],
                        endpoint[1],
                        client_id=f"broker-{self.node_id}",
                        connect_timeout_s=2.0,
                        request_timeout_s=10.0,
                    )
                    try:
                        response = await connection.request(
                            ControlledShutdownRequestV3(
                                broker_id=BrokerIdWire(self.node_id),
                                broker_epoch=i64(broker_epoch),
                            )
                        )
                    finally:
                        await connection.close()
                    remaining = len(response.remaining_partitions)
                    if int(response.error_code) == 0 and remaining == 0:
                        log.info("controlled shutdown succeeded")
                        return True
                    log.info(
                        "controlled shutdown attempt %d: error %s, %d partitions remaining",
                        attempt + 1,
                        response.error_code,
                        remaining,
                    )
                except ClientError as error:
                    log.info("controlled shutdown attempt %d failed: %s", attempt + 1, error)
            await trio.sleep(backoff_s)
        log.warning("controlled shutdown did not complete; shutting down anyway")
        return False

    async def _wait_for(self, condition: Callable[[], bool]) -> bool:
        with trio.move_on_after(ADMIN_WAIT_S):
            while not condition():
                await trio.sleep(ADMIN_POLL_S)
            return True
        return False

    def _has_leaders(self, name: str, partitions: int | None = None) -> bool:
        state = self.topics.get(name)
        if state is None:
            return False
        if partitions is not None and len(state.partitions) < partitions:
            return False
        return all(p.leader >= 0 for p in state.partitions.values())

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
        *,
        validate_only: bool,
    ) -> TopicState:
        plan = self.topics.check_create(
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
            default_partitions=self.config.get_int("num.partitions"),
            default_replication_factor=self.config.get_int("default.replication.factor"),
        )
        if validate_only:
            from trafka.node.topics import initial_partition_state

            live = self.live_broker_ids()
            return TopicState(
                name,
                uuid.UUID(int=0),
                {p: initial_partition_state(p, r, live) for p, r in plan.items()},
                dict(configs),
            )
        state = await self.topics.create(name, plan, configs)
        await self._wait_for(lambda: self._has_leaders(name))
        return self.topics.get(name) or state

    async def add_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> TopicState:
        if validate_only:
            state = self.topics.get(name)
            if state is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            if count <= len(state.partitions):
                raise TopicError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {len(state.partitions)} partitions, which is higher "
                    f"than the requested {count}.",
                )
            return state
        state = await self.topics.add_partitions(name, count, assignments)
        await self._wait_for(lambda: self._has_leaders(name, count))
        return self.topics.get(name) or state

    async def auto_create_topic(self, name: str) -> TopicState | None:
        """Metadata auto-creation (auto.create.topics.enable); None when disabled."""
        if not self.config.get_bool("auto.create.topics.enable"):
            return None
        factor = min(
            self.config.get_int("default.replication.factor"), len(self.live_broker_ids()) or 1
        )
        try:
            return await self.create_topic(
                name, self.config.get_int("num.partitions"), factor, {}, {}, validate_only=False
            )
        except TopicError as error:
            if error.error_code != ErrorCode.topic_already_exists:
                raise
            # created concurrently (another Metadata request or broker): use that topic
            await self.topics.refresh_topic(name)
            await self._wait_for(lambda: self._has_leaders(name))
            return self.topics.get(name)

    async def delete_topic(self, name: str) -> None:
        if not self.config.get_bool("delete.topic.enable"):
            raise TopicError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        await self.topics.delete(name)
        quorum = getattr(self.store, "quorum", None)
        if quorum is None:
            return
        # The controller removes the topic once every replica deleted its logs (CTL-29).
        await self._wait_for(lambda: quorum.exists_local(znodes.topic_path(name)) is None)
        self.topics.forget(name)

    async def allocate_producer_id(self) -> int:
        """A cluster-unique producer id from blocks of 1000 in /latest_producer_id_block."""
        async with self._producer_id_lock:
            if self._next_producer_id > self._producer_id_block_end:
                # A conditional write: two brokers can never be handed the same block.
                def next_block(raw: bytes | None) -> bytes:
                    start = znodes.ProducerIdBlock.from_json(raw).block_end + 1 if raw else 0
                    return znodes.ProducerIdBlock(
                        self.node_id, start, start + PRODUCER_ID_BLOCK_SIZE - 1
                    ).to_json()

                written = await self._require_store().update(
                    znodes.LATEST_PRODUCER_ID_BLOCK, next_block
                )
                block = znodes.ProducerIdBlock.from_json(written)
                self._next_producer_id = block.block_start
                self._producer_id_block_end = block.block_end
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id

    # ---- topic configs -----------------------------------------------------------------------
    def log_config_for(self, topic: str) -> Any:
        """The topic's effective LogConfig: broker topic defaults < topic overrides.

        Cached per topic (the Produce path asks on every request): an entry is valid while
        `self.config` (replaced, never mutated, on every broker dynamic config change) and
        the topic's `TopicState.configs` (replaced on AlterConfigs, (re)creation and every
        refresh from the tree) are the very objects it was built from. The TopicManager
        listener and `_forget_log_configs` also drop entries on create/change/delete and
        broker config changes, so the cache holds at most one entry per existing topic.
        Unknown topics are built each time and not cached (bounded by the topic count)."""
        from trafka.log.config import LogConfig

        state = self._topics.get(topic) if self._topics is not None else None
        if state is None:
            return LogConfig.from_properties(self.config.topic_defaults())
        cached = self._log_configs.get(topic)
        if cached is not None and cached[0] is self.config and cached[1] is state.configs:
            return cached[2]
        log_config = LogConfig.from_properties(
            {**self.config.topic_defaults(), **dict(state.configs)}
        )
        self._log_configs[topic] = (self.config, state.configs, log_config)
        return log_config

    def _forget_log_configs(self, topic: str | None = None) -> None:
        """Drop the cached LogConfig of `topic` (a TopicManager listener), or all of them."""
        if topic is None:
            self._log_configs.clear()
        else:
            self._log_configs.pop(topic, None)

    def validate_topic_configs(self, configs: Mapping[str, str]) -> None:
        from trafka.log.config import LogConfig

        try:
            LogConfig.from_properties({**self.config.topic_defaults(), **dict(configs)})
        except (ValueError, KeyError) as error:
            raise TopicError(ErrorCode.invalid_config, str(error) or "Invalid config") from None

    def describe_topic_configs(
        self, topic: str, overrides: Mapping[str, str] | None = None
    ) -> list[ConfigEntry]:
        """Every topic key with its value and source (DYNAMIC_TOPIC_CONFIG or a broker
        synonym or the default), Kafka's DescribeConfigs semantics."""
        from trafka.node.topic_configs import TOPIC_CONFIG_DEFS

        if overrides is None:
            state = self.topics.get(topic)
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
        from trafka.node.config import BROKER_CONFIG_DEFS

        return [
            _broker_config_entry(config_def, *self.config.describe(config_def.name))
            for config_def in BROKER_CONFIG_DEFS
        ]

    def describe_default_broker_configs(self) -> list[ConfigEntry]:
        """The cluster-wide dynamic defaults (`/config/brokers/<default>`), as Kafka answers
        DescribeConfigs for the BROKER resource "": only the keys set there."""
        from trafka.node.config import BROKER_CONFIG_DEFS

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

    async def set_broker_configs(
        self, configs: Mapping[str, str | None], *, cluster_default: bool = False
    ) -> None:
        """Dynamic broker configs: this broker's (`/config/brokers/<id>`) or, with
        `cluster_default`, every broker's (`/config/brokers/<default>`); None deletes a key.
        The write is followed by a config change notification so every broker re-reads it."""
        from trafka.node.config_changes import (
            DEFAULT_BROKER_ENTITY,
            broker_entity_path,
            notify_config_change,
        )

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
        store = self._require_store()
        await store.put(znodes.broker_config_path(entity), znodes.EntityConfig(rendered).to_json())
        await notify_config_change(store, broker_entity_path(entity))
        if cluster_default:
            self._use_config(self.config.with_dynamic(self.config.dynamic_values, dynamic))
        else:
            self._use_config(self.config.with_dynamic(dynamic))

    def _use_config(self, config: BrokerConfig) -> None:
        """A new effective broker config (dynamic values changed): topic LogConfigs that
        inherit a broker default follow, in the caches and in the open logs, and so does the
        controller's default of `unclean.leader.election.enable` (Kafka's
        `enableDefaultUncleanLeaderElection`)."""
        self.config = config
        self._forget_log_configs()
        self._sync_log_configs(list(self.topics.topics) if self._topics is not None else [])
        self._refresh_throttles()
        if self.controller_service is not None:
            self.controller_service.unclean_default_changed(
                config.get_bool("unclean.leader.election.enable")
            )

    async def alter_configs(
        self,
        resource_type: int,
        name: str,
        transform: Callable[[dict[str, str | None]], Mapping[str, str | None]],
        *,
        validate_only: bool,
    ) -> tuple[int, str | None]:
        """AlterConfigs / IncrementalAlterConfigs: (error_code, error_message). A BROKER
        resource is this broker's id, or "" for the cluster-wide default (Kafka's)."""
        try:
            if resource_type == 2:
                await self._alter_topic_configs(name, transform, validate_only=validate_only)
            elif resource_type == 4 and name in ("", str(self.node_id)):
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
        self,
        name: str,
        transform: Callable[[dict[str, str | None]], Mapping[str, str | None]],
        *,
        validate_only: bool,
    ) -> None:
        state = self.topics.get(name)
        if state is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        new = {k: v for k, v in transform(dict(state.configs)).items() if v is not None}
        from trafka.node.topic_configs import TOPIC_CONFIG_DEFS

        unknown = sorted(k for k in new if k not in TOPIC_CONFIG_DEFS)
        if unknown:
            raise TopicError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
        self.validate_topic_configs(new)
        if validate_only:
            return
        await self.topics.set_configs(name, new)
        self._forget_log_configs(name)
        self._sync_log_configs([name])
        self._refresh_throttles()

    # ---- config change notifications (trafka.node.config_changes) ---------------------------
    async def apply_config_change(self, entity: Any) -> None:
        """One notified entity (`config_changes.Entity`): re-read it from the local replica
        of the tree and apply it; a topic this node does not know, another broker's entity
        or an unchanged config change nothing. A topic's change also reaches the controller
        (Kafka's TopicConfigHandler -> `enableTopicUncleanLeaderElection`)."""
        from trafka.node.config_changes import DEFAULT_BROKER_ENTITY, EntityType

        if entity.entity_type is EntityType.TOPICS:
            await self._reload_topic_configs([entity.name])
            if self.controller_service is not None:
                self.controller_service.topic_configs_changed([entity.name])
        elif entity.name in (str(self.node_id), DEFAULT_BROKER_ENTITY):
            await self._reload_dynamic_configs()
        self._refresh_throttles()

    async def rescan_configs(self) -> None:
        """Re-read every entity this node uses: its broker configs and every known topic's
        (and let the controller re-read every topic's)."""
        await self._reload_dynamic_configs()
        await self._reload_topic_configs(list(self.topics.topics))
        self._refresh_throttles()
        if self.controller_service is not None:
            self.controller_service.topic_configs_changed(None)

    async def _reload_topic_configs(self, names: Sequence[str]) -> None:
        store = self._require_store()
        for name in names:
            raw = await store.get(znodes.topic_config_path(name))
            try:
                configs = znodes.EntityConfig.from_json(raw).config if raw else {}
            except znodes.ZNodeFormatError:
                log.warning("ignoring malformed config of topic %s", name)
                continue
            if self.topics.apply_configs(name, configs):
                log.info("topic %s configs changed: %s", name, dict(configs))
        self._sync_log_configs(names)

    def _sync_log_configs(self, names: Sequence[str]) -> None:
        """Hand the open logs of `names` their effective LogConfig when it changed."""
        manager = self.log_manager
        if manager is None:
            return
        for name in names:
            if self._topics is None or self.topics.get(name) is None:
                continue
            wanted = self.log_config_for(name)
            if manager.config_for(name) != wanted:
                manager.set_topic_config(name, wanted)

    def _refresh_throttles(self) -> None:
        if self._replica_manager is not None:
            self._replica_manager.refresh_throttles()

    def _require_store(self) -> MetadataStore:
        assert self.store is not None, "broker not started"
        return self.store

    # ---- lifecycle ---------------------------------------------------------------------------
    async def _open_store(self, nursery: trio.Nursery) -> MetadataStore:
        """Start this node's replica of the metadata quorum and wait until it is ready."""
        from trafka.metadata_quorum.bridge import MetadataQuorum
        from trafka.metadata_quorum.config import QuorumConfigError, config_from_properties

        first_dir = self.config.log_dirs[0]
        try:
            first_dir.mkdir(parents=True, exist_ok=True)
            quorum_config = config_from_properties(
                self.config.quorum_properties(),
                node_id=self.node_id,
                data_dir=first_dir / QUORUM_DIR_NAME,
            )
            quorum = MetadataQuorum(quorum_config)
        except QuorumConfigError as error:
            raise StartupError(f"invalid quorum configuration: {error}") from None
        except OSError as error:
            raise StartupError(f"cannot start the metadata quorum: {error}") from None
        store = QuorumMetadataStore(quorum)
        await quorum.start(nursery)
        while True:
            with trio.move_on_after(QUORUM_WAIT_LOG_INTERVAL_S):
                await quorum.wait_ready()
                break
            log.warning(
                "waiting for the metadata quorum (voters %s)",
                self.config.quorum_properties().get("controller.quorum.voters"),
            )
        nursery.start_soon(self._quorum_events_loop, quorum)
        return store

    async def _quorum_events_loop(self, quorum: Any) -> None:
        """The node's one quorum event stream: re-register after a session loss, then hand
        every event to `quorum_event_listeners` (the controller subscribes here)."""
        from trafka.metadata_quorum.bridge import SessionEvent, SessionEventKind

        async for event in quorum.events():
            if isinstance(event, SessionEvent) and event.kind in (
                SessionEventKind.EXPIRED,
                SessionEventKind.EVENTS_LOST,
            ):
                log.warning("quorum session event %s: registering again", event.kind.value)
                try:
                    await self._register(self._require_store())
                    await self._topics_reload()
                except Exception:
                    log.exception("re-registration failed")
            for listener in list(self.quorum_event_listeners):
                try:
                    listener(event)
                except Exception:
                    log.exception("quorum event listener failed")

    async def _topics_reload(self) -> None:
        if self._topics is not None:
            await self._topics.load()

    async def _load_cluster_id(self, store: MetadataStore) -> str:
        raw = await store.get(znodes.CLUSTER_ID)
        if raw:
            return znodes.ClusterId.from_json(raw).cluster_id
        cluster_id = self.config.get("cluster.id") or _generate_cluster_id()
        try:
            await store.create(znodes.CLUSTER_ID, znodes.ClusterId(cluster_id).to_json())
        except NodeExists:
            raw = await store.get(znodes.CLUSTER_ID)
            assert raw is not None
            return znodes.ClusterId.from_json(raw).cluster_id
        return str(cluster_id)

    async def _reload_dynamic_configs(self) -> None:
        """This broker's `/config/brokers/<id>` and the cluster default `<default>`, at start
        and on every change notification of either (a no-op when both are unchanged)."""
        from trafka.node.config_changes import DEFAULT_BROKER_ENTITY

        store = self._require_store()
        own = await self._read_broker_entity(store, str(self.node_id))
        default = await self._read_broker_entity(store, DEFAULT_BROKER_ENTITY)
        if own == self.config.dynamic_values and default == self.config.dynamic_default_values:
            return
        log.info("dynamic broker configs: %s, cluster default %s", own, default)
        self._use_config(self.config.with_dynamic(own, default))

    @staticmethod
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

    def _open_logs(self) -> LocalLogs:
        from trafka.log.config import LogConfig
        from trafka.log.errors import LogError

        try:
            return LocalLogs(
                [Path(d) for d in self.config.log_dirs],
                LogConfig.from_properties(self.config.topic_defaults()),
                now_ms=_now_ms(),
                node_id=self.node_id,
                cluster_id=self.cluster_id,
                topic_configs={name: self.log_config_for(name) for name in self.topics.topics},
            )
        except (OSError, LogError) as error:
            raise StartupError(f"cannot open log directories: {error}") from None

    def local_partition_sizes(self) -> list[tuple[str, str, int, int]]:
        return [] if self.log_manager is None else self.log_manager.partition_sizes()

    def _registration(self) -> znodes.BrokerRegistration:
        endpoints = tuple(
            znodes.Endpoint(a.name, a.host, a.port) for a in self.config.advertised_listeners
        )
        return znodes.BrokerRegistration(
            broker_id=self.node_id,
            endpoints=endpoints,
            timestamp_ms=_now_ms(),
            rack=self.config.get("broker.rack"),
        )

    async def _register(self, store: MetadataStore) -> None:
        registration = self._registration()
        path = znodes.broker_path(self.node_id)
        try:
            await store.create(path, registration.to_json(), ephemeral=True)
        except NodeExists:
            await store.set_data(path, registration.to_json())
        await self.refresh_brokers()

    async def refresh_brokers(self) -> None:
        store = self._require_store()
        brokers: dict[int, BrokerInfo] = {}
        for child in await store.children(znodes.BROKER_IDS):
            try:
                broker_id = int(child)
                raw = await store.get(znodes.broker_path(broker_id))
                if not raw:
                    continue
                registration = znodes.BrokerRegistration.from_json(raw, broker_id)
            except (ValueError, znodes.ZNodeFormatError):
                continue
            if registration.endpoints:
                endpoint = registration.endpoints[0]
                brokers[broker_id] = BrokerInfo(
                    broker_id, endpoint.host, endpoint.port, registration.rack
                )
        self.brokers = brokers

    async def dispatch(self, header: RequestHeader, request: Any, client_host: str) -> Any:
        handler = self.registry.get(header.api_key)
        assert handler is not None
        ctx = RequestContext(
            broker=self,
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host=client_host,
        )
        return await handler.handle(ctx, request)

    async def _prepare_supported_apis(self) -> None:
        """Build (and schema-check) the version table in a worker thread while the quorum
        starts: it imports every kio message module (~1 s)."""
        self._supported = await trio.to_thread.run_sync(self.supported_apis)
        self._supported_ready.set()

    def supported_apis(self) -> protocol.SupportedApis:
        return protocol.SupportedApis(
            protocol.ApiVersionRange(
                h.api_key, h.min_version, h.max_version, h.advertised_min_version
            )
            for h in self.registry.handlers()
        )

    async def _start_server(self, nursery: trio.Nursery) -> None:
        """Bind the listeners (trafka.net's KafkaServer); a busy port is a StartupError."""
        from trafka.net import server as net_server

        config = net_server.ServerConfig(
            socket_request_max_bytes=self.config.get_int("socket.request.max.bytes"),
            max_connections=self.config.get_int("max.connections"),
            max_connections_per_ip=self.config.get_int("max.connections.per.ip"),
            connections_max_idle_ms=self.config.get_int("connections.max.idle.ms"),
            max_in_flight_requests=min(self.config.get_int("queued.max.requests"), 64),
        )
        await self._supported_ready.wait()
        assert self._supported is not None
        kafka_server = net_server.KafkaServer(self._handle_net_request, self._supported, config)
        listeners = [
            net_server.Listener(listener.name, listener.host or "0.0.0.0", listener.port)
            for listener in self.config.listeners
        ]
        try:
            bound = await nursery.start(kafka_server.serve, listeners)
        except (OSError, ExceptionGroup) as raised:
            error = _first_os_error(raised)
            if error is None:
                raise
            uri = ",".join(listener.uri() for listener in self.config.listeners)
            if error.errno == errno.EADDRINUSE:
                raise StartupError(f"cannot listen on {uri}: address already in use") from None
            raise StartupError(f"cannot listen on {uri}: {error.strerror or error}") from None
        self.bound_ports = [b.port for b in bound]

    async def _handle_net_request(self, net_ctx: Any) -> Any:
        return await self.dispatch(net_ctx.header, net_ctx.request, net_ctx.peer_host)

    async def _maintenance_loop(self) -> None:
        """Retention, flush.ms, producer expiry, compaction, checkpoints: in a worker thread."""
        interval_s = min(
            MAINTENANCE_INTERVAL_S, self.config.get_int("log.retention.check.interval.ms") / 1000
        )
        while True:
            await trio.sleep(interval_s)
            manager = self.log_manager
            if manager is not None:
                try:
                    await trio.to_thread.run_sync(manager.maintenance, _now_ms())
                except Exception:
                    log.exception("log maintenance failed")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as quorum_nursery:
            quorum_nursery.start_soon(self._prepare_supported_apis)
            try:
                store = await self._open_store(quorum_nursery)
                self.store = store
                await self._serve(store, task_status)
            finally:
                # Stop the quorum's own tasks (session keeper) before the transport closes:
                # nothing may propose to a destroyed transport.
                quorum_nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await self._close()

    async def _serve(self, store: MetadataStore, task_status: trio.TaskStatus[None]) -> None:
        self.cluster_id = await self._load_cluster_id(store)
        await self._reload_dynamic_configs()
        self._topics = TopicManager(
            store,
            node_id=self.node_id,
            live_brokers=self.live_broker_ids,
            validate_configs=self.validate_topic_configs,
            rng=self._rng,
            via_controller=True,
        )
        self._topics.listeners.append(self._forget_log_configs)
        await self._topics.load()
        self.log_manager = await trio.to_thread.run_sync(self._open_logs)
        from trafka.node.controller.machine import ControllerConfig
        from trafka.node.controller_service import ControllerService
        from trafka.node.group_service import GroupService
        from trafka.node.replica_fetcher import ReplicaFetchers

        quorum = getattr(store, "quorum", None)
        self._replica_manager = ReplicaManager(
            node_id=self.node_id,
            topics=self._topics,
            log_manager=self.log_manager,
            log_config_for=self.log_config_for,
            replica_lag_time_max_ms=self.config.get_int("replica.lag.time.max.ms"),
            quorum=quorum,
        )
        self.fetchers = ReplicaFetchers(
            node_id=self.node_id,
            replica_manager=self._replica_manager,
            endpoint_for=self.endpoint_for,
            fetch_wait_max_ms=self.config.get_int("replica.fetch.wait.max.ms"),
            fetch_max_bytes=self.config.get_int("replica.fetch.max.bytes"),
            backoff_ms=self.config.get_int("replica.fetch.backoff.ms"),
        )
        self._replica_manager.fetchers = self.fetchers
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._maintenance_loop)
            nursery.start_soon(self._replica_manager.run)
            nursery.start_soon(self.fetchers.run)
            # Before the listener opens, so `GroupService.of` finds it on the first request;
            # its timer loads the `__consumer_offsets` partitions this node leads (also after
            # a failover) and fires session expiries from start-up, not from the first call.
            self.group_service = GroupService(self)
            await nursery.start(self.group_service.run)
            await nursery.start(self.transaction_service.run)
            # Registered before the listener opens: a client's first Metadata must list us.
            await self._register(store)
            await self._start_server(nursery)
            # Only a voter competes for /controller; a broker-only node (a quorum learner)
            # never runs the controller (KRaft's process.roles=broker).
            if quorum is not None and self.config.is_controller:
                service = ControllerService(
                    node_id=self.node_id,
                    quorum=quorum,
                    config=ControllerConfig(
                        unclean_leader_election_enable=self.config.get_bool(
                            "unclean.leader.election.enable"
                        ),
                        auto_leader_rebalance_enable=self.config.get_bool(
                            "auto.leader.rebalance.enable"
                        ),
                        leader_imbalance_per_broker_percentage=self.config.get_int(
                            "leader.imbalance.per.broker.percentage"
                        ),
                        leader_imbalance_check_interval_seconds=self.config.get_int(
                            "leader.imbalance.check.interval.seconds"
                        ),
                        delete_topic_enable=self.config.get_bool("delete.topic.enable"),
                    ),
                )
                self.controller_service = service
                self.quorum_event_listeners.append(service.wake)
                nursery.start_soon(service.run)
                from trafka.node.config_changes import ConfigChangeListener

                config_listener = ConfigChangeListener(
                    quorum, apply=self.apply_config_change, rescan=self.rescan_configs
                )
                self.quorum_event_listeners.append(config_listener.on_quorum_event)
                nursery.start_soon(config_listener.run)
                nursery.start_soon(self._remove_stray_logs, quorum)
            log.info(
                "node %d serving on %s (cluster %s, process.roles=%s%s)",
                self.node_id,
                ",".join(listener.uri() for listener in self.config.listeners),
                self.cluster_id,
                ",".join(self.config.process_roles),
                "" if self.config.is_controller else ": a quorum learner, never the controller",
            )
            task_status.started()

    async def _remove_stray_logs(self, quorum: Any) -> None:
        """Once per start, after registration: delete the local logs the tree no longer
        assigns to this node (KAFKA-14616; the rules are `trafka.node.stray_logs`). Only after
        a quorum barrier, so this replica of the tree holds every write committed before it
        (a voter or learner still catching up would otherwise judge by an old tree); without
        a barrier nothing is deleted."""
        from trafka.metadata_quorum.tree import ZooKeeperError

        give_up_at = trio.current_time() + STRAY_BARRIER_GIVE_UP_S
        while True:
            try:
                with trio.fail_after(STRAY_BARRIER_TIMEOUT_S):
                    await quorum.sync()
                break
            except (trio.TooSlowError, ZooKeeperError) as error:
                if trio.current_time() >= give_up_at:
                    log.warning("stray logs not checked: no quorum barrier (%r)", error)
                    return
                log.warning("stray-log check: quorum barrier failed (%r), retrying", error)
                await trio.sleep(STRAY_BARRIER_RETRY_S)
        self.delete_stray_logs(quorum)

    def delete_stray_logs(self, quorum: Any) -> StrayDecision:
        """Read the tree and the local logs, decide and delete without yielding to trio: no
        LeaderAndIsr or StopReplica runs in between. Partitions a LeaderAndIsr named since
        start are protected (their log may be newer than this tree); the tree only moves
        forward after the barrier, so reading it later than the barrier is never staler."""
        from trafka.metadata_quorum.tree import NoNodeError

        def children(path: str) -> list[str]:
            try:
                return list(quorum.children_local(path))
            except NoNodeError:
                return []

        def data(path: str) -> bytes | None:
            try:
                return bytes(quorum.get_local(path)[0])
            except NoNodeError:
                return None

        manager = self.log_manager
        assert manager is not None, "logs not open"
        topics, unreadable = read_tree_view(children, data)
        local = [
            LocalPartition(t, p, topic_id) for t, p, topic_id in manager.partitions_with_topic_ids()
        ]
        decision = find_stray_logs(
            self.node_id,
            local,
            topics,
            protected=frozenset(self.replica_manager.named_by_leader_and_isr),
            unreadable=unreadable,
        )
        if decision.skipped_empty_view:
            log.warning(
                "stray logs not checked: the tree has no topics but %d local logs exist",
                len(local),
            )
        for kept in decision.ambiguous:
            log.warning(
                "kept %s-%d: assigned to this node, but its topic id %s is not the tree's %s",
                kept.topic,
                kept.partition,
                kept.topic_id,
                topics[kept.topic].topic_id,
            )
        deleted = 0
        for stray in decision.stray:
            topic, partition = stray.partition.topic, stray.partition.partition
            partition_log = manager.get(topic, partition)
            where = partition_log.directory if partition_log is not None else "?"
            try:
                self.replica_manager.stop_replicas([(topic, partition)], delete=True)
            except Exception:
                log.exception("deleting stray log %s-%d failed", topic, partition)
                continue
            deleted += 1
            log.warning(
                "deleted stray log %s-%d (%s): %s", topic, partition, where, stray.reason.value
            )
        if unreadable:
            log.warning("stray-log check kept the logs of unreadable topics %s", sorted(unreadable))
        log.info(
            "stray-log check done: %d local logs, %d deleted, %d kept with another topic id",
            len(local),
            deleted,
            len(decision.ambiguous),
        )
        return decision

    async def _close(self) -> None:
        manager, self.log_manager = self.log_manager, None
        if manager is not None:
            try:
                manager.close()
            except Exception:
                log.exception("closing the logs failed")
        store, self.store = self.store, None
        if store is not None:
            await store.close()


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
