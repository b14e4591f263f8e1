"""The node's partition logs on disk: a thin adapter over `trafka.log.log_manager.LogManager`.

The replica manager and handlers only see:

    get(topic, partition) -> PartitionLog | None
    get_or_create(topic, partition, config=..., topic_id=...) -> PartitionLog
    delete(topic, partition)
    partitions_with_topic_ids()  # (topic, partition, partition.metadata's topic id) per log
    set_topic_config(topic, config)   # AlterConfigs: existing and future logs
    config_for(topic) -> LogConfig
    maintenance(now_ms)        # retention, flush.ms, producer expiry, compaction, checkpoints
    partition_sizes()          # (log dir, topic, partition, bytes) for DescribeLogDirs
    close()                    # clean shutdown: snapshots, fsync, checkpoints, clean marker

The LogManager owns Kafka's per-dir files (`meta.properties` with this node's and the
cluster's id, `.lock`, the offset checkpoints, the clean-shutdown marker); a log dir of
another cluster or one locked by another process fails start-up.

High watermark at open: the LogManager restores each partition's HW from the log dir's
`replication-offset-checkpoint`, clamped to [log start offset, log end offset] (a partition
missing from the checkpoint starts at its log start offset). It is NOT raised to the log end
offset here: after a restart the tail above the checkpoint may never have been committed,
and consumers read up to the HW. The replica manager moves the HW on from there: when this
node becomes leader and the ISR is this node alone (e.g. a single node), `become_leader`
advances it to the log end offset at once (REP-15); otherwise followers' fetches do.
A log created new (`get_or_create`) is empty, so its HW is its log end offset.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import trio

from trafka.log.checkpoint import PARTITION_METADATA, CheckpointError, read_partition_metadata
from trafka.log.config import LogConfig
from trafka.log.log_manager import LogManager
from trafka.log.partition_log import PartitionLog
from trafka.node.topics import topic_id_text

log = logging.getLogger("trafka.node.broker")


class LocalLogs:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        now_ms: int,
        node_id: int,
        cluster_id: str,
        topic_configs: Mapping[str, LogConfig] | None = None,
    ) -> None:
        self.log_dirs = log_dirs
        self.manager = LogManager(
            log_dirs,
            default_config=default_config,
            now_ms=now_ms,
            node_id=node_id,
            cluster_id=cluster_id,
            topic_configs=topic_configs,
        )

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.manager.get(topic, partition)

    def get_or_create(
        self,
        topic: str,
        partition: int,
        *,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
        durable: bool = True,
    ) -> PartitionLog:
        """`durable=False`: see `LogManager.get_or_create`; `sync_created` pays it."""
        existing = self.manager.get(topic, partition)
        if existing is not None:
            return existing
        partition_log = self.manager.get_or_create(
            topic,
            partition,
            config,
            topic_id=None if topic_id is None or topic_id.int == 0 else topic_id_text(topic_id),
            durable=durable,
        )
        partition_log.update_high_watermark(partition_log.log_end_offset)
        return partition_log

    def sync_created(self, logs: list[PartitionLog]) -> None:
        self.manager.sync_created(logs)

    def delete(self, topic: str, partition: int) -> None:
        self.manager.delete(topic, partition)

    def partitions_with_topic_ids(self) -> list[tuple[str, int, str | None]]:
        """Every loaded log with the topic id of its `partition.metadata` (None when the
        file is missing or unreadable)."""
        found: list[tuple[str, int, str | None]] = []
        for (topic, partition), partition_log in sorted(self.manager.logs().items()):
            try:
                topic_id = read_partition_metadata(partition_log.directory / PARTITION_METADATA)
            except (OSError, UnicodeDecodeError, CheckpointError):
                topic_id = None
            found.append((topic, partition, topic_id))
        return found

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        self.manager.set_topic_config(topic, config)

    def config_for(self, topic: str) -> LogConfig:
        """The config the topic's logs use (the default when none was set)."""
        return self.manager.config_for(topic)

    def log_dir_named(self, path: str) -> Path | None:
        """The configured log dir `path` names (compared as absolute paths, as Kafka does)."""
        wanted = Path(path).absolute()
        return next((d for d in self.log_dirs if Path(d).absolute() == wanted), None)

    def is_online(self, log_dir: Path) -> bool:
        return log_dir in self.manager.online_dirs

    def move_to_dir(self, topic: str, partition: int, log_dir: Path, *, now_ms: int) -> None:
        """`LogManager.move_to_dir`, all on the caller's thread."""
        self.manager.move_to_dir(topic, partition, log_dir, now_ms=now_ms)

    async def move_to_dir_off_loop(
        self, topic: str, partition: int, log_dir: Path, now_ms: Callable[[], int]
    ) -> None:
        """AlterReplicaLogDirs: the bulk of the copy in a worker thread while the log keeps
        serving, then the closed remainder on the loop (`trafka.log.dir_move`)."""
        move = self.manager.start_move(topic, partition, log_dir)
        if move is None:
            return
        try:
            await trio.to_thread.run_sync(move.copy_bulk)
        except OSError as error:
            self.manager.abort_move(move, error)
        self.manager.finish_move(move, now_ms=now_ms())

    def partition_sizes(self) -> list[tuple[str, str, int, int]]:
        return [(str(d), t, p, size) for d, t, p, size in self.manager.partition_sizes()]

    def maintenance(self, now_ms: int) -> None:
        self.manager.maintenance(now_ms)

    async def run_maintenance(self, interval_s: float, now_ms: Callable[[], int]) -> None:
        """Retention, flush.ms, producer expiry, compaction, checkpoints every `interval_s`,
        in a worker thread (a failed pass is logged; the next one runs anyway)."""
        while True:
            await trio.sleep(interval_s)
            try:
                await trio.to_thread.run_sync(self.manager.maintenance, now_ms())
            except Exception:
                log.exception("log maintenance failed")

    def close(self) -> None:
        self.manager.close()
