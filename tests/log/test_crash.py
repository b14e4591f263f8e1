"""Crash tests with real processes: SIGKILL a child mid-append, reopen, nothing acked lost.

A child (`crash_child.py`) appends random batches to one partition log in a loop and
prints each acknowledged batch. We SIGKILL it at a random point: after a random number of
acknowledgements (so the kill lands anywhere in the append/flush/checkpoint cycle, and
sometimes during its own start-up recovery), or as soon as the segment files have grown
past a random number of bytes (so it often lands inside a large write, tearing a batch),
then:

* open a COPY of the directory (recovering the torn state with the recovery point from
  the checkpoint the child wrote) and check that every acknowledged batch is there with
  its exact values and that the whole log is valid (CRCs, contiguous offsets);
* start the next child on the ORIGINAL, crashed directory, so recovery also runs in a
  process that then keeps appending.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest

from tests.support.waiting import wait_until
from trafka.log import batch as batch_format
from trafka.log.checkpoint import RECOVERY_POINT_OFFSET_CHECKPOINT, read_offset_checkpoint
from trafka.log.partition_log import PartitionLog
from trafka.log.records import iter_batches

CHILD = Path(__file__).with_name("crash_child.py")
REPO = Path(__file__).resolve().parents[2]
RUNS = 50


class Child:
    """A running crash_child.py whose stdout lines are collected by a thread."""

    def __init__(self, log_dir: Path, seed: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), str(log_dir), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append(raw.decode().rstrip("\n"))

    def acknowledged(self, count: int) -> bool:
        return len(self.acks()) >= count

    def ready(self) -> bool:
        return "ready" in self.lines[:1]

    def acks(self) -> list[tuple[int, int, int]]:
        result = []
        for line in list(self.lines):
            parts = line.split()
            if len(parts) == 3:  # a torn last line (killed mid-write) has fewer fields
                result.append((int(parts[0]), int(parts[1]), int(parts[2])))
        return result

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        assert self.process.stderr is not None
        stderr = self.process.stderr.read().decode()
        self.process.stderr.close()
        self.process.stdout.close()  # type: ignore[union-attr]
        assert "Traceback" not in stderr, stderr


def verify(log_dir: Path, acked: dict[int, tuple[int, int]], config_source: Path) -> int:
    """Open a copy of `log_dir`, check every acked batch and the whole log; return the LEO."""
    copy = config_source / "verify"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(log_dir, copy)
    recovery_point = read_offset_checkpoint(copy / RECOVERY_POINT_OFFSET_CHECKPOINT).get(
        ("crashy", 0)
    )
    from tests.log.crash_child import CONFIG

    log = PartitionLog.open(copy / "crashy-0", CONFIG, now_ms=0, recovery_point=recovery_point)
    try:
        values: dict[int, bytes] = {}
        batches: dict[int, int] = {}
        position = log.log_start_offset
        while position < log.log_end_offset:
            data = log.read(position, max_bytes=1 << 20).to_bytes()
            batch_format.validate_batches(data)
            for decoded in iter_batches(data):
                assert decoded.base_offset == position, "offsets must be contiguous"
                batches[decoded.base_offset] = decoded.last_offset
                for record in decoded.records:
                    values[record.offset] = record.value or b""
                position = decoded.next_offset
        for first, (last, digest) in acked.items():
            if first < log.log_start_offset:
                continue  # removed by retention.bytes in the child, legitimately
            assert batches.get(first) == last, f"acknowledged batch {first}-{last} lost"
            payload = b"".join(values[offset] for offset in range(first, last + 1))
            assert zlib.crc32(payload) == digest, f"batch {first} content changed"
        return log.log_end_offset
    finally:
        log.close()
        shutil.rmtree(copy, ignore_errors=True)


def bytes_written(log_dir: Path) -> int:
    """Segment bytes including segments retention renamed `.deleted` (monotonic in a run)."""
    total = 0
    for pattern in ("*.log", "*.log.deleted"):
        for path in (log_dir / "crashy-0").glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
    return total


def grown_past(log_dir: Path, threshold: int) -> bool:
    return bytes_written(log_dir) >= threshold


@pytest.mark.slow
def test_sigkill_at_random_points_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    acked: dict[int, tuple[int, int]] = {}
    for run in range(RUNS):
        child = Child(log_dir, seed=rng.randrange(1 << 30))
        try:
            if run % 2:
                wait_until(child.ready, timeout_s=30, interval_s=0.005, what="child ready")
                threshold = bytes_written(log_dir) + rng.randint(1, 2_000_000)
                wait_until(
                    functools.partial(grown_past, log_dir, threshold),
                    timeout_s=30,
                    interval_s=0.0005,
                    what=f"run {run}: {threshold} bytes written",
                )
            else:
                target = rng.choice([0, 0, 1, 3, 10, 30, 60])
                if target:
                    wait_until(
                        functools.partial(child.acknowledged, target),
                        timeout_s=30,
                        what=f"run {run}: {target} acknowledgements",
                    )
        finally:
            child.kill()
        for first, last, digest in child.acks():
            # A crash can only lose unacknowledged batches, so offsets never repeat.
            assert first not in acked, f"offset {first} acknowledged twice"
            acked[first] = (last, digest)
        log_end_offset = verify(log_dir, acked, tmp_path)
        assert log_end_offset >= max((last + 1 for last, _ in acked.values()), default=0)
    assert len(acked) > 100
