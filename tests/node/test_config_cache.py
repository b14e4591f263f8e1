"""ConfigService.log_config_for caches each topic's effective LogConfig (the Produce path asks on
every request) and a config change through the normal paths (AlterConfigs on the topic,
broker dynamic configs, topic deletion and re-creation) is visible to the next lookup."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from tests.node.controller_loop import ControllerHarness, running_controller
from tests.node.nodes import NodeUnderTest
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.topics import TopicManager


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


@pytest.fixture
async def controller(store: MetadataStore) -> AsyncIterator[ControllerHarness]:
    async with running_controller(store) as harness:
        yield harness


def make_broker(
    tmp_path: Path, store: MetadataStore, controller: ControllerHarness | None = None
) -> NodeUnderTest:
    return NodeUnderTest(
        store, 1, tmp_path / "logs", live_brokers=lambda: [1], controller=controller
    )


def set_to(values: Mapping[str, str]) -> object:
    def transform(current: dict[str, str | None]) -> Mapping[str, str | None]:
        return {**current, **values}

    return transform


async def test_repeated_lookups_return_the_same_config(
    tmp_path: Path, store: MetadataStore
) -> None:
    broker = make_broker(tmp_path, store)
    await broker.topics.create("orders", {0: [1]}, {"retention.ms": "1000"})
    first = broker.log_config_for("orders")
    assert first.retention_ms == 1000
    assert all(broker.log_config_for("orders") is first for _ in range(100))


async def test_topic_alter_configs_takes_effect_for_the_next_append(
    tmp_path: Path, store: MetadataStore
) -> None:
    broker = make_broker(tmp_path, store)
    await broker.topics.create("orders", {0: [1]}, {})
    replica_manager = broker.replica_manager
    assert replica_manager._min_insync_replicas("orders") == 1
    code, message = await broker.alter_configs(
        2, "orders", set_to({"min.insync.replicas": "2"}), validate_only=False
    )
    assert (code, message) == (0, None)
    assert replica_manager._min_insync_replicas("orders") == 2
    assert broker.log_config_for("orders") is broker.log_config_for("orders")


async def test_broker_dynamic_config_change_reaches_topic_configs(
    tmp_path: Path, store: MetadataStore
) -> None:
    broker = make_broker(tmp_path, store)
    await broker.topics.create("orders", {0: [1]}, {})
    before = broker.log_config_for("orders")
    await broker.set_broker_configs({"log.retention.ms": "5000"})
    after = broker.log_config_for("orders")
    assert after is not before
    assert after.retention_ms == 5000


async def test_recreated_topic_gets_its_new_configs(
    tmp_path: Path, store: MetadataStore, controller: ControllerHarness
) -> None:
    broker = make_broker(tmp_path, store, controller)
    await broker.topics.create("orders", {0: [1]}, {"retention.ms": "1000"})
    assert broker.log_config_for("orders").retention_ms == 1000
    await broker.topics.delete("orders")
    assert "orders" not in broker._log_configs
    await broker.topics.create("orders", {0: [1]}, {"retention.ms": "2000"})
    assert broker.log_config_for("orders").retention_ms == 2000


async def test_refresh_from_the_tree_is_seen_without_the_listener(
    tmp_path: Path, store: MetadataStore
) -> None:
    broker = make_broker(tmp_path, store)
    await broker.topics.create("orders", {0: [1]}, {"retention.ms": "1000"})
    assert broker.log_config_for("orders").retention_ms == 1000
    # Another node's AlterConfigs: the tree changes, this node reloads its view.
    assert broker.store is not None
    other = TopicManager(
        broker.store,
        node_id=2,
        live_brokers=lambda: [1],
        validate_configs=broker.configs.validate_topic_configs,
    )
    await other.load()
    await other.set_configs("orders", {"retention.ms": "3000"})
    broker.topics.listeners.clear()
    await broker.topics.load()
    assert broker.log_config_for("orders").retention_ms == 3000
