"""Start and drive `quorum_proc.py` members from plain (sync) tests."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.ports import free_ports
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SECRET = "process-test-secret"


class Member:
    """One quorum_proc process: request/response over stdin/stdout, events collected."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.node_id: int = settings["node_id"]
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[dict[str, Any]] = []
        self.reader: threading.Thread | None = None
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.ready = threading.Event()

    def start(self) -> None:
        if self.proc is not None:
            self.proc.wait(timeout=10)
            if self.reader is not None:
                self.reader.join(timeout=10)
            self._close_pipes()
        self.ready.clear()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.metadata_quorum.quorum_proc", json.dumps(self.settings)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self.reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        try:
            self._dispatch_lines(proc)
        finally:
            proc.stdout.close()

    def _dispatch_lines(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("ready"):
                self.ready.set()
            elif "event" in message:
                with self._lock:
                    self.events.append(message)
            elif "id" in message:
                with self._lock:
                    box = self._replies.get(message["id"])
                if box is not None:
                    box.put(message)

    def request(self, op: str, timeout_s: float = 15.0, **fields: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        request_id = next(self._ids)
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._replies[request_id] = box
        self.proc.stdin.write(json.dumps({"id": request_id, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        try:
            return box.get(timeout=timeout_s)
        finally:
            with self._lock:
                self._replies.pop(request_id, None)

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.request(op, **fields)
        assert reply["ok"], reply
        return reply

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signum)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.reader is not None:
            self.reader.join(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def settings_for(node_id: int, voters: str, data_root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "voters": voters,
        "data_dir": str(data_root / f"node-{node_id}"),
        "secret": SECRET,
        "election_timeout_ms": 200,
        "session_timeout_ms": 1500,
        "heartbeat_interval_ms": 300,
        "attempt_timeout_ms": 500,
        **extra,
    }


@contextmanager
def quorum_cluster(data_root: Path, voters: int = 3, learners: int = 0) -> Iterator[list[Member]]:
    """Voters 1..n on loopback (ports below 32768) and learners n+1..; all killed at the end."""
    ports = free_ports(voters)
    voter_text = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(ports))
    members = [
        Member(settings_for(node_id, voter_text, data_root))
        for node_id in range(1, voters + learners + 1)
    ]
    try:
        for member in members:
            member.start()
        for member in members:
            wait_until(member.ready.is_set, timeout_s=20, what=f"node {member.node_id} ready")
        yield members
    finally:
        for member in members:
            member.kill()


def ports_of(members: list[Member]) -> dict[int, int]:
    text = members[0].settings["voters"]
    return {int(item.split("@")[0]): int(item.rsplit(":", 1)[1]) for item in text.split(",")}


def leader_of(members: list[Member], timeout_s: float = 10.0) -> Member:
    """The member every live member agrees is the leader."""

    def agreed() -> Member | None:
        ids = {m.request("status", timeout_s=2)["leader_id"] for m in members if m.alive}
        if len(ids) == 1:
            (leader_id,) = ids
            return next((m for m in members if m.node_id == leader_id and m.alive), None)
        return None

    return wait_until(agreed, timeout_s=timeout_s, interval_s=0.02, what="an agreed leader")


def now() -> float:
    return time.monotonic()
