"""A node's services over a shared in-memory tree, built the way `Broker._serve` builds them,
without a listener or a controller: for tests of what one broker does with the tree."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.node.controller_loop import ControllerHarness
from trafka.log.config import LogConfig
from trafka.node.config.broker import BrokerConfig
from trafka.node.config.changes import Entity
from trafka.node.config.service import ConfigEntry, ConfigService, ConfigTransform
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import LocalTreeReads, MetadataStore
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.stray_log_cleanup import StrayLogCleanup
from trafka.node.stray_logs import StrayDecision
from trafka.node.topics import TopicManager


class NodeUnderTest:
    def __init__(
        self,
        store: MetadataStore,
        node_id: int,
        data_dir: Path,
        *,
        live_brokers: Callable[[], list[int]],
        cluster_id: str = "c",
        log_config_for: Callable[[str], LogConfig] | None = None,
        controller: ControllerHarness | None = None,
    ) -> None:
        """With `controller`, the topic cache is one the running controller keeps current
        (its writes return once the controller carried them out)."""
        self.store = store
        self.node_id = node_id
        config = BrokerConfig.build(node_id)

        def validate(overrides: Mapping[str, str]) -> None:
            self.configs.validate_topic_configs(overrides)

        self.topics: TopicManager = (
            TopicManager(
                store,
                node_id=node_id,
                live_brokers=live_brokers,
                validate_configs=validate,
                rng=random.Random(node_id),
            )
            if controller is None
            else controller.topics(
                node_id=node_id,
                live_brokers=live_brokers,
                validate_configs=validate,
                rng=random.Random(node_id),
            )
        )
        self.log_manager = LocalLogs(
            [data_dir],
            LogConfig.from_properties(config.topic_defaults()),
            now_ms=0,
            node_id=node_id,
            cluster_id=cluster_id,
        )
        self.configs = ConfigService(
            store=store, node_id=node_id, config=config, topics=self.topics, logs=self.log_manager
        )
        self.replica_manager = ReplicaManager(
            node_id=node_id,
            topics=self.topics,
            log_manager=self.log_manager,
            log_config_for=log_config_for or self.configs.log_config_for,
            store=store,
            isr_writes=TreeIsrWrites(store),
        )
        self.configs.on_throttles.append(self.replica_manager.refresh_throttles)
        self._cleanup = StrayLogCleanup(
            store=store, node_id=node_id, logs=self.log_manager, replicas=self.replica_manager
        )

    # ---- what the tests ask, under the names a broker used to have ---------------------------
    @property
    def config(self) -> BrokerConfig:
        return self.configs.config

    @property
    def _log_configs(self) -> Mapping[str, object]:
        return self.configs._log_configs

    def log_config_for(self, topic: str) -> LogConfig:
        return self.configs.log_config_for(topic)

    async def alter_configs(
        self, resource_type: int, name: str, transform: ConfigTransform, *, validate_only: bool
    ) -> tuple[int, str | None]:
        return await self.configs.alter_configs(
            resource_type, name, transform, validate_only=validate_only
        )

    async def set_broker_configs(self, configs: Mapping[str, str | None]) -> None:
        await self.configs.set_broker_configs(configs)

    async def apply_config_change(self, entity: Entity) -> None:
        await self.configs.apply_config_change(entity)

    async def rescan_configs(self) -> None:
        await self.configs.rescan_configs()

    def describe_default_broker_configs(self) -> list[ConfigEntry]:
        return self.configs.describe_default_broker_configs()

    def delete_stray_logs(self, tree: LocalTreeReads) -> StrayDecision:
        return self._cleanup.delete_stray_logs(tree)
