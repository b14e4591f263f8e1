"""Reports an event loop held too long, and the stack that held it.

Every request, the replica fetchers and the quorum session share one trio loop, so a
handler that computes for a second without yielding delays all of them. A trio task beats
every `poll_s`; a daemon thread checks the beat and, when it is older than `threshold_s`,
logs one WARNING with the loop thread's stack at that moment (the code that holds the loop)
and, once the loop beats again, how long it was held. A stack that ends in the loop's own
wait for I/O (`epoll`/`select`) means the process was not scheduled at all: the machine's
load, not our code. Costs nothing on the request path: one sleep per `poll_s` on the loop.

The cyclic garbage collector stops every thread and shows up in no task's stack (the stack
ends wherever an allocation triggered it, often trio's scheduler), so its collections are
timed too (`gc.callbacks`) and each one longer than half the threshold is logged by the
watchdog thread (never from inside the collector) with its generation and what it freed.
"""

from __future__ import annotations

import collections
import gc
import logging
import sys
import threading
import time
import traceback

import trio

log = logging.getLogger(__name__)

STACK_FRAMES = 40
"""At most this many innermost frames of the running task are logged (trio's own frames
and the process's start-up below them are left out): the handler and what it was doing."""


class LoopWatchdog:
    """Run `run` in the loop to be watched (one per process)."""

    def __init__(self, threshold_s: float = 1.0, poll_s: float = 0.1) -> None:
        self.threshold_s = threshold_s
        self.poll_s = poll_s
        self.stalls = 0
        """Stalls reported so far."""
        self.longest_s = 0.0
        """The longest time the loop was held past a beat, measured when it beat again."""
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self.collections_reported = 0
        """Garbage collections logged so far (each over half the threshold)."""
        self._gc_started = 0.0
        self._gc_slow: collections.deque[tuple[int, float, int]] = collections.deque(maxlen=64)
        """(generation, seconds, objects freed) of slow collections not yet logged."""

    async def run(self) -> None:
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        thread.start()
        gc.callbacks.append(self._on_gc)
        try:
            while True:
                now = time.monotonic()
                held = now - self._beat - self.poll_s
                self._beat = now
                self.longest_s = max(self.longest_s, held)
                await trio.sleep(self.poll_s)
        finally:
            gc.callbacks.remove(self._on_gc)
            self._stop.set()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """`gc.callbacks`: runs inside the collector, so it only takes the time."""
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        elapsed = time.perf_counter() - self._gc_started
        if elapsed > self.threshold_s / 2:
            generation = info.get("generation", -1)
            self._gc_slow.append((generation, elapsed, info.get("collected", 0)))

    def _report_collections(self) -> None:
        while self._gc_slow:
            generation, elapsed, freed = self._gc_slow.popleft()
            self.collections_reported += 1
            # Not gc.get_objects() for the heap's size: the list it returns holds every live
            # object for a moment, a buffer's temporary memoryview included, and the loop
            # thread's next resize of that buffer failed with BufferError (seen in a test).
            log.warning(
                "garbage collection of generation %d held every thread %.2f s (%d objects freed)",
                generation,
                elapsed,
                freed,
            )

    def _watch(self) -> None:
        reported_beat: float | None = None
        while not self._stop.wait(self.poll_s / 2):
            self._report_collections()
            beat = self._beat
            held = time.monotonic() - beat
            if reported_beat is not None and beat != reported_beat:
                log.warning(
                    "event loop free again after %.2f s", beat - reported_beat - self.poll_s
                )
                reported_beat = None
            if reported_beat is None and held > self.threshold_s + self.poll_s:
                reported_beat = beat
                self.stalls += 1
                log.warning(
                    "event loop held for %.2f s; the loop thread is at:\n%s",
                    held,
                    self.loop_stack(),
                )

    def loop_stack(self) -> str:
        """The loop thread's innermost frames, formatted (or why they are unavailable)."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "  (loop thread not found)"
        frames = traceback.extract_stack(frame)
        task_start = max(
            (i + 1 for i, f in enumerate(frames) if f.filename.endswith("trio/_core/_run.py")),
            default=0,
        )
        if task_start < len(frames):  # in a task: its frames; else trio's wait or start-up
            frames = traceback.StackSummary.from_list(frames[task_start:])
        return "".join(frames.format()[-STACK_FRAMES:]).rstrip()
