"""Log dir failures answer KAFKA_STORAGE_ERROR, as Kafka's do (both found by the chaos
harness's disk-full nemesis, tests/chaos, docs/reliability.md): a Produce for a partition
whose log had been dropped with its offline dir raised LogDirFailedError out of the handler
and the broker closed the client's connection; and a write that failed with ENOSPC left
its dir online, so the next batch got OUT_OF_ORDER_SEQUENCE_NUMBER."""

from __future__ import annotations

import errno
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from trafka.log import segment as segment_module
from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.clock import ManualClock
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import memory_store
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from trafka.node.topics import TopicManager

NOW = 1_700_000_000_000


@asynccontextmanager
async def _leader(tmp_path: Path) -> AsyncIterator[tuple[ReplicaManager, LocalLogs]]:
    async with memory_store() as store:
        yield await _leader_on(store, tmp_path)


async def _leader_on(store: Any, tmp_path: Path) -> tuple[ReplicaManager, LocalLogs]:
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
        store=store,
        isr_writes=TreeIsrWrites(store),
        clock=ManualClock(NOW),
    )
    manager.apply_leader_and_isr(
        [PartitionStateUpdate("t", p, 1, 1, 1, (1, 2), 0, (1, 2)) for p in (0, 1)]
    )
    return manager, logs


async def test_produce_and_fetch_on_an_offline_log_dir_get_kafka_storage_error(
    tmp_path: Path,
) -> None:
    async with _leader(tmp_path) as (manager, logs):
        batch = build_batch([NewRecord(b"v", timestamp=NOW)])
        ok = await manager.append("t", 0, batch, required_acks=1, timeout_ms=1000)
        assert ok.error_code == 0
        logs.manager.mark_dir_offline(tmp_path / "logs", "No space left on device")
        for partition in (0, 1):
            result = await manager.append("t", partition, batch, required_acks=1, timeout_ms=1000)
            assert result.error_code == ErrorCode.kafka_storage_error
            read = manager.read(
                "t", partition, 0, max_bytes=1 << 20, isolation_level=0, replica_id=-1
            )
            assert read.error_code == ErrorCode.kafka_storage_error


async def test_a_failed_write_takes_the_log_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the chaos harness (disk-full, 5 nodes, seed 5005): a write that hit ENOSPC
    left the log online, the producer's next in-flight batch was checked against it and got
    OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka then bumped its epoch and re-sent possibly
    written batches of other partitions under the new epoch (duplicates). Kafka takes the
    dir offline at the first I/O error (LogDirFailureChannel): every later request for its
    partitions gets KAFKA_STORAGE_ERROR."""
    async with _leader(tmp_path) as (manager, logs):

        def batch(sequence: int) -> bytes:
            return build_batch(
                [NewRecord(b"v", timestamp=NOW)],
                producer_id=7,
                producer_epoch=0,
                base_sequence=sequence,
            )

        assert (
            await manager.append("t", 0, batch(0), required_acks=1, timeout_ms=1000)
        ).error_code == 0

        real = segment_module._pwrite_all
        calls = 0

        def disk_full(fd: int, buffers: Any, position: int) -> int:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, buffers, position)

        monkeypatch.setattr(segment_module, "_pwrite_all", disk_full)
        first = await manager.append("t", 0, batch(1), required_acks=1, timeout_ms=1000)
        assert first.error_code == ErrorCode.kafka_storage_error
        # the next batch of the same producer (in flight behind the failed one)
        second = await manager.append("t", 0, batch(2), required_acks=1, timeout_ms=1000)
        assert (
            second.error_code == ErrorCode.kafka_storage_error
        )  # not OUT_OF_ORDER_SEQUENCE_NUMBER
        other = await manager.append("t", 1, batch(0), required_acks=1, timeout_ms=1000)
        assert other.error_code == ErrorCode.kafka_storage_error  # the whole dir is offline
        assert tmp_path / "logs" in logs.manager.offline_dirs
