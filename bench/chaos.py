"""Long chaos runs (issue 16): `make chaos`, or directly

    .venv/bin/python bench/chaos.py [--nodes 3|5] [--duration 600] [--seed N]
                                    [--nemeses kill,pause,...] [--fast-timeouts]
                                    [--spark-audit/--no-spark-audit] [--no-namespaces]
                                    [--out DIR]

Environment defaults: CHAOS_NODES, CHAOS_DURATION, CHAOS_SEED. Without --seed a random seed
is drawn and printed first. Kafka's default timeouts are kept unless --fast-timeouts
(broker.session.timeout.ms=9000, replica.lag.time.max.ms=30000), so the unavailability
figures are Kafka-default ones. Prints the verdict last; exits 0 when valid, 1 when not.
Writes report.json, summary.md, history.json, timeline.html, clients.log and the nodes' logs
to --out (default /tmp/chaos-<seed>-<date>-<time>; a directory holding an earlier run's
nodes is refused). Runs as root (namespaces, nftables, tmpfs); a mechanism that is
unavailable is named once and its nemeses skipped.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.nemesis import ALL_NEMESES
from tests.chaos.runner import BASE_SETTINGS, FAST_TIMEOUTS, ChaosConfig, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=int(os.environ.get("CHAOS_NODES", "3")))
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("CHAOS_DURATION", "600"))
    )
    seed_default = os.environ.get("CHAOS_SEED")
    parser.add_argument("--seed", type=int, default=int(seed_default) if seed_default else None)
    parser.add_argument("--nemeses", default=",".join(ALL_NEMESES))
    parser.add_argument("--fast-timeouts", action="store_true")
    parser.add_argument(
        "--spark-audit", action=argparse.BooleanOptionalAction, default=True,
        help="also run ktool audit check (Spark) over the log dirs at the end",
    )  # fmt: skip
    parser.add_argument(
        "--no-namespaces", action="store_true",
        help="nodes on loopback (what a run without root does): network nemeses skipped",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    print(f"chaos seed {seed} (rerun: CHAOS_SEED={seed})", flush=True)
    nemeses = tuple(n for n in args.nemeses.split(",") if n)
    unknown = sorted(set(nemeses) - set(ALL_NEMESES))
    if unknown:
        parser.error(f"unknown nemeses {unknown}; known: {', '.join(ALL_NEMESES)}")
    long_run = args.duration >= 300
    config = ChaosConfig(
        seed=seed,
        base_dir=args.out or Path(f"/tmp/chaos-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"),
        nodes=args.nodes,
        duration_s=args.duration,
        nemeses=nemeses,
        settings=[*BASE_SETTINGS, *(FAST_TIMEOUTS if args.fast_timeouts else [])],
        hold_s=(12.0, 25.0) if long_run else (5.0, 9.0),
        quiet_s=(6.0, 12.0) if long_run else (4.0, 7.0),
        every_nemesis_once=long_run,
        message_timeout_ms=120_000,
        spark_audit=args.spark_audit,
        use_namespaces=not args.no_namespaces,
    )
    outcome = run_chaos(config)
    report = outcome.report
    print(f"seed {seed}", flush=True)
    for name, row in sorted(report.per_nemesis.items()):
        anomalies = {k: v for k, v in row["anomalies"].items() if v}
        print(
            f"  {name:22} faults {row['faults']:2}  acked {row['acked']:6}  "
            f"anomalies {anomalies or 0}  worst after fault {row['worst_after_fault_s']} s  "
            f"after heal {row['worst_after_heal_s']} s"
        )
    for name, reason in sorted(report.skipped.items()):
        print(f"  {name:22} skipped: {reason}")
    print(report.verdict, flush=True)
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
