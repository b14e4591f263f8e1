"""Removes deleted partition directories off the caller's thread.

`LogManager.delete` runs on the node's event loop: it renames the partition directory to
`<topic>-<partition>.<uuid>-delete` and hands the log here. The log manager's background
worker (`trafka.log.background`) closes the log's files under the log's own lock, so after
any maintenance step that holds it, and removes the directory: closing files and removing a
directory tree can wait on a busy disk for seconds, which must not stall every client of
the node. What is still queued at a clean close is done by the worker's `finish`; a
directory left by a crash is removed on the next start (`LogManager` loading)."""

from __future__ import annotations

import logging
import shutil
from functools import partial
from pathlib import Path

from trafka.log.background import BackgroundWorker
from trafka.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)


class DirectoryRemover:
    def __init__(self, worker: BackgroundWorker | None = None) -> None:
        self.worker = worker or BackgroundWorker("log-dir-remover")

    def remove(self, log: PartitionLog, directory: Path | None) -> None:
        """Close `log` and remove `directory` (None: only close) on the worker thread."""
        self.worker.submit(partial(_remove, log, directory))

    def finish(self) -> None:
        """Do what is queued now, on the caller's thread (a clean close)."""
        self.worker.finish()


def _remove(log: PartitionLog, directory: Path | None) -> None:
    try:
        log.close_abruptly()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    except Exception:  # the thread must outlive one bad directory
        logger.exception("removing %s failed", directory or log.directory)
