"""Start real `knode` processes on loopback for tests (one node or several).

    with KnodeCluster(tmp_path, node_count=1) as cluster:
        cluster.bootstrap_servers            # "127.0.0.1:PORT"
        cluster.stop(1)                      # SIGTERM, wait for exit
        cluster.kill(1)                      # SIGKILL
        cluster.start(1)                     # restart, same data dir and ports

Each node gets free loopback ports (client listener and quorum port, tests/support/ports.py),
its data in `<base>/node-<id>` (kept across restarts), and `--set` flags for `listeners`,
`log.dirs` and `controller.quorum.voters` (several nodes share a `controller.quorum.secret`
unless `settings` give one). By default every node is a voter (`process.roles` left at its
default, broker,controller); `voter_count=V` makes nodes 1..V the voters and the others
broker-only quorum learners (`--set process.roles=broker`, their quorum port unused), which
never become the controller. Extra `--set` flags go to every node (`settings=`) or one node
(`node_settings=`). stderr of each run goes to
`<base>/node-<id>.stderr.log`; `describe_failure()` returns the tails of those logs, and the
context manager appends them to any exception raised inside it. Every process started is
killed on exit (SIGKILL after a SIGTERM grace period).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.support.ports import free_port
from tests.support.waiting import port_accepts, wait_until

KNODE = [sys.executable, "-m", "trafka.tools.knode"]
START_TIMEOUT_S = 90.0
"""Generous: on 2 shared cores under load a node (imports + quorum) can take 30 s."""
STOP_TIMEOUT_S = 20.0


@dataclass
class NodeProcess:
    node_id: int
    port: int
    quorum_port: int
    data_dir: Path
    stderr_path: Path
    extra: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KnodeCluster:
    def __init__(
        self,
        base_dir: Path,
        *,
        node_count: int = 1,
        settings: Iterable[str] = (),
        node_settings: Mapping[int, Iterable[str]] | None = None,
        start: bool = True,
        voter_count: int | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.voter_count = node_count if voter_count is None else voter_count
        assert 1 <= self.voter_count <= node_count, "voter_count must be in 1..node_count"
        self.settings = list(settings)
        if node_count > 1 and not any(
            item.startswith("controller.quorum.secret") for item in self.settings
        ):
            # several nodes need a shared secret (a lone voter generates its own)
            self.settings.append("controller.quorum.secret=knode-cluster-test-secret")
        self.nodes: dict[int, NodeProcess] = {}
        for node_id in range(1, node_count + 1):
            self.nodes[node_id] = NodeProcess(
                node_id=node_id,
                port=free_port(),
                quorum_port=free_port(),
                data_dir=base_dir / f"node-{node_id}",
                stderr_path=base_dir / f"node-{node_id}.stderr.log",
                extra=list((node_settings or {}).get(node_id, ())),
            )
        self._start_on_enter = start

    # ---- addresses ----------------------------------------------------------------------------
    @property
    def voters(self) -> str:
        """`controller.quorum.voters`: nodes 1..voter_count."""
        return ",".join(
            f"{n.node_id}@127.0.0.1:{n.quorum_port}"
            for n in self.nodes.values()
            if self.is_voter(n.node_id)
        )

    def is_voter(self, node_id: int) -> bool:
        return node_id <= self.voter_count

    @property
    def broker_only_ids(self) -> list[int]:
        return [node_id for node_id in self.nodes if not self.is_voter(node_id)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.nodes[node_id].port}"

    def command(self, node_id: int) -> list[str]:
        node = self.nodes[node_id]
        args = [
            *KNODE,
            "start",
            "--id",
            str(node_id),
            "--set",
            f"listeners=PLAINTEXT://127.0.0.1:{node.port}",
            "--set",
            f"log.dirs={node.data_dir}",
            "--set",
            f"controller.quorum.voters={self.voters}",
        ]
        if not self.is_voter(node_id):
            args += ["--set", "process.roles=broker"]
        for item in [*self.settings, *node.extra]:
            args += ["--set", item]
        return args

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self, node_id: int, *, wait: bool = True) -> None:
        node = self.nodes[node_id]
        assert not node.running, f"node {node_id} already running"
        node.data_dir.parent.mkdir(parents=True, exist_ok=True)
        stderr = open(node.stderr_path, "ab")  # noqa: SIM115 - owned by the child
        stderr.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
        stderr.flush()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            node.process = subprocess.Popen(
                self.command(node_id),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(self.base_dir),
            )
        finally:
            stderr.close()
        if wait:
            self.wait_ready(node_id)

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id, wait=False)
        for node_id in self.nodes:
            self.wait_ready(node_id)

    def wait_ready(self, node_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        node = self.nodes[node_id]

        def ready() -> bool:
            if not node.running:
                raise AssertionError(
                    f"node {node_id} exited with {node.process and node.process.returncode}"
                    f"\n{self.describe_failure()}"
                )
            return port_accepts(node.port)

        wait_until(ready, timeout_s=timeout_s, what=f"node {node_id} to accept connections")

    def stop(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; returns the exit code (SIGKILL if it does not exit in time)."""
        node = self.nodes[node_id]
        if node.process is None:
            return 0
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
                raise AssertionError(
                    f"node {node_id} ignored SIGTERM for {timeout_s}s\n{self.describe_failure()}"
                ) from None
        code = node.process.returncode
        node.process = None
        return int(code)

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.process is not None:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait()
            node.process = None

    def restart(self, node_id: int, *, hard: bool = False) -> None:
        if hard:
            self.kill(node_id)
        else:
            self.stop(node_id)
        self.start(node_id)

    def close(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in self.nodes.values():
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
            node.process = None

    def describe_failure(self, lines: int = 40) -> str:
        parts = []
        for node in self.nodes.values():
            if node.stderr_path.exists():
                tail = node.stderr_path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- node {node.node_id} stderr ({node.stderr_path}) ---")
                parts.extend(tail)
        return "\n".join(parts)

    def __enter__(self) -> KnodeCluster:
        if self._start_on_enter:
            try:
                self.start_all()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is not None and isinstance(exc, Exception):
                exc.add_note(self.describe_failure())
        finally:
            self.close()
