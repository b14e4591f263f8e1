"""Parent side of `member_process`: start, watch and kill consumer-group member processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until

KAFKAJS = Path(__file__).resolve().parents[1] / "js" / "node_modules" / "kafkajs"


def _node() -> str:
    """Node.js for kafkajs members; a missing node or kafkajs fails the test (no skips)."""
    node = shutil.which("node")
    if node is None:
        raise AssertionError("kafkajs members need Node.js: `node` is not on PATH")
    if not KAFKAJS.is_dir():
        raise AssertionError(
            f"kafkajs is not installed: run `make test-deps` (npm install in {KAFKAJS.parents[1]})"
        )
    return node


class Member:
    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        client: str = "confluent",
        instance_id: str | None = None,
        strategy: str | None = None,
        session_timeout_ms: int = 6000,
        log_dir: Path | None = None,
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "tests.group.member_process",
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--client",
            client,
            "--session-timeout-ms",
            str(session_timeout_ms),
        ]
        if instance_id:
            command += ["--instance-id", instance_id]
        if strategy:
            command += ["--strategy", strategy]
        if client == "kafkajs":
            command = [
                _node(),
                str(Path(__file__).with_name("kafkajs_member.js")),
                bootstrap,
                str(KAFKAJS),
                group,
                topic,
                str(session_timeout_ms),
            ]
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        stderr_path = (log_dir or Path("/tmp")) / f"member-{group}-{os.getpid()}-{id(self)}.log"
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.stderr_path = stderr_path
        root = Path(__file__).resolve().parents[2]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            cwd=str(root),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["at"] = time.monotonic()
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def assignment(self) -> list[int] | None:
        assigned = [e for e in self.snapshot() if e["event"] == "assigned"]
        return assigned[-1]["partitions"] if assigned else None

    def assignments(self) -> list[list[int]]:
        return [e["partitions"] for e in self.snapshot() if e["event"] == "assigned"]

    def values(self) -> list[str]:
        return [e["value"] for e in self.snapshot() if e["event"] == "message"]

    def wait(self, predicate: Callable[[Member], bool], timeout_s: float, what: str) -> None:
        def check() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"member exited: {self.stderr_path.read_text()[-2000:]}")
            return predicate(self)

        wait_until(check, timeout_s=timeout_s, what=what)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if not self._stderr.closed:
            self._stderr.close()

    def stop(self) -> None:
        """SIGINT: the client closes (a dynamic member sends LeaveGroup)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_pipes()


def stop_all(members: list[Member]) -> None:
    for member in members:
        if member.process.poll() is None:
            member.process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 15
    for member in members:
        try:
            member.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            member.process.kill()
            member.process.wait()
        member._close_pipes()
