"""Metadata quorum benchmark: committed-write latency and throughput on three real voters.

    .venv/bin/python bench/quorum_bench.py [--writes 2000] [--concurrency 32]

Starts three voter processes on loopback (each runs the trio bridge over pysyncobj, with the
cluster secret, i.e. Fernet on every frame, and the file journal), then asks the leader and a
follower to:

* issue sequential synchronous creates (each awaited until committed and applied locally):
  p50/p99 latency and writes/s;
* issue creates from many concurrent trio tasks: throughput;
* create 1,000 znodes in ONE multi vs 1,000 separate creates.

The reference, measured in the same run, is the same sequential loop on a one-voter quorum
(no replication round trip): the ratio shows what replication adds. Goal: p50 <= 2 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SECRET = "bench-secret"


# ---------------------------------------------------------------------------------------
# Worker (one voter process)


def worker(settings: dict[str, Any]) -> None:
    import trio

    from trafka.metadata_quorum.bridge import open_metadata_quorum
    from trafka.metadata_quorum.config import QuorumConfig, parse_voters
    from trafka.metadata_quorum.tree import Create

    config = QuorumConfig(
        node_id=settings["node_id"],
        voters=parse_voters(settings["voters"]),
        data_dir=Path(settings["data_dir"]),
        secret=SECRET,
        election_timeout_ms=300,
        session_timeout_ms=9000,
        heartbeat_interval_ms=2000,
    )

    def emit(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    async def run() -> None:
        async with open_metadata_quorum(config) as quorum:
            await quorum.wait_ready()
            emit({"ready": True})
            prefix = f"/bench-{config.node_id}"
            await quorum.create_recursive(prefix)
            counter = 0
            while True:
                line = await trio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    return
                request = json.loads(line)
                op = request["op"]
                if op == "quit":
                    return
                if op == "status":
                    status = quorum.status()
                    emit({"leader_id": status.leader_id, "is_leader": status.is_leader})
                elif op == "sequential":
                    latencies = []
                    for _ in range(request["n"]):
                        counter += 1
                        start = time.perf_counter()
                        await quorum.create(f"{prefix}/s{counter}")
                        latencies.append(time.perf_counter() - start)
                    emit({"latencies": latencies})
                elif op == "concurrent":
                    n, tasks = request["n"], request["tasks"]
                    base = counter
                    counter += n

                    async def writer(
                        index: int, n: int = n, tasks: int = tasks, base: int = base
                    ) -> None:
                        for i in range(index, n, tasks):
                            await quorum.create(f"{prefix}/c{base + i}")

                    start = time.perf_counter()
                    async with trio.open_nursery() as nursery:
                        for index in range(tasks):
                            nursery.start_soon(writer, index)
                    emit({"seconds": time.perf_counter() - start})
                elif op == "multi":
                    n = request["n"]
                    await quorum.create(f"{prefix}/m{counter}")
                    start = time.perf_counter()
                    await quorum.multi([Create(f"{prefix}/m{counter}/{i}") for i in range(n)])
                    multi_s = time.perf_counter() - start
                    await quorum.create(f"{prefix}/w{counter}")
                    start = time.perf_counter()
                    for i in range(n):
                        await quorum.create(f"{prefix}/w{counter}/{i}")
                    separate_s = time.perf_counter() - start
                    counter += 1
                    emit({"multi_s": multi_s, "separate_s": separate_s})

    if settings.get("switch_interval_s"):
        sys.setswitchinterval(settings["switch_interval_s"])
    trio.run(run)


# ---------------------------------------------------------------------------------------
# Coordinator


class Node:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.node_id = settings["node_id"]
        self.stderr_path = Path(settings["data_dir"] + ".stderr")
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with self.stderr_path.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=REPO,
            )

    def truncation_warnings(self) -> int:
        """pysyncobj's "truncating already-applied log entries" lines (PLATFORM §1.7 #5)."""
        return self.stderr_path.read_text().count("truncating already-applied")

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"node {self.node_id} exited")
        return dict(json.loads(line))

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        try:
            self.ask(op="quit")
        except (BrokenPipeError, RuntimeError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def free_ports(count: int) -> list[int]:
    from tests.support.ports import free_ports as pick

    return pick(count)


def start_cluster(size: int, root: Path, switch_interval_s: float | None) -> list[Node]:
    ports = free_ports(size)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    nodes = [
        Node(
            {
                "node_id": i + 1,
                "voters": voters,
                "data_dir": str(root / f"n{i + 1}"),
                "switch_interval_s": switch_interval_s,
            }
        )
        for i in range(size)
    ]
    for node in nodes:
        assert node.read().get("ready"), "node did not start"
    return nodes


def leader_and_follower(nodes: list[Node]) -> tuple[Node, Node | None]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        statuses = {node.node_id: node.ask(op="status") for node in nodes}
        leaders = {s["leader_id"] for s in statuses.values()}
        if len(leaders) == 1 and -1 not in leaders:
            (leader_id,) = leaders
            leader = next(n for n in nodes if n.node_id == leader_id)
            follower = next((n for n in nodes if n is not leader), None)
            return leader, follower
        time.sleep(0.05)
    raise RuntimeError("no leader")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def sequential(node: Node, writes: int) -> dict[str, float]:
    node.ask(op="sequential", n=min(200, writes))  # warm-up
    latencies = node.ask(op="sequential", n=writes)["latencies"]
    total = sum(latencies)
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "writes_per_s": len(latencies) / total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--multi", type=int, default=1000)
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        help="sys.setswitchinterval in the voters (seconds); default: the bridge's (1 ms)",
    )
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as scratch:
        root = Path(scratch)
        single = start_cluster(1, root / "single", args.switch_interval)
        try:
            results["reference_one_voter_leader"] = sequential(single[0], args.writes)
        finally:
            for node in single:
                node.stop()
        nodes = start_cluster(3, root / "three", args.switch_interval)
        try:
            leader, follower = leader_and_follower(nodes)
            results["three_voters_leader"] = sequential(leader, args.writes)
            if follower is not None:
                results["three_voters_follower"] = sequential(follower, args.writes)
            seconds = leader.ask(op="concurrent", n=args.writes, tasks=args.concurrency)["seconds"]
            results["three_voters_concurrent_writes_per_s"] = args.writes / seconds
            multi = leader.ask(op="multi", n=args.multi)
            results[f"create_{args.multi}_znodes"] = {
                "one_multi_ms": multi["multi_s"] * 1000,
                "separate_writes_ms": multi["separate_s"] * 1000,
                "speedup": multi["separate_s"] / multi["multi_s"],
            }
        finally:
            for node in nodes:
                node.stop()
            results["pysyncobj_truncation_warnings"] = sum(n.truncation_warnings() for n in nodes)
        results["load_average_1m"] = os.getloadavg()[0]
        results["switch_interval_s"] = args.switch_interval or "bridge default (0.001)"
    reference = results["reference_one_voter_leader"]["p50_ms"]
    results["ratio_p50_three_voters_vs_one_voter"] = (
        results["three_voters_leader"]["p50_ms"] / reference
    )
    print(json.dumps(results, indent=2))
    goal = results["three_voters_leader"]["p50_ms"] <= 2.0
    print(f"goal p50 <= 2 ms on three voters (leader): {'met' if goal else 'NOT met'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
