"""Replication quotas (KIP-73): rate arithmetic, throttled-replica lists, who is throttled,
and the leader side in the replica manager (a follower outside the ISR of a listed partition
gets no data while the leader quota is exceeded; in-sync followers and unlisted partitions
are never held back)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.quota.rate import Rate
from trafka.node.replication.follower import PartitionFollowerState
from trafka.node.replication.ids import BrokerId, LeaderEpoch, TopicPartition
from trafka.node.replication.replica_fetcher import ReplicaFetchers
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from trafka.node.replication.throttle import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    LONG_MAX,
    MIN_DELAY_MS,
    ReplicationQuota,
    ThrottledPartitions,
    ThrottleSettings,
    parse_throttled_replicas,
    settings_from_configs,
)
from trafka.node.topics import TopicManager

T0 = 1_000_000


# ---- the rate -------------------------------------------------------------------------------


def test_rate_divides_by_at_least_one_window() -> None:
    rate = Rate()
    rate.record(1000, T0)
    # Kafka's SimpleRate: max(elapsed, one window) -> 1000 B over 1 s, not over 0 ms.
    assert rate.per_second(T0) == pytest.approx(1000.0)
    assert rate.per_second(T0 + 500) == pytest.approx(1000.0)
    assert rate.per_second(T0 + 2000) == pytest.approx(500.0)


def test_rate_spans_the_samples_and_forgets_old_ones() -> None:
    rate = Rate(samples=3, window_size_ms=1000)
    for second in range(3):
        rate.record(3000, T0 + second * 1000)
    # three samples started at T0, T0+1s, T0+2s: 9000 B over 2.5 s
    assert rate.per_second(T0 + 2500) == pytest.approx(3600.0)
    # a fourth window overwrites the oldest sample
    rate.record(3000, T0 + 3000)
    assert rate.total(T0 + 3000) == 9000
    # all samples expire after samples * window
    assert rate.total(T0 + 3000 + 3000) == 0
    assert rate.per_second(T0 + 6000) == 0.0


def test_recording_into_a_full_window_starts_the_next_sample() -> None:
    rate = Rate(samples=11, window_size_ms=1000)
    rate.record(100, T0)
    rate.record(100, T0 + 999)
    rate.record(100, T0 + 1000)
    assert rate.total(T0 + 1000) == 300
    assert rate.window_ms(T0 + 1500) == 1500


# ---- the quota ------------------------------------------------------------------------------


def _quota(bound: int, **throttled: ThrottledPartitions) -> ReplicationQuota:
    quota = ReplicationQuota()
    quota.update(bound, dict(throttled))
    return quota


def test_quota_exceeded_only_above_the_bound() -> None:
    quota = _quota(1000)
    assert not quota.is_quota_exceeded(T0)
    quota.record(1000, T0)
    assert not quota.is_quota_exceeded(T0)  # equal to the bound is acceptable
    quota.record(1, T0)
    assert quota.is_quota_exceeded(T0)
    assert quota.is_quota_exceeded(T0 + 1000)
    assert not quota.is_quota_exceeded(T0 + 1001)


def test_unthrottled_default_is_never_exceeded() -> None:
    quota = ReplicationQuota()
    assert quota.bound_bytes_per_second == LONG_MAX
    quota.record(10**15, T0)
    assert not quota.is_quota_exceeded(T0)


def test_should_throttle_needs_listed_out_of_sync_and_exceeded() -> None:
    quota = _quota(1000, t=ThrottledPartitions(partitions=frozenset({0})))
    quota.record(5000, T0)
    assert quota.should_throttle("t", 0, in_sync=False, now_ms=T0)
    assert not quota.should_throttle("t", 0, in_sync=True, now_ms=T0)
    assert not quota.should_throttle("t", 1, in_sync=False, now_ms=T0)
    assert not quota.should_throttle("other", 0, in_sync=False, now_ms=T0)
    assert not quota.should_throttle("t", 0, in_sync=False, now_ms=T0 + 6000)


def test_a_throttled_stream_averages_the_bound() -> None:
    """Fetch 100 kB whenever the quota allows, polling every 10 ms for 10 s: the bytes
    moved stay within one fetch of rate * time (what the follower and leader loops do)."""
    bound = 250_000
    quota = _quota(bound, t=ThrottledPartitions(all_partitions=True))
    moved = 0
    for now_ms in range(T0, T0 + 10_000, 10):
        if not quota.should_throttle("t", 0, in_sync=False, now_ms=now_ms):
            quota.record(100_000, now_ms)
            moved += 100_000
    assert bound * 10 - 100_000 <= moved <= bound * 10 + 100_000


def test_delay_until_the_rate_falls_back() -> None:
    quota = _quota(1000)
    assert quota.delay_ms(T0, maximum_ms=1000) == MIN_DELAY_MS
    quota.record(3000, T0)
    # 3000 B need 3 s at 1000 B/s; the window already counts 1 s
    assert quota.delay_ms(T0, maximum_ms=10_000) == 2000
    assert quota.delay_ms(T0, maximum_ms=500) == 500
    assert quota.delay_ms(T0 + 1500, maximum_ms=10_000) == 1500
    assert not quota.is_quota_exceeded(T0 + 3000)


# ---- configs --------------------------------------------------------------------------------


def test_parse_keeps_the_partitions_naming_this_broker() -> None:
    parsed = parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, "0:1, 1:2,2:1", 1)
    assert parsed == ThrottledPartitions(partitions=frozenset({0, 2}))
    assert 2 in parsed and 1 not in parsed
    everything = parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, " * ", 7)
    assert everything.all_partitions and 12345 in everything
    assert parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, "", 1) == ThrottledPartitions()


@pytest.mark.parametrize("value", ["0:1,*", "a:1", "0-1", "0:1:2", "*,*", "0:"])
def test_malformed_lists_are_rejected_with_kafkas_message(value: str) -> None:
    with pytest.raises(ValueError, match="must be the literal '\\*' or a list of replicas"):
        parse_throttled_replicas(FOLLOWER_THROTTLED_REPLICAS, value, 1)
    with pytest.raises(ValueError, match="must be the literal"):
        LogConfig.from_properties({FOLLOWER_THROTTLED_REPLICAS: value})


def test_log_config_accepts_the_throttle_lists() -> None:
    config = LogConfig.from_properties(
        {LEADER_THROTTLED_REPLICAS: "0:1,1:2", FOLLOWER_THROTTLED_REPLICAS: "*"}
    )
    assert config == LogConfig()


def test_settings_from_the_tree_values() -> None:
    settings = settings_from_configs(
        2,
        {LEADER_THROTTLED_RATE: "1000", FOLLOWER_THROTTLED_RATE: "2000", "other": "x"},
        {
            "moving": {LEADER_THROTTLED_REPLICAS: "0:1,1:1", FOLLOWER_THROTTLED_REPLICAS: "0:2"},
            "all": {LEADER_THROTTLED_REPLICAS: "*"},
            "bad": {LEADER_THROTTLED_REPLICAS: "nonsense"},
            "plain": {"retention.ms": "1000"},
        },
    )
    assert settings.leader_rate_bytes_per_second == 1000
    assert settings.follower_rate_bytes_per_second == 2000
    assert dict(settings.leader_partitions) == {"all": ThrottledPartitions(all_partitions=True)}
    assert dict(settings.follower_partitions) == {
        "moving": ThrottledPartitions(partitions=frozenset({0}))
    }
    layered = settings_from_configs(
        2,
        {LEADER_THROTTLED_RATE: "1000", FOLLOWER_THROTTLED_RATE: "bad"},
        {},
        default_broker_config={LEADER_THROTTLED_RATE: "5", FOLLOWER_THROTTLED_RATE: "7"},
    )
    assert layered.leader_rate_bytes_per_second == 1000  # the broker's own value wins
    assert layered.follower_rate_bytes_per_second == 7  # else the <default> entity
    unset = settings_from_configs(2, {}, {})
    assert unset.leader_rate_bytes_per_second == LONG_MAX
    assert unset.follower_rate_bytes_per_second == LONG_MAX


# ---- the leader side in the replica manager ------------------------------------------------

NOW = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now_ms = NOW

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


async def _leader(
    tmp_path: Path, store: MetadataStore, isr: tuple[int, ...]
) -> tuple[ReplicaManager, Clock]:
    topics = TopicManager(
        store,
        node_id=1,
        live_brokers=lambda: [1, 2],
        validate_configs=lambda _configs: None,
        rng=random.Random(1),
    )
    for name in ("moving", "still"):
        await topics.create(name, {0: [1, 2]}, {})
    logs = LocalLogs([tmp_path / "logs"], LogConfig(), now_ms=NOW, node_id=1, cluster_id="c")
    clock = Clock()
    manager = ReplicaManager(
        node_id=1,
        topics=topics,
        log_manager=logs,
        log_config_for=lambda _topic: LogConfig(),
        store=store,
        isr_writes=TreeIsrWrites(store),
        clock=SimpleNamespace(now_ms=clock),
    )
    manager.apply_leader_and_isr(
        [PartitionStateUpdate(name, 0, 1, 1, 1, isr, 0, (1, 2)) for name in ("moving", "still")]
    )
    for name in ("moving", "still"):
        log = manager.get_or_create_log(name, 0)
        for _ in range(4):
            log.append_as_leader(
                build_batch([NewRecord(b"x" * 1000, timestamp=NOW)]), leader_epoch=1, now_ms=NOW
            )
    manager.apply_throttle_settings(
        ThrottleSettings(
            leader_rate_bytes_per_second=1000,
            leader_partitions={"moving": ThrottledPartitions(partitions=frozenset({0}))},
        )
    )
    return manager, clock


def _fetch(manager: ReplicaManager, topic: str, replica_id: int = 2) -> int:
    result = manager.read(topic, 0, 0, max_bytes=1 << 20, isolation_level=0, replica_id=replica_id)
    assert result.error_code == 0
    return result.size


async def test_out_of_sync_follower_is_held_back_once_the_quota_is_exceeded(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager, clock = await _leader(tmp_path, store, isr=(1,))
    size = _fetch(manager, "moving")
    assert size > 1000  # nothing recorded yet: the first fetch is served
    manager.record_leader_throttled_bytes([("moving", 0, size), ("still", 0, 5000)])
    assert manager.leader_quota.rate.total(clock.now_ms) == size  # unlisted bytes not counted
    assert _fetch(manager, "moving") == 0
    assert _fetch(manager, "still") > 0  # unlisted partitions are never throttled
    clock.now_ms += size  # size bytes at 1000 B/s: the rate is back at the bound
    assert _fetch(manager, "moving") == size


async def test_in_sync_follower_is_never_held_back(tmp_path: Path, store: MetadataStore) -> None:
    manager, clock = await _leader(tmp_path, store, isr=(1, 2))
    size = _fetch(manager, "moving")
    manager.record_leader_throttled_bytes([("moving", 0, size)])
    assert manager.leader_quota.is_quota_exceeded(clock.now_ms)
    assert _fetch(manager, "moving") == size


# ---- the follower side in the replica fetcher ----------------------------------------------


class _FollowerSide:
    """What the fetchers use of the replica manager here: its follower quota."""

    def __init__(self) -> None:
        self.follower_quota = ReplicationQuota()


def test_follower_leaves_out_listed_out_of_sync_partitions_while_over_the_quota() -> None:
    side = _FollowerSide()
    fetchers = ReplicaFetchers(node_id=2, replica_manager=side, endpoint_for=lambda _b: None)
    states = {
        TopicPartition(topic, 0): PartitionFollowerState.become_follower(
            TopicPartition(topic, 0), BrokerId(1), LeaderEpoch(1)
        )
        for topic in ("moving", "caught-up", "still")
    }
    caught_up = TopicPartition("caught-up", 0)
    side.follower_quota.update(
        1000,
        {
            "moving": ThrottledPartitions(all_partitions=True),
            "caught-up": ThrottledPartitions(all_partitions=True),
        },
    )
    fetchers.lag[caught_up] = 0  # fetched up to the leader's HW: in sync
    assert set(fetchers._unthrottled(states, NOW)) == set(states)  # under the quota
    side.follower_quota.record(5000, NOW)
    assert set(fetchers._unthrottled(states, NOW)) == {caught_up, TopicPartition("still", 0)}
    fetchers.lag[caught_up] = 7  # fell behind: throttled like any out-of-sync replica
    assert set(fetchers._unthrottled(states, NOW)) == {TopicPartition("still", 0)}
    assert set(fetchers._unthrottled(states, NOW + 5000)) == set(states)
