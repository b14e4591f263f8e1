"""What a node does when its storage fails for good: Kafka's halt.

Kafka takes a log dir offline at its first I/O error (LogDirFailureChannel); when no log dir
is left online, or the metadata log's dir fails, the broker logs one line and halts the
process with exit code 1 (`Exit.halt(1)`: no orderly shutdown, which would only try to
write to the failed disk again). Nothing acknowledged is lost by halting: an acknowledged
write is in the log already, and the next start recovers the log's tail.

The halt is process-wide policy, so it is set by the process (`knode start` calls
`halt_on_storage_failure()`), like Kafka's `Exit.setHaltProcedure`: a node run inside
another process (the tests' in-process brokers) keeps the default, which does not halt:
its offline dirs answer KAFKA_STORAGE_ERROR and a failed quorum write raises.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

logger = logging.getLogger("trafka.storage")

HaltProcedure = Callable[[str], None]

_halt: HaltProcedure | None = None

EXIT_CODE = 1
"""Kafka's `Exit.halt(1)`."""


def halt_process(message: str) -> None:
    """Log `message` as the node's last line and end the process at once (exit code 1)."""
    logger.critical(message)
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:
            pass
    sys.stderr.flush()
    os._exit(EXIT_CODE)


def halt_on_storage_failure(procedure: HaltProcedure | None = halt_process) -> None:
    """Set (or with None, clear) what `storage_failed` does."""
    global _halt
    _halt = procedure


def storage_failed(message: str) -> None:
    """The node cannot go on with its storage: halt if the process asked for it, else
    return (the caller then raises or answers KAFKA_STORAGE_ERROR)."""
    if _halt is None:
        logger.error("%s (not halting: no halt procedure in this process)", message)
        return
    _halt(message)


def all_log_dirs_failed(log_dirs: list[str]) -> None:
    """Kafka's LogManager line when the last online log dir failed."""
    storage_failed(f"Shutdown broker because all log dirs in {', '.join(log_dirs)} have failed")
