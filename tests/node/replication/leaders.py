"""A replica manager leading partitions on node 1 (replicas and ISR 1, 2), for tests that
drive its reads and appends directly; its clock is `now_ms` (fixed unless given)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from trafka.log.config import LogConfig
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from trafka.node.topics import TopicManager

NOW = 1_700_000_000_000


async def leading(
    tmp_path: Path,
    store: MetadataStore,
    topic: str,
    partitions: int = 1,
    *,
    now_ms: Callable[[], int] = lambda: NOW,
    replica_lag_time_max_ms: int = 30_000,
) -> ReplicaManager:
    """Node 1 leads `topic`-0..partitions-1 (leader epoch 1)."""
    topics = TopicManager(
        store,
        node_id=1,
        live_brokers=lambda: [1, 2],
        validate_configs=lambda _configs: None,
        rng=random.Random(1),
    )
    await topics.create(topic, {p: [1, 2] for p in range(partitions)}, {})
    logs = LocalLogs([tmp_path / "logs"], LogConfig(), now_ms=NOW, node_id=1, cluster_id="c")
    manager = ReplicaManager(
        node_id=1,
        topics=topics,
        log_manager=logs,
        log_config_for=lambda _topic: LogConfig(),
        store=store,
        isr_writes=TreeIsrWrites(store),
        clock=SimpleNamespace(now_ms=now_ms),
        replica_lag_time_max_ms=replica_lag_time_max_ms,
    )
    manager.apply_leader_and_isr(
        [PartitionStateUpdate(topic, p, 1, 1, 1, (1, 2), 0, (1, 2)) for p in range(partitions)]
    )
    return manager
