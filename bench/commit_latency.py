"""Synchronous OffsetCommit latency on a 3-node trafka cluster, optionally A/B (issue 19, G1).

    .venv/bin/python bench/commit_latency.py [--rounds 3] [--commits 500] [--nodes 3]
    git archive main trafka | tar -x -C /tmp/base && cp trafka/log/_recordscan*.so \\
        /tmp/base/trafka/log/        # optional: the C record scanner, as built here
    .venv/bin/python bench/commit_latency.py --baseline /tmp/base     # main vs this tree

Per round, a fresh cluster of `--nodes` knodes (each voter and broker; `__consumer_offsets`
with Kafka's defaults: 50 partitions, RF=3), a topic `g1` (RF=3), 50 warm-up commits, then
`--commits` synchronous `commit(asynchronous=False)` of one partition from one
confluent-kafka consumer (bench/vs_kafka.py's `commits` worker): commits/s, p50, p99 and
the nodes' CPU per commit (user+system from /proc over the commits). With `--baseline DIR`
each round first runs the trafka package found in DIR (put on PYTHONPATH of the nodes), then
this tree's, so the two share the machine's load; the medians of both are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_kafka  # bench/ is not a package: found through sys.path above


def one_round(nodes: int, commits: int, baseline: Path | None) -> dict[str, Any]:
    if baseline is not None:
        os.environ["PYTHONPATH"] = str(baseline)
    else:
        os.environ.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="trafka-commit-latency-") as tmp:
        target = vs_kafka.Trafka(Path(tmp), nodes)
        with vs_kafka.started(target):
            bootstrap = target.bootstrap_servers
            vs_kafka.create_topic(bootstrap, "g1", 1, min(3, nodes), {})
            job = {"bootstrap": bootstrap, "topic": "g1"}
            vs_kafka.run_workers("commits", [{**job, "commits": 50}], 0)
            before = target.cpu_s()
            result = vs_kafka.run_workers("commits", [{**job, "commits": commits}], 0)[0]
            result["cpu_ms_per_commit"] = 1000 * (target.cpu_s() - before) / commits
            result["load"] = os.getloadavg()[0]
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    variants: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline is not None:
        variants.insert(0, ("baseline", args.baseline.resolve()))
    print(f"load average before: {vs_kafka.load_average()}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    for round_ in range(args.rounds):
        for name, path in variants:
            result = one_round(args.nodes, args.commits, path)
            results[name].append(result)
            print(
                f"round {round_ + 1} {name}: {result['rate']:.1f} commits/s, "
                f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
                f"CPU {result['cpu_ms_per_commit']:.2f} ms/commit (load {result['load']:.1f})",
                flush=True,
            )
    for name, runs in results.items():
        print(
            f"{name}: median {statistics.median(r['rate'] for r in runs):.1f} commits/s, "
            f"p50 {statistics.median(r['p50_ms'] for r in runs):.2f} ms, "
            f"CPU {statistics.median(r['cpu_ms_per_commit'] for r in runs):.2f} ms/commit"
        )
    print(f"load average after: {vs_kafka.load_average()}")


if __name__ == "__main__":
    main()
