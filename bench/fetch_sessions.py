"""Broker CPU per fetched MB for a consumer of 1,000 partitions, with and without incremental
fetch sessions (KIP-227, issue 18 item 2).

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--backlog-mb 20]
        [--tail-seconds 20] [--tail-rate 500] [--repeat 1]

For each mode, a fresh `knode start --id 1` (temporary data dir) with
`max.incremental.fetch.session.cache.slots` = 1000 (sessions, Kafka's default) or 0 (no
sessions: Kafka's way to turn them off; the client asks, the broker answers with session 0,
so every Fetch names every partition), one topic of `--partitions` partitions, then:

* backlog: `--backlog-mb` MB of 500-byte messages spread round-robin over all partitions
  (produced before the consumer starts), read from the log start by one kafka-python
  consumer (assign, no group; kafka-python opens fetch sessions when the broker allows);
* tail: the consumer at the log end while a producer sends `--tail-rate` messages/s of 500
  bytes round-robin over the partitions for `--tail-seconds`, until the consumer has read
  them all: each Fetch finds news in a few partitions only, the case sessions are made for.

Reported per phase: the node's CPU seconds (from /proc) per fetched MB, MB fetched, and from
the node's metrics endpoint the Fetch requests and partitions named per request. The tail
phase includes the producer's appends in the node's CPU (the same load in both modes). Then
* idle: the consumer caught up for `--idle-seconds`, nothing produced: the node's CPU per
  Fetch request (each long-polls the consumer's `fetch_max_wait_ms`, 100 ms here).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cluster import KnodeCluster  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

VALUE = b"x" * 500
TOPIC = "sessions-bench"


def process_cpu_seconds(pid: int) -> Callable[[], float]:
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    return read


def scrape(port: int) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("trafka_fetch_requests", "trafka_fetch_request_partitions"):
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels["fetcher"] == "consumer":
                    key = (family.name, sample.labels["kind"])
                    out[key] = out.get(key, 0.0) + sample.value
    return out


def fetch_figures(before: dict[Any, float], after: dict[Any, float]) -> tuple[float, float]:
    """(Fetch requests, partitions named per request) between two scrapes."""
    requests = sum(
        after.get(k, 0) - before.get(k, 0) for k in after if k[0] == "trafka_fetch_requests"
    )
    named = sum(
        after.get(k, 0) - before.get(k, 0)
        for k in after
        if k[0] == "trafka_fetch_request_partitions"
    )
    return requests, (named / requests if requests else 0.0)


def produce(bootstrap: str, partitions: int, count: int, rate: float | None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    started = time.monotonic()
    for n in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=VALUE, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if rate is not None and n % 50 == 0:
            ahead = started + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        producer.poll(0)
    assert producer.flush(120) == 0


def consume(
    bootstrap: str, partitions: int, from_start: bool, stop_after_s: float, expected_bytes: int
) -> None:
    """Child process: read until `expected_bytes` (backlog) or for `stop_after_s` (tail)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        max_poll_records=10_000,
        fetch_max_wait_ms=100,
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
    if from_start:
        consumer.seek_to_beginning()
    else:
        consumer.seek_to_end()
        for p in range(partitions):  # resolve the positions before the producer starts
            consumer.position(TopicPartition(TOPIC, p))
        print("ready", flush=True)
    got = 0
    deadline = time.monotonic() + stop_after_s
    while time.monotonic() < deadline and (not expected_bytes or got < expected_bytes):
        for records in consumer.poll(timeout_ms=500).values():
            got += sum(len(r.value) for r in records)
    consumer.close()
    print(got, flush=True)


def run_mode(slots: int, args: argparse.Namespace) -> dict[str, float]:
    metrics_port = free_port()
    with (
        tempfile.TemporaryDirectory() as base,
        KnodeCluster(
            Path(base),
            node_count=1,
            settings=[
                f"max.incremental.fetch.session.cache.slots={slots}",
                f"metrics.listener=http://127.0.0.1:{metrics_port}",
                "log.segment.bytes=104857600",
            ],
        ) as cluster,
    ):
        bootstrap = cluster.bootstrap_servers
        process = cluster.nodes[1].process
        assert process is not None
        cpu = process_cpu_seconds(process.pid)
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(120)
        backlog = int(args.backlog_mb * 1_000_000 / len(VALUE))
        produce(bootstrap, args.partitions, backlog, None)
        out: dict[str, float] = {}
        # backlog
        before, cpu_before, started = scrape(metrics_port), cpu(), time.monotonic()
        consumer = _child([bootstrap, str(args.partitions), "1", "600", str(backlog * len(VALUE))])
        assert consumer.stdout is not None
        fetched = int(consumer.stdout.read().split()[-1])
        consumer.wait()
        elapsed, cpu_used = time.monotonic() - started, cpu() - cpu_before
        requests, per_request = fetch_figures(before, scrape(metrics_port))
        out |= {
            "backlog_mb": fetched / 1e6,
            "backlog_cpu_s_per_mb": cpu_used / (fetched / 1e6),
            "backlog_s": elapsed,
            "backlog_requests": requests,
            "backlog_partitions_per_request": per_request,
        }
        # tail: the consumer waits at the log end; the producer trickles; both modes fetch
        # the same bytes, and the node's CPU includes the same appends
        tail_messages = int(args.tail_rate * args.tail_seconds)
        consumer = _child(
            [bootstrap, str(args.partitions), "0", "300", str(tail_messages * len(VALUE))]
        )
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "ready"
        producer = mp.get_context("spawn").Process(
            target=produce,
            args=(bootstrap, args.partitions, tail_messages, float(args.tail_rate)),
        )
        before, cpu_before, started = scrape(metrics_port), cpu(), time.monotonic()
        producer.start()
        fetched = int(consumer.stdout.read().split()[-1])
        consumer.wait()
        elapsed, cpu_used = time.monotonic() - started, cpu() - cpu_before
        producer.join()
        requests, per_request = fetch_figures(before, scrape(metrics_port))
        out |= {
            "tail_mb": fetched / 1e6,
            "tail_s": elapsed,
            "tail_cpu_s_per_mb": cpu_used / max(fetched / 1e6, 1e-9),
            "tail_requests": requests,
            "tail_partitions_per_request": per_request,
            "tail_cpu_ms_per_request": 1000 * cpu_used / max(requests, 1),
        }
        # idle: caught up, nothing produced; each Fetch long-polls `fetch_max_wait_ms`
        consumer = _child([bootstrap, str(args.partitions), "0", str(args.idle_seconds), "0"])
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "ready"
        before, cpu_before = scrape(metrics_port), cpu()
        consumer.stdout.read()
        consumer.wait()
        cpu_used = cpu() - cpu_before
        requests, per_request = fetch_figures(before, scrape(metrics_port))
        out |= {
            "idle_requests": requests,
            "idle_partitions_per_request": per_request,
            "idle_cpu_ms_per_request": 1000 * cpu_used / max(requests, 1),
        }
        return out


def _child(argv: list[str]) -> Any:
    import subprocess

    return subprocess.Popen(
        [sys.executable, "-W", "ignore", __file__, "--consume", *argv],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--backlog-mb", type=float, default=20.0)
    parser.add_argument("--tail-seconds", type=float, default=20.0)
    parser.add_argument("--tail-rate", type=float, default=500.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--consume", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        bootstrap, partitions, from_start, stop_after, expected = args.consume
        consume(bootstrap, int(partitions), from_start == "1", float(stop_after), int(expected))
        return
    print(f"load average at start: {os.getloadavg()}")
    results: dict[str, list[dict[str, float]]] = {"sessions": [], "no-sessions": []}
    for run in range(args.repeat):
        for mode, slots in (("sessions", 1000), ("no-sessions", 0)):
            figures = run_mode(slots, args)
            results[mode].append(figures)
            shown = ", ".join(f"{k}={v:.3f}" for k, v in figures.items())
            print(f"run {run + 1} {mode}: {shown}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    for figure in ("backlog_cpu_s_per_mb", "tail_cpu_s_per_mb", "idle_cpu_ms_per_request"):
        on = statistics.median(r[figure] for r in results["sessions"])
        off = statistics.median(r[figure] for r in results["no-sessions"])
        print(f"{figure}: sessions {on:.3f}, no sessions {off:.3f}, ratio {on / off:.2f}")


if __name__ == "__main__":
    main()
