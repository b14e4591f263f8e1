"""Config change notifications (Kafka's ZK-mode `/config/changes`): the pure cursor and
bounds, the listener over a real znode tree, and a broker applying a change that another
broker wrote (its topic cache, LogConfig cache, open logs and dynamic broker config)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.node.nodes import NodeUnderTest
from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import (
    Create,
    Delete,
    Entry,
    ErrorResult,
    NoNodeError,
    SetData,
    Stat,
    WatchEvent,
    WatchManager,
    ZNodeTree,
)
from trafka.node.config.broker import BrokerConfig, ConfigSource
from trafka.node.config.changes import (
    DEFAULT_BROKER_ENTITY,
    ConfigChangeListener,
    Entity,
    EntityType,
    NotificationCursor,
    broker_entity_path,
    expired_notifications,
    notification_sequence,
    parse_entity_path,
    topic_entity_path,
)
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.describe_configs import refresh_topic_from_tree
from trafka.node.metadata_store import MetadataStore, memory_store

MINUTE_MS = 60_000


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


def child(sequence: int) -> str:
    return f"{znodes.CONFIG_CHANGE_PREFIX}{sequence:010d}"


# ---- pure helpers ---------------------------------------------------------------------------


def test_entity_paths_round_trip_and_malformed_paths_are_ignored() -> None:
    assert parse_entity_path(topic_entity_path("orders")) == Entity(EntityType.TOPICS, "orders")
    assert parse_entity_path(broker_entity_path(3)) == Entity(EntityType.BROKERS, "3")
    assert parse_entity_path(broker_entity_path(DEFAULT_BROKER_ENTITY)) == Entity(
        EntityType.BROKERS, "<default>"
    )
    # Quota entities (Kafka's ZooKeeper mode): applied by the quota service.
    assert parse_entity_path("users/alice") == Entity(EntityType.USERS, "alice")
    assert parse_entity_path("users/<default>/clients/c1") == Entity(
        EntityType.USERS, "<default>/clients/c1"
    )
    assert parse_entity_path("clients/c1") == Entity(EntityType.CLIENTS, "c1")
    assert parse_entity_path("ips/10.0.0.1") == Entity(EntityType.IPS, "10.0.0.1")
    for ignored in (
        "topics",
        "topics/",
        "topics/a/b",
        "",
        "users/a/topics/b",
        "users/a/clients/",
        "clients/a/clients/b",
        "sessions/x",
    ):
        assert parse_entity_path(ignored) is None


def test_notification_sequence_reads_only_config_change_children() -> None:
    assert notification_sequence(child(42)) == 42
    assert notification_sequence("config_change_") is None
    assert notification_sequence("config_change_12x") is None
    assert notification_sequence("isr_change_0000000001") is None


def test_expired_notifications_by_age_and_by_count() -> None:
    now_ms = 100 * MINUTE_MS
    entries = [
        (child(1), now_ms - 16 * MINUTE_MS),  # older than 15 minutes
        (child(2), now_ms - 15 * MINUTE_MS),  # exactly 15 minutes: kept (Kafka: older than)
        (child(3), now_ms - MINUTE_MS),
        ("unrelated", 0),  # never ours to delete
    ]
    assert expired_notifications(entries, now_ms=now_ms) == [child(1)]
    # Beyond the count bound the oldest go first, whatever their age.
    fresh = [(child(n), now_ms) for n in (7, 5, 6, 9, 8)]
    assert expired_notifications(fresh, now_ms=now_ms, max_count=3) == [child(5), child(6)]
    assert expired_notifications([], now_ms=now_ms) == []


def test_cursor_rescans_first_then_yields_each_new_notification_once_in_order() -> None:
    cursor = NotificationCursor(rescan_interval_ms=30_000)
    first = cursor.next_pass([child(3), child(1)], now_ms=0)
    assert first.rescan and first.notifications == () and first.purge
    # Up to child 3 is covered by the rescan.
    nothing = cursor.next_pass([child(1), child(3)], now_ms=10)
    assert not nothing.rescan and nothing.notifications == () and not nothing.purge
    later = cursor.next_pass([child(1), child(3), child(5), child(4), "junk"], now_ms=20)
    assert later.notifications == (child(4), child(5)) and not later.rescan and later.purge
    # Purged children (gaps) never move the cursor back.
    assert cursor.next_pass([child(5)], now_ms=30).notifications == ()
    assert cursor.next_pass([child(6)], now_ms=40).notifications == (child(6),)
    assert cursor.last_sequence == 6


def test_cursor_rescans_periodically_and_on_request() -> None:
    cursor = NotificationCursor(rescan_interval_ms=30_000)
    assert cursor.next_pass([], now_ms=1_000).rescan
    assert not cursor.next_pass([], now_ms=30_999).rescan
    periodic = cursor.next_pass([child(0)], now_ms=31_000)
    assert periodic.rescan and periodic.notifications == ()
    assert not cursor.next_pass([child(0)], now_ms=31_001).rescan
    cursor.request_rescan()
    assert cursor.next_pass([child(0)], now_ms=31_002).rescan
    assert cursor.next_pass([child(0), child(1)], now_ms=31_003).notifications == (child(1),)


# ---- the listener over a real ZNodeTree -----------------------------------------------------


class LocalReplica:
    """The surface of `MetadataQuorum` the listener uses, over a real tree and watches."""

    def __init__(self) -> None:
        self.tree = ZNodeTree()
        self.watches = WatchManager()
        self.now_ms = 0
        for path in ("/config", znodes.CONFIG_CHANGES, znodes.CONFIG_TOPICS):
            self.apply(Create(path))

    def apply(self, op: Create | Delete | SetData) -> list[WatchEvent]:
        applied = self.tree.apply(Entry("", 0, self.now_ms, op))
        assert not isinstance(applied.result, ErrorResult), applied.result
        return self.watches.trigger(applied.zxid, applied.changes)

    def notify(self, entity_path: str) -> list[WatchEvent]:
        notification = znodes.ConfigChangeNotification(entity_path).to_json()
        return self.apply(Create(znodes.config_change_sequence_prefix(), notification, False, True))

    def children_local(self, path: str, *, watch: bool = False) -> list[str]:
        names = self.tree.children(path)
        if watch:
            self.watches.add_child_watch(path)
        return names

    def get_local(self, path: str) -> tuple[bytes, Stat]:
        return self.tree.get(path)

    def exists_local(self, path: str) -> Stat | None:
        return self.tree.exists(path)

    async def delete(self, path: str) -> None:
        if self.tree.exists(path) is None:
            raise NoNodeError(path)
        self.apply(Delete(path))


class Recorder:
    def __init__(self) -> None:
        self.applied: list[Entity] = []
        self.rescans = 0

    async def apply(self, entity: Entity) -> None:
        self.applied.append(entity)

    async def rescan(self) -> None:
        self.rescans += 1


def make_listener(replica: LocalReplica, recorder: Recorder) -> ConfigChangeListener:
    return ConfigChangeListener(
        replica, apply=recorder.apply, rescan=recorder.rescan, now_ms=lambda: replica.now_ms
    )


async def test_listener_applies_notified_entities_and_its_watch_fires() -> None:
    replica, recorder = LocalReplica(), Recorder()
    replica.notify(topic_entity_path("before-start"))
    listener = make_listener(replica, recorder)
    assert (await listener.run_once()).rescan
    assert recorder.rescans == 1 and recorder.applied == []
    fired = replica.notify(topic_entity_path("orders"))
    replica.notify("users/alice")  # a quota entity: the quota service applies it
    replica.notify("sessions/x")  # not an entity: read and ignored
    replica.notify(broker_entity_path(DEFAULT_BROKER_ENTITY))
    assert [event.path for event in fired] == [znodes.CONFIG_CHANGES]
    step = await listener.run_once()
    assert len(step.notifications) == 4
    applied = [
        Entity(EntityType.TOPICS, "orders"),
        Entity(EntityType.USERS, "alice"),
        Entity(EntityType.BROKERS, "<default>"),
    ]
    assert recorder.applied == applied
    assert (await listener.run_once()).notifications == ()
    assert recorder.applied == applied


async def test_listener_purges_expired_notifications_and_survives_a_failing_apply() -> None:
    replica, recorder = LocalReplica(), Recorder()
    listener = make_listener(replica, recorder)
    listener.cursor = NotificationCursor(rescan_interval_ms=60 * MINUTE_MS)
    await listener.run_once()
    replica.notify(topic_entity_path("old"))
    replica.now_ms = 16 * MINUTE_MS
    replica.notify(topic_entity_path("new"))

    async def failing(entity: Entity) -> None:
        recorder.applied.append(entity)
        raise RuntimeError("boom")

    listener._apply = failing
    await listener.run_once()  # applies both (errors logged), then purges the old one
    assert [e.name for e in recorder.applied] == ["old", "new"]
    assert replica.children_local(znodes.CONFIG_CHANGES) == [child(1)]


# ---- a broker applying a change written through another broker ------------------------------


def make_broker(tmp_path: Path, store: MetadataStore, node_id: int) -> NodeUnderTest:
    return NodeUnderTest(store, node_id, tmp_path / f"logs-{node_id}", live_brokers=lambda: [1, 2])


async def notified_entities(store: MetadataStore) -> list[Entity]:
    entities = []
    for name in await store.children(znodes.CONFIG_CHANGES):
        raw = await store.get(f"{znodes.CONFIG_CHANGES}/{name}")
        assert raw is not None
        entity = parse_entity_path(znodes.ConfigChangeNotification.from_json(raw).entity_path)
        assert entity is not None
        entities.append(entity)
    return entities


async def test_topic_config_written_elsewhere_reaches_cache_and_open_logs(
    tmp_path: Path, store: MetadataStore
) -> None:
    writer, leader = make_broker(tmp_path, store, 1), make_broker(tmp_path, store, 2)
    await writer.topics.create("orders", {0: [2, 1]}, {})
    await leader.topics.load()
    partition_log = leader.log_manager.get_or_create(
        "orders", 0, config=leader.log_config_for("orders")
    )
    assert leader.log_config_for("orders").min_insync_replicas == 1

    code, _ = await writer.alter_configs(
        2,
        "orders",
        lambda _: {"min.insync.replicas": "2", "retention.ms": "5000"},
        validate_only=False,
    )
    assert code == 0
    entity = Entity(EntityType.TOPICS, "orders")
    assert await notified_entities(store) == [entity]
    # Until the notification is applied the leader still has the old config ...
    assert leader.log_config_for("orders").min_insync_replicas == 1
    await leader.apply_config_change(entity)
    # ... afterwards its cache, its LogConfig and its open log all have the new one.
    assert dict(leader.topics.topics["orders"].configs) == {
        "min.insync.replicas": "2",
        "retention.ms": "5000",
    }
    assert leader.log_config_for("orders").min_insync_replicas == 2
    assert partition_log.config.retention_ms == 5000
    # Applying again (the writer's own notification, a rescan) changes nothing.
    cached = leader.log_config_for("orders")
    await leader.rescan_configs()
    assert leader.log_config_for("orders") is cached
    leader.log_manager.close()


async def test_cluster_default_broker_config_reaches_every_broker(
    tmp_path: Path, store: MetadataStore
) -> None:
    writer, other = make_broker(tmp_path, store, 1), make_broker(tmp_path, store, 2)
    await writer.topics.create("orders", {0: [2, 1]}, {})
    await other.topics.load()
    code, _ = await writer.alter_configs(
        4, "", lambda _: {"log.retention.ms": "7000"}, validate_only=False
    )
    assert code == 0
    assert await notified_entities(store) == [Entity(EntityType.BROKERS, DEFAULT_BROKER_ENTITY)]
    assert writer.config.get("log.retention.ms") == 7000
    await other.apply_config_change(Entity(EntityType.BROKERS, DEFAULT_BROKER_ENTITY))
    assert other.config.get("log.retention.ms") == 7000
    assert other.config.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert other.log_config_for("orders").retention_ms == 7000
    assert [e.name for e in other.describe_default_broker_configs()] == ["log.retention.ms"]
    # A per-broker value beats the cluster default (Kafka's precedence).
    code, _ = await other.alter_configs(
        4, "2", lambda _: {"log.retention.ms": "9000"}, validate_only=False
    )
    assert code == 0
    assert other.config.get("log.retention.ms") == 9000
    assert other.config.source("log.retention.ms") is ConfigSource.DYNAMIC_BROKER_CONFIG
    # Broker 1 ignores broker 2's own entity.
    await writer.apply_config_change(Entity(EntityType.BROKERS, "2"))
    assert writer.config.get("log.retention.ms") == 7000


def test_cluster_default_beats_static_config() -> None:
    config = BrokerConfig.build(1, {"log.retention.ms": "1000"})
    layered = config.with_dynamic({}, {"log.retention.ms": 2000})
    assert layered.get("log.retention.ms") == 2000
    assert layered.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert (
        config.with_dynamic({"log.retention.ms": 3000}, {"log.retention.ms": 2000}).get(
            "log.retention.ms"
        )
        == 3000
    )


async def test_a_broker_that_has_not_heard_of_the_topic_yet_alters_it(
    tmp_path: Path, store: MetadataStore
) -> None:
    """AlterConfigs on a broker whose cache lags the controller (a broker that just started):
    the handler reads the topic from the tree first, as Kafka asks ZooKeeper."""
    creator, late = make_broker(tmp_path, store, 1), make_broker(tmp_path, store, 2)
    await creator.topics.create("orders", {0: [1]}, {})
    assert late.topics.get("orders") is None
    ctx = cast(RequestContext, SimpleNamespace(services=late))
    await refresh_topic_from_tree(ctx, [(2, "orders"), (2, "no-such-topic")])
    code, _ = await late.alter_configs(
        2, "orders", lambda _: {"retention.ms": "1000"}, validate_only=False
    )
    assert code == 0
    assert late.topics.get("no-such-topic") is None
    await creator.apply_config_change(Entity(EntityType.TOPICS, "orders"))
    assert creator.log_config_for("orders").retention_ms == 1000
