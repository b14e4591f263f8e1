"""Rebalance time of a consumer group under the classic and the KIP-848 protocol (issue 18).

    .venv/bin/python bench/rebalance_protocols.py [--members 10] [--partitions 20]
        [--repeat 3] [--heartbeat-ms N]

Starts one fresh knode (tests/support/cluster.py, `group.initial.rebalance.delay.ms=0`),
creates a topic of `--partitions` partitions, and for each protocol
(`classic` with librdkafka's eager `range`, `classic` with `cooperative-sticky`, and
`consumer`, KIP-848 with the server-side `uniform` assignor) forms a group of `--members`
confluent-kafka consumers (one thread each, polling every 10 ms), then per repeat:

* join: one more member subscribes; time from its `Consumer()` creation until every member
  holds at least one partition and together they hold every partition exactly once;
* leave: that member closes (LeaveGroup / heartbeat with epoch -1); time from the start of
  `close()` until the remaining members again hold every partition exactly once.

Assignments are tracked from the rebalance callbacks (full sets for eager `range`,
increments otherwise). Heartbeat intervals are the defaults unless `--heartbeat-ms` is given:
librdkafka's `heartbeat.interval.ms` 3000 for classic members, the broker's
`group.consumer.heartbeat.interval.ms` 5000 for KIP-848 members (`--heartbeat-ms` sets both,
and lowers `group.consumer.min.heartbeat.interval.ms` to match). Also printed: the pause, i.e.
the longest time any member held no partition during the join (eager rebalances stop
everyone; incremental ones only move what moves). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOPIC = "bench-rebalance"
POLL_S = 0.01
WAIT_TIMEOUT_S = 120.0


@dataclass
class Member:
    name: str
    config: dict[str, Any]
    assignment: frozenset[int] = frozenset()
    emptied_at: float | None = None
    longest_empty_s: float = 0.0
    created_at: float = 0.0
    close_started_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def start(self) -> None:
        threading.Thread(target=self._run, name=self.name, daemon=True).start()

    def _set(self, assignment: frozenset[int]) -> None:
        now = time.monotonic()
        with self.lock:
            if self.assignment and not assignment:
                self.emptied_at = now
            elif assignment and not self.assignment and self.emptied_at is not None:
                self.longest_empty_s = max(self.longest_empty_s, now - self.emptied_at)
                self.emptied_at = None
            self.assignment = assignment

    def _run(self) -> None:
        from confluent_kafka import Consumer

        eager = self.config.get("partition.assignment.strategy") == "range"

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            added = frozenset(p.partition for p in partitions)
            self._set(added if eager else self.assignment | added)

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            removed = frozenset(p.partition for p in partitions)
            self._set(frozenset() if eager else self.assignment - removed)

        try:
            self.created_at = time.monotonic()
            consumer = Consumer(self.config)
            consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
            while not self.stop.is_set():
                consumer.poll(POLL_S)
            self.close_started_at = time.monotonic()
            consumer.close()
        except BaseException as error:  # reported by the main thread
            self.error = error
        finally:
            self.closed.set()

    def leave(self) -> None:
        self.stop.set()
        if not self.closed.wait(WAIT_TIMEOUT_S):
            raise RuntimeError(f"{self.name} did not close")

    def reset_pause(self) -> None:
        with self.lock:
            self.longest_empty_s = 0.0


def wait_covered(members: list[Member], partitions: int) -> float:
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        for member in members:
            if member.error is not None:
                raise RuntimeError(f"{member.name}: {member.error}")
        owned = [m.assignment for m in members]
        flat = [p for a in owned for p in a]
        if all(owned) and len(flat) == partitions and set(flat) == set(range(partitions)):
            return time.monotonic()
        time.sleep(0.002)
    raise RuntimeError("group did not stabilise in time")


def config(bootstrap: str, group: str, protocol: str, heartbeat_ms: int | None) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"
    else:
        settings["partition.assignment.strategy"] = protocol
        if heartbeat_ms is not None:
            settings["heartbeat.interval.ms"] = heartbeat_ms
    return settings


def run_protocol(
    bootstrap: str, protocol: str, args: argparse.Namespace
) -> tuple[list[float], list[float], list[float]]:
    group = f"bench-{protocol}"
    members = [
        Member(f"{protocol}-{i}", config(bootstrap, group, protocol, args.heartbeat_ms))
        for i in range(args.members)
    ]
    joins: list[float] = []
    leaves: list[float] = []
    pauses: list[float] = []
    try:
        for member in members:
            member.start()
        wait_covered(members, args.partitions)
        for run in range(args.repeat):
            for member in members:
                member.reset_pause()
            extra = Member(
                f"{protocol}-extra{run}", config(bootstrap, group, protocol, args.heartbeat_ms)
            )
            extra.start()
            while extra.created_at == 0.0:
                time.sleep(0.001)
            joined = wait_covered([*members, extra], args.partitions)
            pauses.append(max(m.longest_empty_s for m in members))
            extra.leave()
            left = wait_covered(members, args.partitions)
            joins.append(joined - extra.created_at)
            leaves.append(left - extra.close_started_at)
            print(
                f"  {protocol:<18} run {run + 1}: join {joins[-1]:.3f} s "
                f"(longest pause of a member {pauses[-1]:.3f} s), leave {leaves[-1]:.3f} s "
                f"(load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.closed.wait(30)
    return joins, leaves, pauses


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--heartbeat-ms", type=int, default=None)
    args = parser.parse_args()

    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from tests.support.cluster import KnodeCluster

    version: Any = confluent_kafka.version()
    client_version = version if isinstance(version, str) else version[0]
    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"confluent-kafka {client_version}, librdkafka {confluent_kafka.libversion()[0]}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    settings = ["group.initial.rebalance.delay.ms=0"]
    if args.heartbeat_ms is not None:
        settings += [
            f"group.consumer.heartbeat.interval.ms={args.heartbeat_ms}",
            f"group.consumer.min.heartbeat.interval.ms={args.heartbeat_ms}",
        ]
    with (
        tempfile.TemporaryDirectory(prefix="bench-rebalance-") as base,
        KnodeCluster(Path(base), node_count=1, settings=settings) as cluster,
    ):
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        print(f"{args.members}-member groups, topic of {args.partitions} partitions")
        results = {
            protocol: run_protocol(bootstrap, protocol, args)
            for protocol in ("range", "cooperative-sticky", "consumer")
        }
    for protocol, (joins, leaves, pauses) in results.items():
        name = "KIP-848 (uniform)" if protocol == "consumer" else f"classic {protocol}"
        print(
            f"{name:<28} join median {statistics.median(joins):.3f} s "
            f"({min(joins):.3f} - {max(joins):.3f}), leave median "
            f"{statistics.median(leaves):.3f} s ({min(leaves):.3f} - {max(leaves):.3f}), "
            f"longest member pause median {statistics.median(pauses):.3f} s"
        )


if __name__ == "__main__":
    main()
