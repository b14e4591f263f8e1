"""Long fuzzing runs against a live 3-node cluster (issue 12, item 8).

    .venv/bin/python bench/fuzz.py [--frames 1000000] [--seed 1] [--stall-s 1.0]
        [--broker-apis] [--open-findings] [--apis 50,51] [--maximal-counts 200,1000,3000]
        [--keep DIR] [--watchdog-ms 500]

Starts three `knode` processes (tests/support/cluster.py, data in a temporary directory),
creates the clients' topic (3 partitions, RF 3, min.insync.replicas 2) and a topic for the
fuzzer, then sends `--frames` generated frames (tests/fuzz/generate.py: hostile well-formed
requests for every advertised API and version, their mutations, mutated Produce of the
captured real-client batches, raw junk) while a confluent-kafka producer sends numbered
messages with acks=all and a heartbeat probe asks every node ApiVersions every 200 ms.

Afterwards it checks and prints: nodes that exited, heartbeat answers slower than
`--stall-s` (the issue's bound: 1 s), acknowledged messages missing from the topic, and
`ktool audit check` over the three log dirs. Exit status 0 only if all are clean.
`--broker-apis` also sends LeaderAndIsr/StopReplica/UpdateMetadata/ControlledShutdown and
follower fetches (meaningful once the inter-broker listener, issue 12 item 2, is in).
The same run at 60 seconds is tests/fuzz/test_fuzz.py (part of `make test`). `kill -USR1`
ends the sending early and still runs the checks (a progress line every 50,000 frames).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fuzz.test_fuzz import SETTINGS, audit_check, run_campaign  # noqa: E402
from tests.support.cluster import KnodeCluster  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stall-s", type=float, default=1.0)
    parser.add_argument("--broker-apis", action="store_true")
    parser.add_argument("--maximal-counts", default="200,1000,3000")
    parser.add_argument(
        "--open-findings", action="store_true", help="also the APIs of OPEN_FINDING_APIS"
    )
    parser.add_argument("--apis", help="only these API keys (comma-separated), e.g. 50,51")
    parser.add_argument("--keep", type=Path, help="keep the cluster's data and logs here")
    parser.add_argument(
        "--watchdog-ms",
        type=int,
        default=500,
        help="the nodes' loop.watchdog.threshold.ms: a loop held longer is logged with its stack",
    )
    args = parser.parse_args()
    counts = tuple(int(c) for c in args.maximal_counts.split(","))
    base = args.keep or Path(tempfile.mkdtemp(prefix="trafka-fuzz-"))
    # SIGUSR1 ends the sending early; the checks (heartbeats, lost messages, audit) still run
    # and the report says how many frames were sent.
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    started = time.monotonic()
    settings = [*SETTINGS, f"loop.watchdog.threshold.ms={args.watchdog_ms}"]
    with KnodeCluster(base, node_count=3, settings=settings, start=False) as cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=120)
        outcome = run_campaign(
            cluster,
            seed=args.seed,
            duration_s=None,
            frames=args.frames,
            maximal_counts=counts,
            broker_apis=args.broker_apis,
            open_findings=args.open_findings,
            only_apis=frozenset(int(k) for k in args.apis.split(",")) if args.apis else None,
            stall_s=args.stall_s,
            progress_every=50_000,
            stop=stop,
        )
        audit = audit_check(cluster, base)
    report = outcome["report"]
    print(f"{time.monotonic() - started:.0f} s, seed {args.seed}: {report.summary()}")  # type: ignore[attr-defined]
    print(f"advertised: {len(outcome['supported'])} APIs")  # type: ignore[arg-type]
    covered: dict[int, list[int]] = {}
    for key, version in sorted(report.apis):  # type: ignore[attr-defined]
        covered.setdefault(key, []).append(version)
    print(
        f"covered: {len(covered)} APIs: "
        + ", ".join(f"{k} v{min(v)}-{max(v)}" for k, v in covered.items())
    )
    print(f"slowest heartbeat per node: {outcome['slowest']}")
    print(f"stalls over {args.stall_s} s: {outcome['stalls']}")
    print(f"nodes exited: {outcome['exited']}")
    for node_id, node in cluster.nodes.items():
        held = [
            line
            for line in node.stderr_path.read_text(errors="replace").splitlines()
            if "event loop held for" in line
        ]
        print(f"node {node_id}: loop held over {args.watchdog_ms} ms {len(held)} times")
        for line in held[:5]:
            print(f"  {line}")
    acked = outcome["acked"]
    print(f"acknowledged {len(acked)}, lost {len(outcome['lost'])}")  # type: ignore[arg-type]
    print(f"ktool audit check: exit {audit.returncode}")
    if audit.returncode:
        print(audit.stdout[-2000:], audit.stderr[-2000:])
    clean = (
        not outcome["exited"]
        and not outcome["stalls"]
        and not outcome["lost"]
        and audit.returncode == 0
    )
    print("clean" if clean else "NOT clean", f"(logs in {base})")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
