"""All partition logs of a node, over the `log.dirs` (SEEDS LOG-05, LOG-22, LOG-34).

Each log dir holds partition directories plus Kafka's per-dir files::

    <log dir>/
      .lock                               flock'ed while this process uses the dir
      meta.properties                     version=1, node.id, cluster.id, directory.id
      <topic>-<partition>/partition.metadata  the topic id (KIP-516), when known
      .kafka_cleanshutdown                present only after a clean close
      recovery-point-offset-checkpoint    topic partition offset (see checkpoint.py)
      log-start-offset-checkpoint
      replication-offset-checkpoint       high watermarks
      cleaner-offset-checkpoint           first dirty offset of compacted logs
      orders-0/ orders-1/ ...             one PartitionLog each
      orders-2.<uuid>-delete/             being deleted (by a background thread; else on
                                          the next start)

New partitions go to the online dir holding the fewest partitions (Kafka's rule). A dir
that fails (cannot be locked or read, mismatched meta.properties, an I/O error later) is
taken offline: its logs are closed and dropped, `offline_dirs` says why, and the process
keeps running on the others (Kafka's KAFKA_STORAGE_ERROR handling). Only when no dir is
usable at start does the constructor raise LogDirFailedError.

This class is the shell around the pure-ish `PartitionLog`s: it reads no clock (callers
pass `now_ms`) but does own file locks and directory scans. `maintenance(now_ms)` is the
body of Kafka's periodic tasks (retention check, flush.ms, producer-id expiry, cleaner,
checkpoints): the broker calls it every `log.retention.check.interval.ms` or so, from a
worker thread if it likes (every log has its own lock).

Moving a partition to another dir of this node (AlterReplicaLogDirs) copies it into
`<dest>/<topic>-<partition>.<uuid>-future` in two steps (`trafka.log.dir_move`): the bulk
while the log keeps serving (`start_move`, `DirMove.copy_bulk`, which a caller may run in a
worker thread), then, the log closed, the remainder (`finish_move`: appended tails, changed
small files); the future dir is renamed to
`<dest>/<topic>-<partition>`, the old dir renamed `-delete` (removed by the background
remover, as `delete` does), and the log reopened in its new place with its offsets (log
start, HW, recovery point) kept. A crash in between leaves either the old dir alone (a
`-future` dir is removed at the next start) or two identical copies (the first dir in
`log.dirs` order is kept, the other ignored with an error line). Kafka instead fills the
future log with a ReplicaAlterLogDirsThread while the current one keeps serving; here the
copy of the files does the same, and only the closed remainder runs on the caller's
thread.

Not implemented: JBOD-style per-dir failure notification to the controller (the broker reads
`offline_dirs`), `log.cleaner.threads` (the cleaner runs inside `maintenance`).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from trafka.log import cleaner
from trafka.log.background import BackgroundWorker
from trafka.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from trafka.log.config import LogConfig
from trafka.log.dir_move import FutureCopy
from trafka.log.dir_remover import DirectoryRemover
from trafka.log.errors import LogDirFailedError, LogError
from trafka.log.partition_log import PartitionLog, parse_topic_partition
from trafka.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from trafka.log.storage_failure import all_log_dirs_failed

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
MAX_FILE_NAME_BYTES = 255


@dataclass
class DirMove:
    """One AlterReplicaLogDirs move in progress (`LogManager.start_move`)."""

    key: TopicPartition
    log: PartitionLog
    source: Path
    destination: Path
    copy: FutureCopy

    def copy_bulk(self) -> int:
        """The bulk of the copy, while the log serves (a worker thread may run it)."""
        return self.copy.copy_bulk()


def delete_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """`<topic>-<partition>.<uuid>-delete`, the topic cut so the name fits in 255 bytes, as
    Kafka's `logDeleteDirName` does: a legal 249-character topic name would otherwise make
    the rename fail and take the whole log dir offline (found by the fuzzer, issue 12)."""
    suffix = f"-{partition}.{unique_id or uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    prefix = topic.encode()[: MAX_FILE_NAME_BYTES - len(suffix.encode())]
    return prefix.decode(errors="ignore") + suffix


logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one `maintenance` pass did."""

    segments_deleted: int
    logs_flushed: int
    logs_cleaned: int
    producers_expired: int


RESERVED_DIR_NAMES = frozenset({"quorum"})
"""Directories a node keeps inside a log dir for itself, skipped silently when loading logs:
`quorum` holds the metadata quorum's journal and snapshots (trafka.node.broker). Neither is
a valid partition directory name (no `-<partition>` suffix)."""


class LogManager:
    """The node's partition logs across several log dirs."""

    def __init__(
        self,
        log_dirs: list[Path],
        *,
        default_config: LogConfig,
        now_ms: int,
        node_id: int | None,
        cluster_id: str | None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.default_config = default_config
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._topic_configs = dict(topic_configs or {})
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._background = BackgroundWorker("log-background")
        """Roll fsyncs and directory removals, off the event loop."""
        self._remover = DirectoryRemover(self._background)
        self._now_ms = now_ms
        self._log_dirs = [Path(d) for d in log_dirs]
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._offline: dict[Path, str] = {}
        self._lock_fds: dict[Path, int] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._tombstone_horizons: dict[TopicPartition, int] = {}
        self._closed = False
        self._loaded = False
        for log_dir in self._log_dirs:
            try:
                self._load_dir(log_dir, now_ms)
            except (OSError, LogError, ValueError) as error:
                self._take_offline(log_dir, str(error))
        if not self.online_dirs:
            raise LogDirFailedError(f"no usable log dir: {self._offline}")
        self._loaded = True

    # ------------------------------------------------------------------ loading

    def _load_dir(self, log_dir: Path, now_ms: int) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_dir(log_dir)
        self._check_meta_properties(log_dir, now_ms)
        clean_marker = log_dir / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = clean_marker.exists()
        recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT)
        log_start_offsets = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = _read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        cleaner_offsets = _read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                # -future: a move that did not finish; the source dir still has the log
                shutil.rmtree(child, ignore_errors=True)
                continue
            if child.name in RESERVED_DIR_NAMES:
                continue
            try:
                topic, partition = parse_topic_partition(child)
            except ValueError:
                logger.warning("%s: not a partition directory, ignored", child)
                continue
            key = (topic, partition)
            if key in self._logs:
                logger.error("%s: duplicate of %s, ignored", child, self._dir_of[key])
                continue
            log = PartitionLog.open(
                child,
                self.config_for(topic),
                now_ms=now_ms,
                recovery_point=recovery_points.get(key),
                log_start_offset=log_start_offsets.get(key),
                had_clean_shutdown=had_clean_shutdown,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                background=self._background,
            )
            if key in high_watermarks:
                log.update_high_watermark(high_watermarks[key])
            if key in cleaner_offsets:
                self._cleaner_offsets[key] = cleaner_offsets[key]
            self._logs[key] = log
            self._dir_of[key] = log_dir
        clean_marker.unlink(missing_ok=True)

    def _lock_dir(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirFailedError(f"{log_dir} is locked by another process") from None
        self._lock_fds[log_dir] = fd

    def _check_meta_properties(self, log_dir: Path, now_ms: int) -> None:
        path = log_dir / META_PROPERTIES
        if path.exists():
            properties = read_meta_properties(path)
            if properties.get("version") not in ("0", "1"):
                raise LogDirFailedError(f"{path}: unsupported version {properties.get('version')}")
            stored_node = properties.get("node.id", properties.get("broker.id"))
            if (
                self.node_id is not None
                and stored_node is not None
                and stored_node != str(self.node_id)
            ):
                raise LogDirFailedError(
                    f"{path}: node.id {stored_node}, this node is {self.node_id}"
                )
            stored_cluster = properties.get("cluster.id")
            if self.cluster_id is not None and stored_cluster not in (None, self.cluster_id):
                raise LogDirFailedError(
                    f"{path}: cluster.id {stored_cluster}, this cluster is {self.cluster_id}"
                )
            return
        if self.node_id is None and self.cluster_id is None:
            return
        properties = {"version": "1", "directory.id": _kafka_uuid()}
        if self.node_id is not None:
            properties["node.id"] = str(self.node_id)
        if self.cluster_id is not None:
            properties["cluster.id"] = self.cluster_id
        write_meta_properties(path, properties, now_ms=now_ms)

    # ------------------------------------------------------------------ lookups

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Dynamic topic config: applies to the topic's existing and future logs."""
        with self._lock:
            self._topic_configs[topic] = config
            for (log_topic, _), log in self._logs.items():
                if log_topic == topic:
                    log.update_config(config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        now_ms: int | None = None,
        topic_id: str | None = None,
        durable: bool = True,
    ) -> PartitionLog:
        """The log of `topic`-`partition`, created in the least loaded online dir if new.

        `topic_id` (URL-safe base64 Uuid) is written to `partition.metadata` when given.
        `durable=False`: a new log's fsyncs and `partition.metadata` are left owed
        (`PartitionLog.sync_creation`: before its first append, or by `sync_created`).
        """
        with self._lock:
            key = (topic, partition)
            existing = self._logs.get(key)
            if existing is not None:
                return existing
            if config is not None:
                self._topic_configs.setdefault(topic, config)
            online = self.online_dirs
            if not online:
                raise LogDirFailedError("no online log dir")
            target = online[0] if len(online) == 1 else self._least_loaded(online)
            try:
                log = PartitionLog.open(
                    target / f"{topic}-{partition}",
                    config or self.config_for(topic),
                    now_ms=self._now_ms if now_ms is None else now_ms,
                    producer_id_expiration_ms=self._producer_id_expiration_ms,
                    background=self._background,
                    durable_creation=durable,
                    topic_id=topic_id,
                )
            except (OSError, LogDirFailedError) as error:
                self._take_offline(target, str(error))
                raise LogDirFailedError(f"{target}: {error}") from error
            self._logs[key] = log
            self._dir_of[key] = target
            return log

    def sync_created(self, logs: list[PartitionLog]) -> None:
        """Pay, on the background thread, what logs created with `durable=False` owe the
        disk (an append meanwhile pays its own log's first). A log whose sync fails stays
        owed: its first append tries again and fails as any write to a failing dir does."""
        if any(log.creation_owed for log in logs):
            self._background.submit(partial(_sync_created, logs))

    def _least_loaded(self, online: list[Path]) -> Path:
        """The online dir holding the fewest logs (the first on a tie). A pass over every
        log: with one dir (the usual case) the caller skips it, else creating n logs
        would cost O(n^2) (10,000 partitions: minutes, issue 19's S2)."""
        counts = {d: 0 for d in online}
        for log_dir in self._dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        return min(online, key=lambda d: (counts[d], online.index(d)))

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition: rename to `<dir>.<uuid>-delete` now; close its files and
        remove the directory in the background (Kafka's `file.delete.delay.ms` task).

        Called on the event loop (StopReplica with delete): nothing here waits for the
        disk beyond the rename. The log is marked closed at once, so no append or read
        reaches it; its producer snapshot and fsyncs are skipped (it is being deleted);
        its segments are closed under its own lock by the remover, after any maintenance
        step that holds the lock. A name is free again once this returns, so the
        partition may be created anew at once."""
        with self._lock:
            key = (topic, partition)
            log = self._logs.pop(key, None)
            log_dir = self._dir_of.pop(key, None)
            self._cleaner_offsets.pop(key, None)
            self._tombstone_horizons.pop(key, None)
        if log is None or log_dir is None:
            return False
        log.mark_closed()
        doomed = log.directory.with_name(delete_dir_name(topic, partition))
        try:
            os.replace(log.directory, doomed)
        except OSError as error:
            self.mark_dir_offline(log_dir, str(error))
            self._remover.remove(log, None)
            return True
        self._remover.remove(log, doomed)
        return True

    def move_to_dir(self, topic: str, partition: int, destination: Path, *, now_ms: int) -> None:
        """Move a partition's log to another online dir of this node, in one call (see the
        module doc; a caller with an event loop runs `start_move`, `DirMove.copy_bulk` in a
        worker thread, then `finish_move`).

        `ValueError` when `destination` is not one of this manager's dirs or the partition
        has no log here; `LogDirFailedError` when either dir is offline or fails meanwhile
        (the failing dir is taken offline). Nothing happens when it is there already."""
        move = self.start_move(topic, partition, destination)
        if move is None:
            return
        try:
            move.copy_bulk()
        except OSError as error:
            self.abort_move(move, error)
        self.finish_move(move, now_ms=now_ms)

    def start_move(self, topic: str, partition: int, destination: Path) -> DirMove | None:
        """Check a move and name its `-future` dir (None: the log is there already)."""
        destination = Path(destination)
        with self._lock:
            key = (topic, partition)
            log = self._logs.get(key)
            source = self._dir_of.get(key)
            if destination not in self._log_dirs:
                raise ValueError(f"{destination} is not a log dir of this node")
            if log is None or source is None:
                raise ValueError(f"no log of {topic}-{partition} here")
            if destination in self._offline:
                raise LogDirFailedError(f"{destination} is offline")
            if destination == source:
                return None
            try:
                log.sync_creation()  # the copy must find the new log's partition.metadata
            except OSError as error:
                self._take_offline(source, str(error))
                raise LogDirFailedError(f"{source}: {error}") from error
            future = destination / f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
            copy = FutureCopy(log.directory, future, lambda: log.truncations)
            return DirMove(key, log, source, destination, copy)

    def abort_move(self, move: DirMove, error: OSError) -> None:
        """The copy failed: drop the future dir, take the destination offline, raise."""
        shutil.rmtree(move.copy.future, ignore_errors=True)
        with self._lock:
            self._take_offline(move.destination, str(error))
        raise LogDirFailedError(f"{move.destination}: {error}") from error

    def finish_move(self, move: DirMove, *, now_ms: int) -> None:
        """The log closed, the future dir made identical (the small remainder of the copy),
        renamed into place, the log reopened there and the old dir removed."""
        key = move.key
        with self._lock:
            log = self._logs.get(key)
            if log is not move.log or self._dir_of.get(key) != move.source:
                shutil.rmtree(move.copy.future, ignore_errors=True)
                raise ValueError(f"{key[0]}-{key[1]} was deleted or moved meanwhile")
            if move.destination in self._offline:
                shutil.rmtree(move.copy.future, ignore_errors=True)
                raise LogDirFailedError(f"{move.destination} is offline")
            with log.lock:
                log_start, high_watermark = log.log_start_offset, log.high_watermark
                log.close()
                final = move.destination / f"{key[0]}-{key[1]}"
                try:
                    move.copy.sync_final()
                    os.replace(move.copy.future, final)
                    _fsync_path(move.destination)
                except OSError as error:
                    shutil.rmtree(move.copy.future, ignore_errors=True)
                    self._reopen(key, log.directory, move.source, log_start, high_watermark, now_ms)
                    self._take_offline(move.destination, str(error))
                    raise LogDirFailedError(f"{move.destination}: {error}") from error
                doomed = log.directory.with_name(delete_dir_name(key[0], key[1]))
                try:
                    os.replace(log.directory, doomed)
                    self._remover.remove(log, doomed)  # removed off the loop, as `delete`
                except OSError as error:
                    self._take_offline(move.source, str(error))
            self._reopen(key, final, move.destination, log_start, high_watermark, now_ms)

    def _reopen(
        self,
        key: TopicPartition,
        directory: Path,
        log_dir: Path,
        log_start_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        log = PartitionLog.open(
            directory,
            self.config_for(key[0]),
            now_ms=now_ms,
            log_start_offset=log_start_offset,
            had_clean_shutdown=True,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
            background=self._background,
        )
        log.update_high_watermark(high_watermark)
        self._logs[key] = log
        self._dir_of[key] = log_dir

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def partition_sizes(self) -> list[tuple[Path, str, int, int]]:
        """(log dir, topic, partition, bytes) of every log, for DescribeLogDirs."""
        with self._lock:
            return [
                (self._dir_of[key], key[0], key[1], log.size_bytes)
                for key, log in sorted(self._logs.items())
            ]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self._log_dirs if d not in self._offline]

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Failed log dirs and why (KAFKA_STORAGE_ERROR for their partitions)."""
        return dict(self._offline)

    def mark_dir_offline(self, log_dir: Path, reason: str) -> None:
        """Take a dir offline after the broker saw LogDirFailedError from one of its logs."""
        with self._lock:
            self._take_offline(Path(log_dir), reason)

    def _take_offline(self, log_dir: Path, reason: str) -> None:
        if log_dir in self._offline:
            return
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self._offline[log_dir] = reason
        for key in [k for k, d in self._dir_of.items() if d == log_dir]:
            log = self._logs.pop(key)
            del self._dir_of[key]
            log._close_abruptly()
        fd = self._lock_fds.pop(log_dir, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._loaded and not self.online_dirs:
            # Kafka halts the broker when its last log dir fails (knode: exit 1, one line)
            all_log_dirs_failed([str(d) for d in self._log_dirs])

    # ------------------------------------------------------------------ checkpoints

    def _write_checkpoint(
        self, name: str, offsets_of: Callable[[TopicPartition, PartitionLog], int | None]
    ) -> None:
        """The offsets are read under the manager's lock, the file is written (and
        fsynced) outside it, so a slow disk never holds the lock that the event loop takes
        to create or delete a partition; `_checkpoint_lock` keeps writers of one file in
        turn."""
        with self._lock:
            contents: list[tuple[Path, dict[TopicPartition, int]]] = []
            for log_dir in self.online_dirs:
                offsets: dict[TopicPartition, int] = {}
                for key, log in self._logs.items():
                    if self._dir_of[key] == log_dir:
                        value = offsets_of(key, log)
                        if value is not None:
                            offsets[key] = value
                contents.append((log_dir, offsets))
        with self._checkpoint_lock:
            for log_dir, offsets in contents:
                try:
                    write_offset_checkpoint(log_dir / name, offsets)
                except OSError as error:
                    self.mark_dir_offline(log_dir, f"writing {name}: {error}")

    def checkpoint_high_watermarks(self) -> None:
        """`replication-offset-checkpoint` (replica.high.watermark.checkpoint.interval.ms)."""
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda _, log: log.high_watermark)

    def checkpoint_recovery_points(self) -> None:
        """`recovery-point-offset-checkpoint` (Kafka: log.flush.offset.checkpoint.interval.ms)."""
        self._write_checkpoint(RECOVERY_POINT_OFFSET_CHECKPOINT, lambda _, log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        """`log-start-offset-checkpoint`."""
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda _, log: log.log_start_offset)

    def checkpoint_cleaner_offsets(self) -> None:
        self._write_checkpoint(
            CLEANER_OFFSET_CHECKPOINT, lambda key, _: self._cleaner_offsets.get(key)
        )

    def write_checkpoints(self) -> None:
        self.checkpoint_high_watermarks()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_cleaner_offsets()

    # ------------------------------------------------------------------ periodic work

    def maintenance(self, now_ms: int) -> MaintenanceReport:
        """Retention, flush.ms, producer-id expiry, compaction and checkpoints, once.

        The logs are listed once and worked on without the manager's lock, so a log may be
        deleted (StopReplica(delete), the start-up stray-log removal) or its dir taken
        offline in the middle of the pass: whatever such a log raises is dropped, since
        it is no longer this manager's (Kafka's cleaner likewise aborts a deleted
        partition). On a log that is still live, an I/O error takes its dir offline
        (logged, KAFKA_STORAGE_ERROR) and any other error is raised, but only after the
        other logs were worked on and the checkpoints written."""
        self._now_ms = now_ms
        deleted = flushed = cleaned = expired = 0
        failures: list[Exception] = []
        for key, log in list(self._logs.items()):
            try:
                deleted += log.apply_retention(now_ms)
                flushed += log.flush_if_due(now_ms)
                expired += log.remove_expired_producers(now_ms)
                if log.config.compact and self._compact(key, log, now_ms):
                    cleaned += 1
            except Exception as error:
                if self._gone(key, log):
                    logger.debug("%s: deleted during maintenance (%s); skipped", key, error)
                elif isinstance(error, (LogDirFailedError, OSError)):
                    log_dir = self._dir_of.get(key)
                    if log_dir is not None:
                        self.mark_dir_offline(log_dir, str(error))
                else:
                    failures.append(error)
        self.write_checkpoints()
        if len(failures) == 1:
            raise failures[0]
        if failures:
            raise ExceptionGroup(f"log maintenance failed for {len(failures)} logs", failures)
        return MaintenanceReport(deleted, flushed, cleaned, expired)

    def _gone(self, key: TopicPartition, log: PartitionLog) -> bool:
        """`log` was closed or is no longer the manager's log of `key` (deleted, its dir
        taken offline, or deleted and created again)."""
        with self._lock:
            return log.closed or self._logs.get(key) is not log

    def _compact(self, key: TopicPartition, log: PartitionLog, now_ms: int) -> bool:
        horizon = self._tombstone_horizons.get(key)
        force = horizon is not None and now_ms >= horizon
        result = cleaner.clean_log(
            log, now_ms=now_ms, first_dirty_offset=self._cleaner_offsets.get(key, 0), force=force
        )
        if result is None:
            return False
        with self._lock:
            if self._gone(key, log):  # no stale offsets for a partition created again
                return False
            self._cleaner_offsets[key] = result.first_dirty_offset
            if result.next_tombstone_horizon_ms is not None:
                self._tombstone_horizons[key] = result.next_tombstone_horizon_ms
            else:
                self._tombstone_horizons.pop(key, None)
        return True

    def close(self) -> None:
        """Close every log, write checkpoints and the clean-shutdown marker, unlock dirs."""
        with self._lock:
            if self._closed:
                return
            for key, log in list(self._logs.items()):
                try:
                    log.close()
                except LogDirFailedError as error:
                    self._take_offline(self._dir_of[key], str(error))
            self.write_checkpoints()
            self._remover.finish()
            for log_dir in self.online_dirs:
                try:
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                except OSError as error:
                    self._take_offline(log_dir, str(error))
            for fd in self._lock_fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._lock_fds.clear()
            self._closed = True


def _sync_created(logs: list[PartitionLog]) -> None:
    for log in logs:
        try:
            log.sync_creation()
        except OSError as error:
            logger.warning("%s: fsync of the new log failed: %s", log.directory, error)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as error:
        logger.warning("%s: %s; ignoring it", path, error)
        return {}


def _kafka_uuid() -> str:
    """A random Kafka `Uuid` as Kafka prints it: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
