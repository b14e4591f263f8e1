"""Removes deleted partition directories off the caller's thread.

`LogManager.delete` runs on the node's event loop: it renames the partition directory to
`<topic>-<partition>.<uuid>-delete` and hands the log here. One daemon thread (started on
demand, gone when idle) closes the log's files under the log's own lock, so after any
maintenance step that holds it, and removes the directory: closing files and removing a
directory tree can wait on a busy disk for seconds, which must not stall every client of
the node. What is still queued at a clean close is done by `finish`; a directory left by a
crash is removed on the next start (`LogManager` loading)."""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from pathlib import Path

from trafka.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)

IDLE_EXIT_S = 5.0
"""The thread ends after this long without work (another starts with the next deletion)."""


class DirectoryRemover:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[PartitionLog, Path | None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def remove(self, log: PartitionLog, directory: Path | None) -> None:
        """Close `log` and remove `directory` (None: only close) on the remover thread."""
        with self._lock:
            self._queue.put((log, directory))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="log-dir-remover", daemon=True
                )
                self._thread.start()

    def finish(self) -> None:
        """Do what is queued now, on the caller's thread (a clean close)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            _remove(*item)

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            _remove(*item)


def _remove(log: PartitionLog, directory: Path | None) -> None:
    try:
        log.close_abruptly()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    except Exception:  # the thread must outlive one bad directory
        logger.exception("removing %s failed", directory or log.directory)
