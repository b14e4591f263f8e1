"""knode processes for the chaos harness, each in its own network namespace (or, when
namespaces are unavailable, all on loopback with free ports, and every network nemesis
skipped).

In namespaces every node listens on its own address with the same ports (9092 for clients,
9093 for the quorum): `listeners=PLAINTEXT://10.213.X.(10+n):9092`,
`controller.quorum.voters=1@10.213.X.11:9093,...`. The process is started through
`ip netns exec`, which execs in place, so `process.pid` is knode's pid (SIGSTOP/SIGKILL reach
it directly). One node may get its log dir on a small tmpfs (`disk_node`), mounted with the
source name `chaos<run>` so a later run can find and unmount a leftover.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.netns import Network, Unavailable
from tests.support.ports import free_port
from tests.support.waiting import port_accepts

KNODE = [sys.executable, "-m", "trafka.tools.knode"]
NS_CLIENT_PORT = 9092
NS_QUORUM_PORT = 9093
STOP_TIMEOUT_S = 30.0


@dataclass
class ChaosNode:
    node_id: int
    host: str
    port: int
    quorum_port: int
    log_dir: Path
    stderr_path: Path
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    disk: Path | None = None
    """The tmpfs mount point holding this node's log dir (disk nemesis), if any."""
    starts: int = 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ChaosCluster:
    base_dir: Path
    node_count: int
    settings: list[str]
    network: Network | None
    run_id: int
    disk_node: int | None = None
    disk_mb: int = 256
    nodes: dict[int, ChaosNode] = field(default_factory=dict)
    disk_reason: str | None = None
    deaths: list[tuple[int, int]] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    """Deaths that were not Kafka's orderly halt (`halted_in_order`)."""
    """(node, exit code) of every exit the harness did not cause (-7: SIGBUS, ...)."""

    def __post_init__(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for node_id in range(1, self.node_count + 1):
            if self.network is not None:
                host, port, quorum = self.network.address(node_id), NS_CLIENT_PORT, NS_QUORUM_PORT
            else:
                host, port, quorum = "127.0.0.1", free_port(), free_port()
            self.nodes[node_id] = ChaosNode(
                node_id=node_id,
                host=host,
                port=port,
                quorum_port=quorum,
                log_dir=self.base_dir / f"node-{node_id}",
                stderr_path=self.base_dir / f"node-{node_id}.stderr.log",
            )
        if self.disk_node is not None:
            try:
                self._mount_disk(self.nodes[self.disk_node])
            except Unavailable as error:
                self.disk_reason = str(error)

    # ---- small disk --------------------------------------------------------------------------
    def _mount_disk(self, node: ChaosNode) -> None:
        if os.geteuid() != 0:
            raise Unavailable("mounting a tmpfs needs root")
        mount_point = self.base_dir / f"node-{node.node_id}-disk"
        mount_point.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={self.disk_mb}m",
                f"chaos{self.run_id}",
                str(mount_point),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise Unavailable(f"cannot mount a tmpfs: {result.stderr.strip()}")
        node.disk = mount_point
        node.log_dir = mount_point / "data"

    def fill_disk(self, node_id: int) -> int:
        """Fill the node's tmpfs until ENOSPC; returns the bytes written."""
        node = self.nodes[node_id]
        if node.disk is None:
            raise Unavailable(self.disk_reason or f"node {node_id} has no small disk")
        written = 0
        chunk = b"\0" * (1 << 20)
        fd = os.open(node.disk / "fill", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 20, 4096, 1):
                while True:
                    try:
                        written += os.write(fd, chunk[:size])
                    except OSError:
                        break
        finally:
            os.close(fd)
        return written

    def free_disk(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.disk is not None:
            (node.disk / "fill").unlink(missing_ok=True)

    def unmount(self) -> None:
        for node in self.nodes.values():
            if node.disk is not None:
                # keep the log dir for a post-mortem: the tmpfs goes with the mount
                with contextlib.suppress(OSError):
                    shutil.copytree(
                        node.log_dir, self.base_dir / f"node-{node.node_id}", dirs_exist_ok=True
                    )
                node.log_dir = self.base_dir / f"node-{node.node_id}"
                subprocess.run(["umount", "-l", str(node.disk)], capture_output=True, check=False)
                node.disk = None

    # ---- addresses ---------------------------------------------------------------------------
    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.quorum_port}" for n in self.nodes.values())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.nodes.values())

    def log_dirs(self) -> list[Path]:
        return [n.log_dir for n in self.nodes.values()]

    def command(self, node_id: int) -> list[str]:
        node = self.nodes[node_id]
        args = [
            *KNODE, "start", "--id", str(node_id),
            "--set", f"listeners=PLAINTEXT://{node.host}:{node.port}",
            "--set", f"log.dirs={node.log_dir}",
            "--set", f"controller.quorum.voters={self.voters}",
        ]  # fmt: skip
        for item in self.settings:
            args += ["--set", item]
        if self.network is not None:
            return [*self.network.exec_prefix(node_id), *args]
        return args

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            return
        if node.process is not None and node.process.returncode is not None:
            self.deaths.append((node_id, node.process.returncode))
            if not halted_in_order(node.process.returncode, node.stderr_path):
                self.crashes.append(
                    {"node": node_id, "exit_code": node.process.returncode,
                     "stderr": str(node.stderr_path)}
                )  # fmt: skip
        node.log_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(node.stderr_path, "ab") as stderr:
            stderr.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
            stderr.flush()
            node.process = subprocess.Popen(
                self.command(node_id),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                cwd=str(self.base_dir),
            )
        node.paused = False
        node.starts += 1

    def ready(self, node_id: int) -> bool:
        node = self.nodes[node_id]
        return node.running and not node.paused and port_accepts(node.port, node.host)

    def wait_ready(self, node_ids: list[int], timeout_s: float) -> list[int]:
        """Wait until the nodes accept connections; returns those that did not in time
        (a node that exited is restarted once while waiting)."""
        deadline = time.monotonic() + timeout_s
        pending = set(node_ids)
        restarted: set[int] = set()
        while pending and time.monotonic() < deadline:
            for node_id in sorted(pending):
                node = self.nodes[node_id]
                if not node.running and not node.paused and node_id not in restarted:
                    restarted.add(node_id)
                    self.start(node_id)
                if self.ready(node_id):
                    pending.discard(node_id)
            if pending:
                time.sleep(0.2)
        return sorted(pending)

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.process is not None:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait()
        node.process = None
        node.paused = False

    def terminate(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (controlled shutdown) and wait; SIGKILL after `timeout_s`. Returns the
        exit code, None if it had to be killed."""
        node = self.nodes[node_id]
        if node.process is None:
            return 0
        if node.paused:
            self.resume(node_id)
        code: int | None
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
            try:
                code = node.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
                code = None
        else:
            code = node.process.returncode
        node.process = None
        return code

    def pause(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            assert node.process is not None
            node.process.send_signal(signal.SIGSTOP)
            node.paused = True

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.process is not None and node.paused:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
            node.paused = False

    def close(self) -> None:
        for node_id in self.nodes:
            self.resume(node_id)
        for node in self.nodes.values():
            if node.running:
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for node_id in self.nodes:
            node = self.nodes[node_id]
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
            node.process = None

    def describe_failure(self, lines: int = 30) -> str:
        parts = []
        for node in self.nodes.values():
            if node.stderr_path.exists():
                tail = node.stderr_path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- node {node.node_id} stderr ({node.stderr_path}) ---")
                parts.extend(tail)
        return "\n".join(parts)


HALT_LINE = "Shutdown broker because"
"""The line a node logs before it halts on failed storage (trafka.log.storage_failure)."""


def halted_in_order(exit_code: int, stderr_path: Path) -> bool:
    """A node that stopped by itself did so as Kafka does (a full disk: its last log dir
    failed): exit code 1 after the halt line. Anything else (SIGBUS, a traceback) is a
    crash."""
    if exit_code != 1:
        return False
    try:
        text = stderr_path.read_text(errors="replace")
    except OSError:
        return False
    last_run = text[text.rfind("===== start") :]
    return HALT_LINE in last_run
