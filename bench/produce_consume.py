"""Produce and consume throughput: one knode against librdkafka's mock cluster (issue 3).

    .venv/bin/python bench/produce_consume.py [--messages 1000000] [--producers 2]
        [--repeat 3] [--linger-ms 5] [--batch-size 1000000] [--fetch-bytes 1048576]
        [--client python|kcat] [--only knode|mock] [--py-spy FILE]

In ONE run, for each repeat, the same load goes first to librdkafka's in-process mock
cluster (a confluent-kafka client with `test.mock.num.brokers: 1`, held by this process;
the load processes reach it over loopback like any broker) and then to a fresh
`knode start --id 1` (started with `tests/support/cluster.py`, data in a temporary
directory):

* produce: `--producers` processes (multiprocessing; one Python client tops out near
  0.85 M msgs/s, REFERENCE.md fact 10), each a confluent-kafka Producer with acks=1,
  no compression, 100-byte values, no keys, all to partition 0 of the topic; every
  process connects and delivers one warm-up message first, then they start together at a
  barrier. Rate = messages / (last flush done - first produce started).
* `--client kcat` instead uses C load generators (Debian's kcat, librdkafka 2.0.2): the
  producers are kcat processes (`-P -p 0 -l FILE`, one 100-byte message per line), the
  consumer one `kcat -C -o beginning -c N` (knode only: kcat cannot re-read the mock's
  window). They cost the machine far less CPU per message than the Python clients, so
  they show the broker's limits better.
* consume: one confluent-kafka Consumer process (no group: `assign` partition 0 at the log
  start, `consume(num_messages=10000)` batches, `max.partition.fetch.bytes` =
  `--fetch-bytes`, librdkafka's 1 MiB by default; `fetch.queue.backoff.ms` = 10 instead of
  1000: otherwise librdkafka pauses fetching for a second whenever its local queue holds
  more than `queued.min.messages`, which a Python consumer always lets happen) reads as
  many messages as were produced.
  Rate = messages / (last batch - assign). knode serves its whole log; the mock keeps
  only the last ~5 MB of a partition (~45k messages), so there the consumer re-reads that
  window (seek back to the log start) until it has read the same count.

Besides the rates it reports the CPU seconds the *target* spent per million messages in
each phase (knode: the node process from /proc; mock: this process, which does nothing
but host the mock while the load runs in child processes), and those of the load
processes themselves. On a machine shared with other work the CPU figures are steadier
than the rates, and they show which side is the bottleneck.

Prints each run, then the median and range over the repeats of the rates and of the
per-run ratios knode/mock (mock and knode are measured back to back in each run).
Goals (issue 3): produce >= 0.9x the mock; consume >= 1 M msgs/s.

`--py-spy FILE` records the knode process with py-spy (`pip install py-spy`) during the
knode phases of the last run (only the thread holding the GIL, `--gil`, i.e. where Python
time goes), writing collapsed stacks ("raw" format) to FILE, and prints the functions
with the most samples: self time, then inclusive time of trafka's own functions.
"""

from __future__ import annotations

import argparse
import collections
import math
import multiprocessing as mp
import os
import platform
import queue
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MESSAGE_BYTES = 100
TOPIC_PREFIX = "bench"
PHASE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Rates:
    produce_msgs_s: float
    consume_msgs_s: float
    produce_cpu_s_per_million: float
    consume_cpu_s_per_million: float
    producers_cpu_s_per_million: float
    consumer_cpu_s_per_million: float


# ---------------------------------------------------------------------------------------
# Load processes (spawned)


def producer_process(
    bootstrap: str,
    topic: str,
    count: int,
    settings: dict[str, Any],
    barrier: Barrier,
    results: Any,
) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            **settings,
        }
    )
    errors = 0

    def on_delivery(error: object, _message: object) -> None:
        nonlocal errors
        if error is not None:
            errors += 1

    # Warm up: metadata, connection, one acknowledged message (counted by the consumer).
    producer.produce(topic, b"w" * MESSAGE_BYTES, partition=0, on_delivery=on_delivery)
    producer.flush(30)
    value = b"x" * MESSAGE_BYTES
    produce = producer.produce
    barrier.wait()
    cpu_started = own_cpu_seconds()
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    finished = time.perf_counter()
    results.put((started, finished, errors + left, own_cpu_seconds() - cpu_started))


def consumer_process(
    bootstrap: str, topic: str, expected: int, fetch_bytes: int, results: Any
) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "max.partition.fetch.bytes": fetch_bytes,
            "fetch.queue.backoff.ms": 10,
            "fetch.max.bytes": max(fetch_bytes, 52_428_800),
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        cpu_started = own_cpu_seconds()
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, low)])
        received = 0
        idle_since = time.monotonic()
        while received < expected:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            at_end = False
            for message in batch:
                error = message.error()
                if error is None:
                    received += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end = True
                else:
                    raise RuntimeError(str(error))
            if batch:
                idle_since = time.monotonic()
                last = batch[-1]
                offset = last.offset()
                at_end = at_end or (offset is not None and offset + 1 >= high)
            elif time.monotonic() - idle_since > 30:
                break
            if at_end and received < expected:  # the mock's retained window: read it again
                consumer.seek(TopicPartition(topic, 0, low))
        finished = time.perf_counter()
        results.put((started, finished, received, own_cpu_seconds() - cpu_started))
    finally:
        consumer.close()


def _collect(processes: list[SpawnProcess], results: Any) -> list[Any]:
    """One result per process; fail fast if a process dies without answering."""
    outcomes: list[Any] = []
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while len(outcomes) < len(processes):
        try:
            outcomes.append(results.get(timeout=1.0))
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for process in processes:
                    process.kill()
                raise RuntimeError(f"load process failed: {[p.exitcode for p in dead]}") from None
    for process in processes:
        process.join(timeout=30)
    return outcomes


def produce_phase(
    bootstrap: str, topic: str, messages: int, producers: int, settings: dict[str, Any]
) -> tuple[float, float]:
    """(messages/s, CPU seconds of all producer processes)."""
    context = mp.get_context("spawn")
    barrier = context.Barrier(producers)
    results = context.Queue()
    share = [
        messages // producers + (1 if i < messages % producers else 0) for i in range(producers)
    ]
    processes = [
        context.Process(
            target=producer_process, args=(bootstrap, topic, n, settings, barrier, results)
        )
        for n in share
    ]
    for process in processes:
        process.start()
    outcomes = _collect(processes, results)
    failed = sum(o[2] for o in outcomes)
    if failed:
        raise RuntimeError(f"{failed} messages not delivered")
    elapsed: float = max(o[1] for o in outcomes) - min(o[0] for o in outcomes)
    return messages / elapsed, float(sum(o[3] for o in outcomes))


def consume_phase(
    bootstrap: str, topic: str, expected: int, fetch_bytes: int
) -> tuple[float, float]:
    """(messages/s, CPU seconds of the consumer process)."""
    context = mp.get_context("spawn")
    results = context.Queue()
    process = context.Process(
        target=consumer_process, args=(bootstrap, topic, expected, fetch_bytes, results)
    )
    process.start()
    ((started, finished, received, cpu),) = _collect([process], results)
    if received < expected:
        raise RuntimeError(f"consumed {received} of {expected}")
    elapsed: float = finished - started
    return float(received) / elapsed, float(cpu)


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_KCAT_FILES: dict[tuple[int, int], list[Path]] = {}
_KCAT_DIRECTORY = tempfile.TemporaryDirectory(prefix="bench-kcat-")


def kcat_input_files(messages: int, producers: int) -> list[Path]:
    """One file per kcat producer with its share of the messages, one per line; written
    once per run (outside the measured interval)."""
    key = (messages, producers)
    if key not in _KCAT_FILES:
        files = []
        for i in range(producers):
            count = messages // producers + (1 if i < messages % producers else 0)
            path = Path(_KCAT_DIRECTORY.name) / f"messages-{producers}-{i}.txt"
            path.write_bytes((b"x" * MESSAGE_BYTES + b"\n") * count)
            files.append(path)
        _KCAT_FILES[key] = files
    return _KCAT_FILES[key]


def kcat_produce_phase(
    bootstrap: str, topic: str, messages: int, producers: int, settings: dict[str, Any]
) -> tuple[float, float]:
    """`producers` kcat processes (`-P -l FILE`, one 100-byte message per line of FILE),
    started together; (messages/s from the first start to the last exit, their CPU s)."""
    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed: apt-get install kcat")
    options = [f"-X{key}={value}" for key, value in {"acks": 1, **settings}.items()]
    files = kcat_input_files(messages, producers)
    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [kcat, "-b", bootstrap, "-P", "-t", topic, "-p", "0", *options, "-l", str(path)],
            stderr=subprocess.PIPE,
        )
        for path in files
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=PHASE_TIMEOUT_S)
        if process.returncode != 0:
            raise RuntimeError(f"kcat producer failed: {stderr.decode(errors='replace')}")
    elapsed = time.perf_counter() - started
    return messages / elapsed, children_cpu_seconds() - cpu_before


def kcat_consume_phase(bootstrap: str, topic: str, expected: int) -> tuple[float, float]:
    """One `kcat -C -o beginning -c N` printing only offsets to /dev/null."""
    kcat = shutil.which("kcat")
    assert kcat is not None
    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    command = [kcat, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning"]
    command += ["-c", str(expected), "-q", "-f", "%o\n"]
    result = subprocess.run(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=PHASE_TIMEOUT_S,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"kcat consumer failed: {result.stderr.decode(errors='replace')}")
    return expected / elapsed, children_cpu_seconds() - cpu_before


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result(timeout=30)


def measure(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    cpu_seconds: Callable[[], float],
    *,
    create: bool,
    is_mock: bool,
) -> Rates:
    settings = {"linger.ms": args.linger_ms, "batch.size": args.batch_size}
    if create:
        create_topic(bootstrap, topic)
    kcat = args.client == "kcat"
    if kcat:
        kcat_input_files(args.messages, args.producers)
    cpu_before = cpu_seconds()
    produce = kcat_produce_phase if kcat else produce_phase
    produced, producers_cpu = produce(bootstrap, topic, args.messages, args.producers, settings)
    cpu_produce = cpu_seconds() - cpu_before
    # The Python producers each deliver one warm-up message first.
    expected = args.messages + (0 if kcat else args.producers)
    cpu_before = cpu_seconds()
    if kcat and is_mock:  # kcat cannot re-read the mock's ~5 MB window
        consumed, consumer_cpu = math.nan, math.nan
    elif kcat:
        consumed, consumer_cpu = kcat_consume_phase(bootstrap, topic, expected)
    else:
        consumed, consumer_cpu = consume_phase(bootstrap, topic, expected, args.fetch_bytes)
    cpu_consume = cpu_seconds() - cpu_before if not math.isnan(consumed) else math.nan
    millions = expected / 1e6
    return Rates(
        produced,
        consumed,
        cpu_produce / millions,
        cpu_consume / millions,
        producers_cpu / millions,
        consumer_cpu / millions,
    )


# ---------------------------------------------------------------------------------------
# Targets


@contextmanager
def mock_cluster() -> Iterator[str]:
    """librdkafka's mock cluster lives inside one client instance of this process; its
    broker address (from Metadata) is where the load processes connect. The mock does not
    answer CreateTopics: it auto-creates a topic (with several partitions) on first use;
    every load here uses partition 0 only."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": ""})
    (broker,) = holder.list_topics(timeout=10).brokers.values()
    try:
        yield f"{broker.host}:{broker.port}"
    finally:
        holder.flush(5)
        del holder


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> Callable[[], float]:
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    return read


@contextmanager
def py_spy(pid: int, output: str | None) -> Iterator[None]:
    if output is None:
        yield
        return
    tool = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorder = subprocess.Popen(
        [
            tool,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--gil",
            "--format",
            "raw",
            "-o",
            output,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=60)
        print_hot_spots(Path(output))


def print_hot_spots(path: Path, top: int = 15) -> None:
    self_samples: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        total += count
        self_samples[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"py-spy: {total} samples of knode (all threads), {path}")
    own = collections.Counter({f: c for f, c in inclusive.items() if "trafka/" in f})
    for title, counter in (("self", self_samples), ("inclusive, trafka functions", own)):
        print(f"  top {title}:")
        for frame, count in counter.most_common(top):
            print(f"    {100 * count / total:5.1f}%  {frame}")


def run_once(run: int, args: argparse.Namespace, *, profile: bool) -> dict[str, Rates]:
    from tests.support.cluster import KnodeCluster

    topic = f"{TOPIC_PREFIX}-{run}"
    out: dict[str, Rates] = {}
    if args.only in (None, "mock"):
        with mock_cluster() as bootstrap:
            out["mock"] = measure(
                bootstrap, topic, args, own_cpu_seconds, create=False, is_mock=True
            )
    if args.only in (None, "knode"):
        with (
            tempfile.TemporaryDirectory(prefix="bench-knode-") as base,
            KnodeCluster(Path(base), node_count=1, settings=args.set) as cluster,
        ):
            process = cluster.nodes[1].process
            assert process is not None
            with py_spy(process.pid, args.py_spy if profile else None):
                out["knode"] = measure(
                    cluster.bootstrap_servers,
                    topic,
                    args,
                    process_cpu_seconds(process.pid),
                    create=True,
                    is_mock=False,
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--fetch-bytes", type=int, default=1_048_576)
    parser.add_argument("--client", choices=["python", "kcat"], default="python")
    parser.add_argument("--only", choices=["knode", "mock"])
    parser.add_argument("--py-spy", metavar="FILE")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a knode config key"
    )
    args = parser.parse_args()

    import confluent_kafka

    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.version()[0]}, librdkafka "
        f"{confluent_kafka.libversion()[0]}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{args.messages:,} x {MESSAGE_BYTES} B to 1 partition, acks=1, {args.producers} "
        f"{args.client} producer processes, linger.ms={args.linger_ms}, "
        f"batch.size={args.batch_size}, "
        f"consumer max.partition.fetch.bytes={args.fetch_bytes}"
    )
    runs: list[dict[str, Rates]] = []
    for run in range(args.repeat):
        rates = run_once(run, args, profile=run == args.repeat - 1)
        runs.append(rates)
        parts = [f"run {run + 1}:"]
        for target, r in rates.items():
            consume = (
                "consume n/a"
                if math.isnan(r.consume_msgs_s)
                else f"consume {r.consume_msgs_s / 1e3:,.0f} k/s "
                f"({r.consume_cpu_s_per_million:.2f} cpu-s/M)"
            )
            parts.append(
                f"{target} produce {r.produce_msgs_s / 1e3:,.0f} k/s "
                f"({r.produce_cpu_s_per_million:.2f} cpu-s/M), {consume};"
            )
        if len(rates) == 2:
            knode, mock = rates["knode"], rates["mock"]
            ratios = (
                f"ratio produce {knode.produce_msgs_s / mock.produce_msgs_s:.2f} "
                f"consume {knode.consume_msgs_s / mock.consume_msgs_s:.2f}"
            )
            parts.append(ratios.replace("nan", "n/a"))
        parts.append(f"(load average {os.getloadavg()[0]:.1f})")
        print(" ".join(parts), flush=True)

    def summary(name: str, values: list[float], spec: str) -> None:
        values = [v for v in values if not math.isnan(v)]
        if not values:
            print(f"{name:<36} n/a")
            return
        print(
            f"{name:<36} median {statistics.median(values):{spec}}  "
            f"range {min(values):{spec}} - {max(values):{spec}}"
        )

    print("---")
    for target in ("mock", "knode"):
        if all(target in r for r in runs):
            rows = [r[target] for r in runs]
            summary(f"{target} produce k msgs/s", [r.produce_msgs_s / 1e3 for r in rows], ",.0f")
            summary(f"{target} consume k msgs/s", [r.consume_msgs_s / 1e3 for r in rows], ",.0f")
            summary(
                f"{target} produce cpu-s per M msgs",
                [r.produce_cpu_s_per_million for r in rows],
                ".2f",
            )
            summary(
                f"{target} consume cpu-s per M msgs",
                [r.consume_cpu_s_per_million for r in rows],
                ".2f",
            )
            summary(
                "  its producers' cpu-s per M msgs",
                [r.producers_cpu_s_per_million for r in rows],
                ".2f",
            )
            summary(
                "  its consumer's cpu-s per M msgs",
                [r.consumer_cpu_s_per_million for r in rows],
                ".2f",
            )
    if all(len(r) == 2 for r in runs):
        summary(
            "ratio produce knode/mock",
            [r["knode"].produce_msgs_s / r["mock"].produce_msgs_s for r in runs],
            ".2f",
        )
        summary(
            "ratio consume knode/mock",
            [r["knode"].consume_msgs_s / r["mock"].consume_msgs_s for r in runs],
            ".2f",
        )


if __name__ == "__main__":
    main()
