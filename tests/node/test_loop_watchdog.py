"""The loop watchdog names the code that holds the event loop, and stays quiet otherwise."""

from __future__ import annotations

import logging
import time

import pytest
import trio

from trafka.node.loop_watchdog import LoopWatchdog


def _hold_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a handler computing without yielding


async def _watch(watchdog: LoopWatchdog, body: object) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog.run)
        await trio.sleep(0.15)
        await body()  # type: ignore[operator]
        await trio.sleep(0.3)
        nursery.cancel_scope.cancel()


def test_a_held_loop_is_reported_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.2, poll_s=0.05)

    async def hold() -> None:
        _hold_the_loop_for(0.8)

    with caplog.at_level(logging.WARNING, logger="trafka.node.loop_watchdog"):
        trio.run(_watch, watchdog, hold)
    messages = [record.getMessage() for record in caplog.records]
    held = [m for m in messages if m.startswith("event loop held for")]
    assert len(held) == 1, messages
    assert "_hold_the_loop_for" in held[0]
    assert any(m.startswith("event loop free again after") for m in messages), messages
    assert watchdog.stalls == 1
    assert 0.6 < watchdog.longest_s < 5


def test_a_yielding_loop_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.5, poll_s=0.05)

    async def busy_but_yielding() -> None:
        for _ in range(40):
            _hold_the_loop_for(0.01)
            await trio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="trafka.node.loop_watchdog"):
        trio.run(_watch, watchdog, busy_but_yielding)
    assert caplog.records == []
    assert watchdog.stalls == 0


def test_a_slow_garbage_collection_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    # Half the threshold is 10 ms; a full collection over 2M more objects takes longer.
    watchdog = LoopWatchdog(threshold_s=0.02, poll_s=0.05)

    async def collect_a_large_heap() -> None:
        import gc

        heap = [[i] for i in range(2_000_000)]  # tracked lists: a full collection scans all
        gc.collect()
        del heap

    with caplog.at_level(logging.WARNING, logger="trafka.node.loop_watchdog"):
        trio.run(_watch, watchdog, collect_a_large_heap)
    collections = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("garbage collection")
    ]
    assert collections and "generation 2" in collections[0], collections
    assert watchdog.collections_reported >= 1
