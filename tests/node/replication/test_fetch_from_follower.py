"""Fetch from follower (KIP-392): the rack-aware selector, the leader's redirect, and a
follower serving consumers up to its high watermark (Kafka's ReplicaManager rules)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)
from trafka.node.replication.leader import PartitionLeaderState
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from trafka.node.replication.replica_selector import (
    RACK_AWARE_SELECTOR,
    ReplicaView,
    UnknownReplicaSelector,
    check_selector_class,
    preferred_read_replica,
    rack_aware_select,
)
from trafka.node.topics import TopicManager

NOW = 1_700_000_000_000
RACKS = {1: "a", 2: "b", 3: "c"}
TOPIC = "ffl"


# ---- the selector (pure) --------------------------------------------------------------------
def _state(isr: tuple[int, ...] = (1, 2, 3), log_end: int = 10) -> PartitionLeaderState:
    state = PartitionLeaderState.become_leader(
        TopicPartition(TOPIC, 0),
        BrokerId(1),
        leader_epoch=LeaderEpoch(3),
        controller_epoch=ControllerEpoch(1),
        replicas=(BrokerId(1), BrokerId(2), BrokerId(3)),
        isr=tuple(BrokerId(b) for b in isr),
        zk_version=ZkVersion(0),
        log_end_offset=Offset(log_end),
        high_watermark=Offset(0),
        now_ms=NOW,
    )
    for broker in (2, 3):
        state.on_follower_fetch(BrokerId(broker), Offset(log_end), NOW)
    return state


def _choose(state: PartitionLeaderState, rack: str, **overrides: object) -> int | None:
    arguments: dict[str, object] = {
        "selector": RACK_AWARE_SELECTOR,
        "client_rack": rack,
        "fetch_offset": 5,
        "leader_log_end_offset": 10,
        "racks": RACKS,
        "now_ms": NOW,
    }
    arguments.update(overrides)
    return preferred_read_replica(state, **arguments)  # type: ignore[arg-type]


def test_a_client_in_a_followers_rack_is_sent_to_that_follower() -> None:
    state = _state()
    assert _choose(state, "b") == 2
    assert _choose(state, "c") == 3


def test_the_leader_serves_its_own_rack_no_rack_and_unknown_racks() -> None:
    state = _state()
    assert _choose(state, "a") is None
    assert _choose(state, "") is None
    assert _choose(state, "z") is None


def test_without_a_selector_every_client_reads_from_the_leader() -> None:
    assert _choose(_state(), "b", selector=None) is None


def test_followers_outside_the_isr_or_behind_the_fetch_offset_or_dead_are_not_chosen() -> None:
    assert _choose(_state(isr=(1, 3)), "b") is None
    assert _choose(_state(), "b", fetch_offset=11) is None
    assert _choose(_state(), "b", racks={1: "a", 3: "c"}) is None


def test_rack_aware_select_prefers_the_most_caught_up_then_the_most_recent() -> None:
    leader = ReplicaView(1, "a", 10, 0)
    behind = ReplicaView(2, "b", 8, 0)
    ahead = ReplicaView(3, "b", 9, 500)
    assert rack_aware_select("b", leader, [leader, behind, ahead]) == ahead
    stale = ReplicaView(2, "b", 9, 900)
    assert rack_aware_select("b", leader, [leader, stale, ahead]) == ahead


def test_only_kafkas_rack_aware_selector_class_is_accepted() -> None:
    assert check_selector_class(None) is None
    assert check_selector_class("") is None
    assert check_selector_class(RACK_AWARE_SELECTOR) == RACK_AWARE_SELECTOR
    with pytest.raises(UnknownReplicaSelector):
        check_selector_class("com.example.MySelector")


# ---- the replica manager: leader redirect, follower reads ----------------------------------
@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


async def _manager(tmp_path: Path, store: MetadataStore, node_id: int) -> ReplicaManager:
    topics = TopicManager(
        store,
        node_id=node_id,
        live_brokers=lambda: [1, 2, 3],
        validate_configs=lambda _configs: None,
        rng=random.Random(1),
    )
    if topics.get(TOPIC) is None:
        await topics.create(TOPIC, {0: [1, 2, 3]}, {})
    logs = LocalLogs(
        [tmp_path / f"logs-{node_id}"], LogConfig(), now_ms=NOW, node_id=node_id, cluster_id="c"
    )
    manager = ReplicaManager(
        node_id=node_id,
        topics=topics,
        log_manager=logs,
        log_config_for=lambda _topic: LogConfig(),
        store=store,
        isr_writes=TreeIsrWrites(store),
        clock=SimpleNamespace(now_ms=lambda: NOW),
    )
    manager.apply_leader_and_isr([PartitionStateUpdate(TOPIC, 0, 1, 1, 4, (1, 2, 3), 0, (1, 2, 3))])
    manager.replica_selector = RACK_AWARE_SELECTOR
    manager.broker_racks = lambda: RACKS
    return manager


def _append(manager: ReplicaManager, count: int) -> None:
    log = manager.get_or_create_log(TOPIC, 0)
    for _ in range(count):
        log.append_as_leader(
            build_batch([NewRecord(b"x" * 100, timestamp=NOW)]), leader_epoch=4, now_ms=NOW
        )


def _read(manager: ReplicaManager, offset: int, **kwargs: object) -> object:
    arguments: dict[str, object] = {"max_bytes": 1 << 20, "isolation_level": 0}
    arguments.update(kwargs)
    return manager.read(TOPIC, 0, offset, **arguments)  # type: ignore[arg-type]


async def test_the_leader_names_the_follower_and_sends_no_records(
    tmp_path: Path, store: MetadataStore
) -> None:
    leader = await _manager(tmp_path, store, 1)
    for _ in range(4):
        batch = build_batch([NewRecord(b"x" * 100, timestamp=NOW)])
        assert leader.append_records(TOPIC, 0, batch, required_acks=1).error_code == 0  # type: ignore[union-attr]
    leader.follower_fetched(TOPIC, 0, 2, 4)
    leader.follower_fetched(TOPIC, 0, 3, 4)
    redirected = _read(leader, 0, client_rack="b")
    assert redirected.preferred_read_replica == 2  # type: ignore[attr-defined]
    assert redirected.size == 0 and redirected.error_code == 0  # type: ignore[attr-defined]
    assert redirected.high_watermark == 4  # type: ignore[attr-defined]
    own_rack = _read(leader, 0, client_rack="a")
    assert own_rack.preferred_read_replica == -1 and own_rack.size > 0  # type: ignore[attr-defined]
    old_version = _read(leader, 0)  # Fetch v10 and older: no client metadata
    assert old_version.preferred_read_replica == -1 and old_version.size > 0  # type: ignore[attr-defined]


async def test_a_follower_serves_consumers_v11_up_to_its_high_watermark(
    tmp_path: Path, store: MetadataStore
) -> None:
    follower = await _manager(tmp_path, store, 2)
    assert TopicPartition(TOPIC, 0) in follower.followers
    _append(follower, 4)  # as if fetched from the leader
    follower.get_or_create_log(TOPIC, 0).update_high_watermark(2)
    served = _read(follower, 0, client_rack="b")
    assert served.error_code == 0 and served.high_watermark == 2  # type: ignore[attr-defined]
    assert 0 < served.size < 400  # type: ignore[attr-defined]  # two of the four batches
    assert _read(follower, 2, client_rack="b").size == 0  # type: ignore[attr-defined]
    assert _read(follower, 3, client_rack="b").error_code == 0  # type: ignore[attr-defined]
    out_of_range = _read(follower, 5, client_rack="b")
    assert out_of_range.error_code == ErrorCode.offset_out_of_range  # type: ignore[attr-defined]
    fenced = _read(follower, 0, client_rack="b", current_leader_epoch=3)
    assert fenced.error_code == ErrorCode.fenced_leader_epoch  # type: ignore[attr-defined]
    unknown = _read(follower, 0, client_rack="b", current_leader_epoch=5)
    assert unknown.error_code == ErrorCode.unknown_leader_epoch  # type: ignore[attr-defined]
    assert _read(follower, 0, client_rack="b", current_leader_epoch=4).size > 0  # type: ignore[attr-defined]
    old_version = _read(follower, 0)
    assert old_version.error_code == ErrorCode.not_leader_or_follower  # type: ignore[attr-defined]
    assert follower.metrics.bytes_out[TOPIC] > 0


async def test_list_offsets_and_epochs_stay_with_the_leader_except_debugging(
    tmp_path: Path, store: MetadataStore
) -> None:
    follower = await _manager(tmp_path, store, 2)
    _append(follower, 4)
    follower.get_or_create_log(TOPIC, 0).update_high_watermark(2)
    consumer = follower.list_offset(TOPIC, 0, -1, isolation_level=0)
    assert consumer.error_code == ErrorCode.not_leader_or_follower
    debugging = follower.list_offset(TOPIC, 0, -1, isolation_level=0, debugging=True)
    assert (debugging.error_code, debugging.offset) == (0, 4)
    code, _, _ = follower.end_offset_for_epoch(TOPIC, 0, 4)
    assert code == ErrorCode.not_leader_or_follower
