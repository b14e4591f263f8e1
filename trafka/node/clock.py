"""The clock port of the node's shells (STYLE 5: time is an input).

The pure cores take `now_ms`; the shells get it from a `Clock`: `SystemClock` in a node,
`ManualClock` in tests that drive time by hand. Only wall-clock milliseconds are read here
(Kafka's timestamps and deadlines); trio's own clock paces sleeps and timeouts.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        assert ms >= 0, "a clock does not go back"
        self._now_ms += ms

    def set(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, "a clock does not go back"
        self._now_ms = now_ms


SYSTEM_CLOCK: Clock = SystemClock()
