"""One worker thread for the log manager's slow file work, off the caller's thread.

Jobs are run in the order submitted by one daemon thread, started on demand and gone when
idle for `IDLE_EXIT_S` (the next job starts another). The node's event loop submits what
can wait on a busy disk for seconds: fsyncs after a segment roll (`PartitionLog._roll`),
closing and removing deleted partitions (`trafka.log.dir_remover`). `finish` runs what is
still queued on the caller's thread (a clean close). A job's exception is logged; the
thread goes on."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

IDLE_EXIT_S = 5.0


class BackgroundWorker:
    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._queue.put(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def finish(self) -> None:
        """Run what is queued now, on the caller's thread."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            _run_one(job)

    def _run(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            _run_one(job)


def _run_one(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:  # the thread must outlive one bad job
        logger.exception("background log job failed")
