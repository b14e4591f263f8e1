"""Consumer-group speed on one knode: rebalance stabilisation and OffsetCommit rate (issue 6).

    .venv/bin/python bench/groups.py [--members 10] [--partitions 20] [--repeat 3]
        [--heartbeat-ms 100] [--default-heartbeat-repeat 1] [--commits 500]
        [--parallel 4] [--pure-commits 200000]

Starts a fresh `knode start --id 1` (tests/support/cluster.py, data in a temporary
directory, `group.initial.rebalance.delay.ms=0`), creates one topic with `--partitions`
partitions, and stops the node at the end.

* Stabilisation: `--members` confluent-kafka consumers (one thread each; librdkafka runs
  its own threads and `poll` releases the GIL) subscribe to the topic with
  `heartbeat.interval.ms=--heartbeat-ms` and poll every 10 ms; once every member holds a
  non-empty share and together they hold every partition exactly once, the group is
  stable. Then, per repeat:
    - join: one more member subscribes; time from its `Consumer()` creation to the moment
      every member (old and new) has had an `on_assign` after that instant and the
      assignments again cover every partition once (the latest `on_assign` timestamp);
    - leave: that member `close()`s (LeaveGroup); time from the start of `close()` to the
      remaining members all holding a new assignment covering every partition.
  The same is repeated `--default-heartbeat-repeat` times with librdkafka's default
  `heartbeat.interval.ms` (3000), in a second group (0 skips it).
* OffsetCommit: with consumers that never join (simple commits, generation -1, one
  partition per commit), `--commits` synchronous `commit(asynchronous=False)` calls from
  one client, then `--commits` each from `--parallel` clients at once (threads, one group
  each, all on the one node). Reference in the same run: the pure coordinator,
  `GroupCoordinator.offset_commit` in a loop (no network, no log append), `--pure-commits`
  calls. Wire rates are reported also as a ratio to that reference.

Prints each repeat and the median and range. Nothing is asserted: this is a benchmark.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOPIC = "bench-groups"
POLL_S = 0.01
WAIT_TIMEOUT_S = 120.0


# ---------------------------------------------------------------------------------------
# Group members


@dataclass
class Member:
    """One consumer in its own thread; `assignment` and `assigned_at` are written by the
    librdkafka callbacks (run inside `poll` on the member's thread)."""

    name: str
    config: dict[str, Any]
    assignment: frozenset[int] = frozenset()
    assigned_at: float = 0.0
    created_at: float = 0.0
    close_started_at: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import Consumer

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            self.assignment = frozenset(p.partition for p in partitions)
            self.assigned_at = time.monotonic()

        def on_revoke(_consumer: Any, _partitions: list[Any]) -> None:
            self.assignment = frozenset()

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


def wait_stable(members: list[Member], partitions: int, since: float) -> float:
    """Wait until every member had an on_assign after `since` and the assignments cover
    every partition exactly once; returns the latest on_assign time."""
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        for member in members:
            if member.error is not None:
                raise RuntimeError(f"{member.name}: {member.error}")
        snapshot = [(m.assignment, m.assigned_at) for m in members]
        if all(at > since and a for a, at in snapshot):
            owned = [p for a, _ in snapshot for p in a]
            if len(owned) == partitions and set(owned) == set(range(partitions)):
                return max(at for _, at in snapshot)
        time.sleep(0.002)
    raise RuntimeError("group did not stabilise in time")


def member_config(bootstrap: str, group: str, heartbeat_ms: int | None, i: int) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"bench-member-{i}",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "range",
    }
    if heartbeat_ms is not None:
        config["heartbeat.interval.ms"] = heartbeat_ms
    return config


def stabilisation(
    bootstrap: str, group: str, args: argparse.Namespace, heartbeat_ms: int | None, repeat: int
) -> tuple[list[float], list[float]]:
    """(join seconds, leave seconds), one of each per repeat."""
    members = [
        Member(f"m{i}", member_config(bootstrap, group, heartbeat_ms, i))
        for i in range(args.members)
    ]
    joins: list[float] = []
    leaves: list[float] = []
    label = (
        f"heartbeat.interval.ms={heartbeat_ms if heartbeat_ms is not None else '3000 (default)'}"
    )
    try:
        for member in members:
            member.start()
        wait_stable(members, args.partitions, since=0.0)
        for run in range(repeat):
            extra = Member(f"extra{run}", member_config(bootstrap, group, heartbeat_ms, 1000 + run))
            extra.start()
            while extra.created_at == 0.0:
                time.sleep(0.001)
            joined = wait_stable([*members, extra], args.partitions, extra.created_at)
            extra.leave()
            if extra.error is not None:
                raise RuntimeError(f"{extra.name}: {extra.error}")
            left = wait_stable(members, args.partitions, extra.close_started_at)
            joins.append(joined - extra.created_at)
            leaves.append(left - extra.close_started_at)
            print(
                f"  {label} run {run + 1}: {args.members} -> {args.members + 1} "
                f"{joins[-1]:.3f} s, {args.members + 1} -> {args.members} {leaves[-1]:.3f} s "
                f"(load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.closed.wait(30)
    return joins, leaves


# ---------------------------------------------------------------------------------------
# OffsetCommit


def committer(bootstrap: str, group: str, partition: int, count: int) -> Callable[[], float]:
    """A consumer that never joins; returns a function doing `count` synchronous commits
    and returning (elapsed seconds)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    # warm up: coordinator lookup and connection
    consumer.commit(offsets=[TopicPartition(TOPIC, partition, 0)], asynchronous=False)

    def run() -> float:
        try:
            started = time.perf_counter()
            for offset in range(1, count + 1):
                consumer.commit(
                    offsets=[TopicPartition(TOPIC, partition, offset)], asynchronous=False
                )
            return time.perf_counter() - started
        finally:
            consumer.close()

    return run


def wire_commits(bootstrap: str, clients: int, count: int, tag: str) -> float:
    """Commits per second of `clients` clients each doing `count` synchronous commits."""
    runs = [committer(bootstrap, f"bench-commit-{tag}-{i}", i % 20, count) for i in range(clients)]
    results: list[float] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def body(run: Callable[[], float]) -> None:
        barrier.wait()
        try:
            results.append(run())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=body, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"commit failed: {errors[0]}")
    return clients * count / elapsed


def pure_commits(count: int) -> float:
    """Commits per second of `GroupCoordinator.offset_commit` alone (simple commits of one
    partition, generation -1), no network and no log."""
    from trafka.group.config import GroupConfig
    from trafka.group.coordinator import GroupCoordinator
    from trafka.group.messages import CommitPartition, OffsetCommitRequest

    coordinator = GroupCoordinator(GroupConfig(), random.Random(0))
    requests = [
        OffsetCommitRequest(
            "bench-pure", -1, "", None, -1, (CommitPartition(TOPIC, 0, offset, -1, None),)
        )
        for offset in range(count)
    ]
    commit = coordinator.offset_commit
    started = time.perf_counter()
    for now_ms, request in enumerate(requests):
        commit(request, now_ms)
    return count / (time.perf_counter() - started)


# ---------------------------------------------------------------------------------------


def create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)], operation_timeout=10)[TOPIC].result(
        timeout=30
    )


def summary(name: str, values: list[float], spec: str) -> None:
    if not values:
        return
    print(
        f"{name:<44} median {statistics.median(values):{spec}}  "
        f"range {min(values):{spec}} - {max(values):{spec}}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--default-heartbeat-repeat", type=int, default=1)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--pure-commits", type=int, default=200_000)
    args = parser.parse_args()

    import confluent_kafka

    from tests.support.cluster import KnodeCluster

    version: Any = confluent_kafka.version()  # a str in 2.16, a (str, int) tuple before
    client_version = version if isinstance(version, str) else version[0]
    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"confluent-kafka {client_version}, librdkafka "
        f"{confluent_kafka.libversion()[0]}, load average {os.getloadavg()[0]:.1f}"
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-groups-") as base,
        KnodeCluster(
            Path(base), node_count=1, settings=["group.initial.rebalance.delay.ms=0"]
        ) as cluster,
    ):
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, args.partitions)
        print(f"{args.members}-member group, topic of {args.partitions} partitions, range assignor")
        joins, leaves = stabilisation(
            bootstrap, "bench-g-fast", args, args.heartbeat_ms, args.repeat
        )
        default_joins: list[float] = []
        default_leaves: list[float] = []
        if args.default_heartbeat_repeat > 0:
            default_joins, default_leaves = stabilisation(
                bootstrap, "bench-g-default", args, None, args.default_heartbeat_repeat
            )

        single: list[float] = []
        parallel: list[float] = []
        pure: list[float] = []
        for run in range(args.repeat):
            pure.append(pure_commits(args.pure_commits))
            single.append(wire_commits(bootstrap, 1, args.commits, f"{run}-single"))
            parallel.append(wire_commits(bootstrap, args.parallel, args.commits, f"{run}-par"))
            print(
                f"  commits run {run + 1}: pure {pure[-1]:,.0f}/s, 1 client {single[-1]:,.0f}/s "
                f"({single[-1] / pure[-1]:.3f}x), {args.parallel} clients "
                f"{parallel[-1]:,.0f}/s ({parallel[-1] / pure[-1]:.3f}x) "
                f"(load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    print("---")
    n = args.members
    summary(f"join {n}->{n + 1}, hb {args.heartbeat_ms} ms, s", joins, ".3f")
    summary(f"leave {n + 1}->{n}, hb {args.heartbeat_ms} ms, s", leaves, ".3f")
    summary(f"join {n}->{n + 1}, hb default, s", default_joins, ".3f")
    summary(f"leave {n + 1}->{n}, hb default, s", default_leaves, ".3f")
    summary("pure coordinator commits/s", pure, ",.0f")
    summary("wire commits/s, 1 client", single, ",.0f")
    summary(f"wire commits/s, {args.parallel} clients", parallel, ",.0f")
    summary("ratio wire/pure, 1 client", [s / p for s, p in zip(single, pure, strict=True)], ".3f")
    summary(
        f"ratio wire/pure, {args.parallel} clients",
        [s / p for s, p in zip(parallel, pure, strict=True)],
        ".3f",
    )


if __name__ == "__main__":
    main()
