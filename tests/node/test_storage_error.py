"""A leader whose log dir went offline answers KAFKA_STORAGE_ERROR (found by the chaos
harness, tests/chaos: the disk-full nemesis filled a node's log dir; the next Produce for a
partition whose log had been dropped raised LogDirFailedError out of the handler and the
broker closed the client's connection instead of answering)."""

from __future__ import annotations

import random
from pathlib import Path

from kio.schema.errors import ErrorCode

from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import FileMetadataStore
from trafka.node.replica_manager import PartitionStateUpdate, ReplicaManager
from trafka.node.topics import TopicManager

NOW = 1_700_000_000_000


async def _leader(tmp_path: Path) -> tuple[ReplicaManager, LocalLogs]:
    store = FileMetadataStore(tmp_path / "tree.json")
    topics = TopicManager(
        store,
        node_id=1,
        live_brokers=lambda: [1, 2],
        validate_configs=lambda _configs: None,
        rng=random.Random(1),
    )
    await topics.create("t", {0: [1, 2], 1: [1, 2]}, {})
    logs = LocalLogs([tmp_path / "logs"], LogConfig(), now_ms=NOW, node_id=1, cluster_id="c")
    manager = ReplicaManager(
        node_id=1,
        topics=topics,
        log_manager=logs,
        log_config_for=lambda _topic: LogConfig(),
        now_ms=lambda: NOW,
    )
    manager.apply_leader_and_isr(
        [PartitionStateUpdate("t", p, 1, 1, 1, (1, 2), 0, (1, 2)) for p in (0, 1)]
    )
    return manager, logs


async def test_produce_and_fetch_on_an_offline_log_dir_get_kafka_storage_error(
    tmp_path: Path,
) -> None:
    manager, logs = await _leader(tmp_path)
    batch = build_batch([NewRecord(b"v", timestamp=NOW)])
    ok = await manager.append("t", 0, batch, required_acks=1, timeout_ms=1000)
    assert ok.error_code == 0
    logs.manager.mark_dir_offline(tmp_path / "logs", "No space left on device")
    for partition in (0, 1):
        result = await manager.append("t", partition, batch, required_acks=1, timeout_ms=1000)
        assert result.error_code == ErrorCode.kafka_storage_error
        read = manager.read("t", partition, 0, max_bytes=1 << 20, isolation_level=0, replica_id=-1)
        assert read.error_code == ErrorCode.kafka_storage_error
