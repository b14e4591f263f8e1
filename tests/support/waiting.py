"""Wait on a condition with a deadline: tests never sleep a fixed time and hope."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T | bool | None],
    *,
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll `condition` until it returns a truthy value; return it, or fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value  # type: ignore[return-value]
        except Exception as error:
            last_error = error
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{detail}")
        time.sleep(interval_s)


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
