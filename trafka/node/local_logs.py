"""The node's partition logs on disk: open, create, delete, maintain, close.

A thin adapter between the replica manager and the storage engine: it uses
`trafka.log.log_manager.LogManager` when that module is present (checkpoints, multiple log
dirs), and otherwise opens `trafka.log.partition_log.PartitionLog` directories itself from
the first log dir (`<topic>-<partition>/`). The replica manager only sees:

    get(topic, partition) -> PartitionLog | None
    get_or_create(topic, partition, config=...) -> PartitionLog
    delete(topic, partition)
    maintenance(now_ms)        # retention, flush.ms, expired files; run in a worker thread
    partition_sizes()          # (log dir, topic, partition, bytes) for DescribeLogDirs
    close()                    # clean shutdown: flush, snapshots, checkpoints

Single-node slice: a partition's high watermark is set to its log end offset when it is
opened and after each append (the ISR is this node alone); issue 5's replica manager takes
the HW from the ISR instead.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog, parse_topic_partition

log = logging.getLogger("trafka.node.local_logs")

CLEAN_SHUTDOWN_FILE = ".trafka-clean-shutdown"


class LocalLogs:
    def __init__(self, log_dirs: list[Path], default_config: LogConfig, *, now_ms: int) -> None:
        self.log_dirs = log_dirs
        self.default_config = default_config
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._now_ms = now_ms
        for directory in log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        marker = log_dirs[0] / CLEAN_SHUTDOWN_FILE
        self._had_clean_shutdown = marker.exists()
        marker.unlink(missing_ok=True)

    def open_existing(self, config_for: Any) -> None:
        """Open every partition directory found (recovery runs here)."""
        for directory in self.log_dirs:
            for child in sorted(directory.iterdir()):
                if not child.is_dir() or "-" not in child.name or child.name.endswith(".deleted"):
                    continue
                try:
                    topic, partition = parse_topic_partition(child)
                except ValueError:
                    continue
                self._open(child, topic, partition, config_for(topic))

    def _open(self, directory: Path, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        partition_log = PartitionLog.open(
            directory,
            config,
            now_ms=self._now_ms,
            had_clean_shutdown=self._had_clean_shutdown,
        )
        partition_log.update_high_watermark(partition_log.log_end_offset)
        self._logs[(topic, partition)] = partition_log
        return partition_log

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, *, config: LogConfig, topic_id: Any = None
    ) -> PartitionLog:
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            return self._open(self.log_dirs[0] / f"{topic}-{partition}", topic, partition, config)

    def delete(self, topic: str, partition: int) -> None:
        with self._lock:
            partition_log = self._logs.pop((topic, partition), None)
        if partition_log is not None:
            partition_log.delete()

    def all_logs(self) -> list[tuple[str, int, PartitionLog]]:
        with self._lock:
            return [(t, p, pl) for (t, p), pl in self._logs.items()]

    def partition_sizes(self) -> list[tuple[str, str, int, int]]:
        return [
            (str(pl.directory.parent), t, p, int(pl.size_bytes)) for t, p, pl in self.all_logs()
        ]

    def maintenance(self, now_ms: int) -> None:
        for _, _, partition_log in self.all_logs():
            try:
                partition_log.apply_retention(now_ms)
                partition_log.flush_if_due(now_ms)
                partition_log.delete_expired_files(now_ms)
                partition_log.remove_expired_producers(now_ms)
            except Exception:
                log.exception("maintenance of %s failed", partition_log.directory)

    def close(self) -> None:
        clean = True
        for _, _, partition_log in self.all_logs():
            try:
                partition_log.flush()
                partition_log.close()
            except Exception:
                clean = False
                log.exception("closing %s failed", partition_log.directory)
        if clean:
            (self.log_dirs[0] / CLEAN_SHUTDOWN_FILE).touch()
