"""100 MB of junk on a voter's quorum port does not delay quorum writes (issue 12 item 7).

Three real quorum processes (tests/metadata_quorum/quorum_proc.py, the production
RaftTransport). A client floods the leader's quorum port with 100 MB: every connection
announces a 100 MB frame (pysyncobj alone would buffer it with a quadratic `bytes +=` on its
tick thread before decrypting: writes then time out for as long as the flood lasts) or
sends random bytes, and reconnects whenever the node closes it. Meanwhile the leader times
sequential writes in-process; they must stay within 100 ms of the baseline measured before.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from tests.metadata_quorum.proc_support import leader_of, ports_of, quorum_cluster

pytestmark = [pytest.mark.slow]

JUNK_BYTES = 100 * 1024 * 1024
MAX_EXTRA_MS = 100.0


class Flood:
    def __init__(self, port: int, total: int) -> None:
        self.port = port
        self.total = total
        self.sent = 0
        self.connections = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        chunk = os.urandom(256 * 1024)
        try:
            while self.sent < self.total:
                self.connections += 1
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                        if self.connections % 2:
                            sock.sendall(struct.pack("i", self.total))  # "a 100 MB frame"
                        while self.sent < self.total:
                            sock.sendall(chunk)
                            self.sent += len(chunk)
                except OSError:
                    continue
        finally:
            self.done.set()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def test_junk_on_the_quorum_port_does_not_delay_writes(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path, voters=3) as members:
        leader = leader_of(members)
        leader.ok("create", path="/junk-probe")
        leader.ok("timed_sets", path="/junk-probe", n=50)  # warm up
        baseline: list[float] = leader.ok("timed_sets", path="/junk-probe", n=300)["latencies_ms"]
        flood = Flood(ports_of(members)[leader.node_id], JUNK_BYTES)
        flood.thread.start()
        during: list[float] = []
        while not flood.done.is_set():
            reply = leader.request("timed_sets", timeout_s=30, path="/junk-probe", n=20)
            assert reply["ok"], reply
            during += reply["latencies_ms"]
        flood.thread.join(timeout=30)
        assert flood.sent >= JUNK_BYTES
        assert len(during) >= 20, "the flood ended before writes could be measured"
        assert all(m.alive for m in members)
        base_max, base_p99 = max(baseline), _percentile(baseline, 0.99)
        worst, p99 = max(during), _percentile(during, 0.99)
        print(
            f"baseline p50 {_percentile(baseline, 0.5):.1f} p99 {base_p99:.1f} max {base_max:.1f}"
            f" ms; during junk p50 {_percentile(during, 0.5):.1f} "
            f"({flood.connections} connections, {len(during)} writes) p99 {p99:.1f} "
            f"max {worst:.1f} ms"
        )
        assert worst <= base_max + MAX_EXTRA_MS, (worst, base_max)
        # the leader is still the leader, and the others saw every write
        assert leader_of(members).node_id == leader.node_id
        final = leader.ok("get", path="/junk-probe")["data"]
        for member in members:
            assert member.ok("get", path="/junk-probe")["data"] == final
