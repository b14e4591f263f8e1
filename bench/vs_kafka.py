"""trafka against Apache Kafka itself, side by side on the same machine (issue 19).

    .venv/bin/python bench/vs_kafka.py                         # every goal, 1 and 3 nodes
    .venv/bin/python bench/vs_kafka.py --goals G1 --targets trafka   # one goal, one target
    .venv/bin/python bench/vs_kafka.py --smoke                 # tiny sizes (the test suite)
    .venv/bin/python bench/vs_kafka.py --append-doc            # also append to docs/performance.md
    make bench-kafka                                           # the full run, appended

Kafka: Maven (`bench/kafka/pom.xml`, `copy-dependencies`) puts the broker (`kafka_2.13`) and
its tools (`kafka-tools`) of the newest 4.x release into a cache dir (`--kafka-cache`,
default ~/.cache/trafka-bench/kafka-<version>); a KRaft Kafka is formatted with
`kafka.tools.StorageTool format` and started as `java -Xms1g -Xmx1g -cp CACHE/* kafka.Kafka
server.properties`, every node a combined broker+controller (`process.roles=broker,
controller`, static `controller.quorum.voters`), the log dirs next to trafka's on the same
disk (one temporary base dir). Settings that differ from Kafka's defaults are the same on
both sides (`group.initial.rebalance.delay.ms=0`; one node: the internal topics with RF=1);
everything else is each side's default, which is Kafka's for both: 1 GiB segments, no fsync
per write (`log.flush.interval.*` unset), `min.insync.replicas=1` broker-wide,
`replica.fetch.wait.max.ms=500`. trafka: the same number of `knode start` processes
(tests/support/cluster.py), each a voter and a broker.

Goals (the issue's names), each measured on both targets with the same load generators:

* T1: launch of the node processes to the first acknowledged produce (acks=all, a new topic
  auto-created by the produce's Metadata); Kafka's `format` time is printed apart (trafka
  needs none).
* P1: produce, 1 node, 1 partition, 100-byte values, acks=1: one confluent-kafka producer
  process (`python`) and Kafka's `ProducerPerformance` (`java`). P1x12: 12 partitions, 4
  producer processes (python) / 4 ProducerPerformance processes (java), started together.
* C1: consume what P1 wrote from the log start: one confluent-kafka consumer process
  (assign, no group) and `ConsumerPerformance` (a group of one: its whole-run rate, and
  apart its join time and its rate after the join).
* P2: produce, 3 nodes, RF=3, acks=all, `min.insync.replicas=2`: python and java.
* L1: end-to-end latency at 10,000 msgs/s, 3 nodes, RF=3, acks=all: a producer process
  paced at the rate writes `time.time()` into each value, a consumer process reads it back
  (p50/p99 of receipt - send).
* G1: synchronous OffsetCommit from one consumer, 3 nodes (`__consumer_offsets` RF=3):
  commits/s, p50, p99 of `commit(asynchronous=False)` (simple commits, one partition).
* G1 rebalance: a group of `--members` (10) confluent-kafka consumers in one worker process
  (a polling thread each, classic protocol, librdkafka's default assignors) subscribed to a
  topic of as many partitions (RF=3): the time from the first subscribe until every member
  holds its partition, and the time from an 11th member's subscribe until all 11 have their
  new assignment (3 nodes).
* S2: scale on 3 nodes, RF=3. Topics of <= 1,000 partitions totalling `--s2-partitions`
  (10,000), a CreateTopics each sent at once (AdminClient; Kafka refuses one request of more
  than 10,000 records): the time from the first request until every node's own Metadata (a
  raw Metadata v1 request to each) shows a leader for every partition; `--s2-metadata` (200)
  full Metadata requests (`list_topics()`) from a worker, p50 and p99; the nodes' RSS after
  (/proc, the process and its children: max and sum); `--s2-messages` (200,000) acks=1
  produced into 1 partition and the same into 1,000 partitions, both rates and their ratio;
  `--s2-connections` (1,000) TCP connections to the node leading the 1-partition topic, each
  sending a hand-encoded ApiVersions v0 and Metadata v1 (no topics) and reading both answers
  (50 in flight): the time to open them all, the node's RSS increase, and the latency of one
  acks=1 produce to that node while they are open. trafka runs S2 with
  `max.connections.per.ip` at Kafka's default (unlimited; trafka's own default is 1,000 and
  the replicas' connections are also from 127.0.0.1). The script raises its soft `ulimit -n`
  to the hard limit for the nodes.

The load generator's ceiling: the python producer's rate against librdkafka's in-process
mock cluster (`test.mock.num.brokers`), a sink that costs almost nothing, measured in the
same run; for the consumers and the java tools the ceiling is the faster of the two servers
(the mock serves a consumer ~30k msgs/s; no null sink exists for the java tools). A ratio
is trafka / Kafka (for latencies Kafka / trafka, so that > 1 always means trafka is better).

Every figure is printed with the machine, the load average before and after, the versions
and the commands; `--append-doc` appends the report to docs/performance.md ("trafka vs
Apache Kafka"). Kafka's JVMs and the knodes are killed in `finally` blocks. The smoke mode
(`--smoke`, run by tests/bench/test_vs_kafka_smoke.py) runs P1 and C1 on one node with tiny
sizes (`--smoke --goals ...` runs the goals named, tiny: S2 with 30 partitions, 20
connections, 20 Metadata requests, 2,000 messages). `--keep-dirs` keeps the data dirs and
the nodes' logs (their path is printed).
This is a benchmark: nothing is asserted except that each phase completed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KAFKA_POM = REPO / "bench" / "kafka" / "pom.xml"
VALUE_BYTES = 100
GOALS = ("T1", "P1", "P1x12", "C1", "P2", "L1", "G1", "G1 rebalance", "S2")
ONE_NODE_GOALS = ("P1", "P1x12", "C1")
THREE_NODE_GOALS = ("P2", "L1", "G1", "G1 rebalance", "S2")
START_TIMEOUT_S = 180.0
KAFKA_HEAP = "-Xmx1g"


# ---------------------------------------------------------------------------------------
# Kafka: fetch, format, start


def kafka_version() -> str:
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", KAFKA_POM.read_text())
    assert match is not None
    return match.group(1)


def fetch_kafka(cache: Path) -> Path:
    """The broker's and the tools' jars (Maven), once per version."""
    stamp = cache / ".complete"
    if stamp.exists():
        return cache
    if shutil.which("mvn") is None:
        raise RuntimeError("mvn is needed to fetch Kafka: apt-get install -y maven")
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(KAFKA_POM), "package", f"-DoutputDirectory={cache}"],
        check=True,
    )
    stamp.write_text(kafka_version())
    return cache


def free_port() -> int:
    from tests.support.ports import free_port as pick

    return pick()


def port_accepts(port: int) -> bool:
    from tests.support.waiting import port_accepts as accepts

    return accepts(port)


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None


@dataclass
class KafkaCluster:
    """KRaft Kafka, every node broker+controller, on loopback (kafka.Kafka JVMs)."""

    base_dir: Path
    jars: Path
    node_count: int
    nice: int = 0
    nodes: list[KafkaNode] = field(default_factory=list)
    format_s: float = 0.0
    launched_at: float = 0.0

    def __post_init__(self) -> None:
        for node_id in range(1, self.node_count + 1):
            self.nodes.append(
                KafkaNode(
                    node_id,
                    free_port(),
                    free_port(),
                    self.base_dir / f"kafka-{node_id}",
                    self.base_dir / f"kafka-{node_id}.log",
                )
            )

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def _java(self, main: str, *args: str) -> list[str]:
        prefix = ["nice", "-n", str(self.nice)] if self.nice else []
        return [
            *prefix,
            "java",
            KAFKA_HEAP,
            "-Xms1g",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            "-cp",
            f"{self.jars}/*",
            main,
            *args,
        ]

    def _properties(self, node: KafkaNode) -> Path:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        internal_rf = min(3, self.node_count)
        lines = [
            "process.roles=broker,controller",
            f"node.id={node.node_id}",
            f"controller.quorum.voters={voters}",
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={node.data_dir}",
            f"offsets.topic.replication.factor={internal_rf}",
            f"transaction.state.log.replication.factor={internal_rf}",
            f"transaction.state.log.min.isr={min(2, internal_rf)}",
            "group.initial.rebalance.delay.ms=0",
        ]
        path = self.base_dir / f"kafka-{node.node_id}.properties"
        path.write_text("\n".join(lines) + "\n")
        return path

    def format(self) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        started = time.perf_counter()
        for node in self.nodes:
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    cluster_id,
                    "--config",
                    str(self._properties(node)),
                    "--ignore-formatted",
                ),
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        self.format_s = time.perf_counter() - started

    def launch(self) -> None:
        self.launched_at = time.perf_counter()
        for node in self.nodes:
            with open(node.log_path, "ab") as out:
                node.process = subprocess.Popen(
                    self._java("kafka.Kafka", str(self._properties(node))),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for node in self.nodes:
            while not port_accepts(node.port):
                assert node.process is not None
                if node.process.poll() is not None:
                    raise RuntimeError(f"kafka node {node.node_id} exited:\n{self.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kafka node {node.node_id} not ready:\n{self.tail()}")
                time.sleep(0.05)

    def tail(self, lines: int = 30) -> str:
        return "\n".join(
            line
            for node in self.nodes
            if node.log_path.exists()
            for line in node.log_path.read_text(errors="replace").splitlines()[-lines:]
        )

    def close(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait()
            node.process = None

    def cpu_s(self) -> float:
        return sum(_cpu_s(n.process.pid) for n in self.nodes if n.process is not None)


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Trafka:
    """The same shape of trafka cluster: `node_count` knodes, each voter and broker."""

    base_dir: Path
    node_count: int
    nice: int = 0
    launched_at: float = 0.0
    cluster: Any = None
    extra: list[str] = field(default_factory=list)

    def launch(self) -> None:
        from tests.support.cluster import KnodeCluster

        settings = ["group.initial.rebalance.delay.ms=0"]
        if self.node_count == 1:
            settings += [
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
            ]
        self.cluster = KnodeCluster(
            self.base_dir,
            node_count=self.node_count,
            settings=[*settings, *self.extra],
            start=False,
        )
        if self.nice:
            prefix = ["nice", "-n", str(self.nice)]
            command = self.cluster.command
            self.cluster.command = lambda node_id: [*prefix, *command(node_id)]
        self.launched_at = time.perf_counter()
        for node_id in self.cluster.nodes:
            self.cluster.start(node_id, wait=False)

    def wait_ready(self) -> None:
        for node_id in self.cluster.nodes:
            self.cluster.wait_ready(node_id, timeout_s=START_TIMEOUT_S)

    @property
    def bootstrap_servers(self) -> str:
        return str(self.cluster.bootstrap_servers)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()

    def cpu_s(self) -> float:
        return sum(
            _cpu_s(n.process.pid) for n in self.cluster.nodes.values() if n.process is not None
        )


# ---------------------------------------------------------------------------------------
# Workers: each load runs in its own process (`--worker NAME JSON`), prints one JSON line


def _worker_produce(args: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    config = {
        "bootstrap.servers": args["bootstrap"],
        "acks": args["acks"],
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "compression.type": "none",
    }
    if args["bootstrap"] == "mock":
        config.pop("bootstrap.servers")
        config["test.mock.num.brokers"] = 1
    producer = Producer(config)
    value = b"x" * VALUE_BYTES
    topic, partitions, count = args["topic"], args["partitions"], args["messages"]
    errors = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    # metadata and connection first, so the figure is the steady rate
    producer.produce(topic, value, partition=0, on_delivery=delivered)
    producer.flush(60)
    _barrier(args)
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - started
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, {errors[:3]}")
    return {"rate": count / elapsed, "elapsed": elapsed}


def _worker_consume(args: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": args["bootstrap"],
        "group.id": "bench-vs-kafka-c1",
        "enable.auto.commit": False,
        "max.partition.fetch.bytes": 1_048_576,
        "fetch.queue.backoff.ms": 10,
    }
    consumer = Consumer(config)
    consumer.assign([TopicPartition(args["topic"], 0, 0)])
    count, wanted = 0, args["messages"]
    started = time.perf_counter()  # from the assignment: the first fetch counts too
    deadline = time.monotonic() + 300
    while count < wanted and time.monotonic() < deadline:
        count += len(consumer.consume(10_000, 1.0))
    elapsed = time.perf_counter() - started
    consumer.close()
    if count < wanted:
        raise RuntimeError(f"consumed {count} of {wanted}")
    return {"rate": count / elapsed, "elapsed": elapsed}


def _worker_latency(args: dict[str, Any]) -> dict[str, Any]:
    """The producer half of L1; the consumer runs in its own process (`latency_consumer`)
    so that the two clients do not share one interpreter lock (in one process Kafka's
    producer queue grew to seconds at 10,000 msgs/s, trafka's did not: a figure of the load
    generator, not of the servers)."""
    import struct

    from confluent_kafka import Producer

    topic, rate, seconds = args["topic"], args["rate"], args["seconds"]
    total = int(rate * seconds)
    with tempfile.TemporaryDirectory(prefix="trafka-l1-") as tmp:
        ready = Path(tmp) / "ready"
        job = {"bootstrap": args["bootstrap"], "topic": topic, "total": total, "ready": str(ready)}
        consumer = subprocess.Popen(
            [sys.executable, __file__, "--worker", "latency_consumer", json.dumps(job)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # librdkafka's default linger (5 ms, the Java client's too since Kafka 4.0)
            producer = Producer({"bootstrap.servers": args["bootstrap"], "acks": "all"})
            # warm up until the consumer got a record produced now: its position is set and
            # both clients know the partition's leader (marked 'w': not measured)
            deadline = time.monotonic() + 120
            while not ready.exists():
                if time.monotonic() > deadline or consumer.poll() is not None:
                    raise RuntimeError("the consumer never received a record")
                producer.produce(topic, struct.pack(">d", time.time()) + b"w" * 92, partition=0)
                producer.flush(30)
                time.sleep(0.2)
            padding = b"x" * (VALUE_BYTES - 8)
            started = time.perf_counter()
            for i in range(total):
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                producer.produce(topic, struct.pack(">d", time.time()) + padding, partition=0)
                producer.poll(0)
            producer.flush(60)
            out, _ = consumer.communicate(timeout=120)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    if consumer.returncode != 0:
        raise RuntimeError(f"the L1 consumer failed ({consumer.returncode})")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _worker_latency_consumer(args: dict[str, Any]) -> dict[str, Any]:
    """The consumer half of L1: receipt time minus the timestamp in each value."""
    import struct

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args["bootstrap"],
            "group.id": "bench-vs-kafka-l1",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(args["topic"], 0, -1)])  # OFFSET_END: what comes next
    total = args["total"]
    latencies: list[float] = []
    ready = Path(args["ready"])
    deadline = time.monotonic() + 240
    while len(latencies) < total and time.monotonic() < deadline:
        # poll, one message at a time: consume(n, timeout) waits for n messages or the
        # timeout, which added up to its timeout to every latency at low rates
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        now = time.time()
        value = message.value() or b""
        if value[8:9] == b"w":
            ready.touch()
            continue
        latencies.append(now - struct.unpack(">d", value[:8])[0])
    consumer.close()
    if len(latencies) < total * 0.99:
        raise RuntimeError(f"received {len(latencies)} of {total}")
    latencies.sort()
    return {
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "received": len(latencies),
    }


def _worker_commits(args: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args["bootstrap"],
            "group.id": f"bench-vs-kafka-g1-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    topic = args["topic"]
    # warm up: FindCoordinator, the connection, __consumer_offsets created and led
    deadline = time.monotonic() + 120
    while True:
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for offset in range(1, 11):
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    times = []
    started = time.perf_counter()
    for offset in range(100, 100 + args["commits"]):
        before = time.perf_counter()
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        times.append(time.perf_counter() - before)
    elapsed = time.perf_counter() - started
    consumer.close()
    times.sort()
    return {
        "rate": len(times) / elapsed,
        "p50_ms": 1000 * times[len(times) // 2],
        "p99_ms": 1000 * times[int(len(times) * 0.99)],
    }


def _worker_first_produce(args: dict[str, Any]) -> dict[str, Any]:
    """Loop until one acks=all produce to a new topic is acknowledged; the time since
    `launched_at_wall` (the node processes' launch, wall clock)."""
    from confluent_kafka import Producer

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        producer = Producer(
            {
                "bootstrap.servers": args["bootstrap"],
                "acks": "all",
                "message.timeout.ms": 2000,
                "socket.connection.setup.timeout.ms": 1000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 100,
                "retry.backoff.ms": 20,
            }
        )
        delivered: list[Any] = []
        producer.produce(
            args["topic"], b"x", on_delivery=lambda e, _m, out=delivered: out.append(e)
        )
        producer.flush(3)
        if delivered and delivered[0] is None:
            return {"seconds": time.time() - args["launched_at_wall"]}
        time.sleep(0.02)
    raise RuntimeError("no produce acknowledged")


def _worker_metadata(args: dict[str, Any]) -> dict[str, Any]:
    """`requests` full Metadata requests (every topic) from one AdminClient, one at a time."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": args["bootstrap"]})
    admin.list_topics(timeout=60)  # the connection and the first (uncounted) request
    times = []
    partitions = 0
    for _ in range(args["requests"]):
        before = time.perf_counter()
        metadata = admin.list_topics(timeout=60)
        times.append(time.perf_counter() - before)
        partitions = sum(len(t.partitions) for t in metadata.topics.values())
    times.sort()
    return {
        "p50_ms": 1000 * times[len(times) // 2],
        "p99_ms": 1000 * times[min(len(times) - 1, int(len(times) * 0.99))],
        "partitions": partitions,
    }


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A request with header v1 (api key, version, correlation id, client id), size-prefixed."""
    import struct

    client_id = b"bench-vs-kafka"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header) + len(body)) + header + body


def _worker_connections(args: dict[str, Any]) -> dict[str, Any]:
    """Open `count` TCP connections to one node, each sending ApiVersions v0 and Metadata v1
    (no topics) and reading both answers, at most 50 in flight (a listen backlog's worth);
    then, with all of them open, one acks=1 produce to a partition the node leads; then
    touch `ready` and keep them open until `release` exists."""
    import asyncio
    import struct

    from confluent_kafka import Producer

    host, port, count = "127.0.0.1", args["port"], args["count"]
    writers: list[asyncio.StreamWriter] = []

    async def one(index: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            reader, writer = await asyncio.open_connection(host, port)
            writers.append(writer)
            for correlation_id, (api_key, version, body) in enumerate(
                ((18, 0, b""), (3, 1, struct.pack(">i", 0))), start=index * 2
            ):
                writer.write(_request(api_key, version, correlation_id, body))
                await writer.drain()
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                response = await reader.readexactly(size)
                if struct.unpack(">i", response[:4])[0] != correlation_id:
                    raise RuntimeError("a response with the wrong correlation id")
                if api_key == 18 and struct.unpack(">h", response[4:6])[0] != 0:
                    raise RuntimeError("ApiVersions failed")

    async def open_all() -> float:
        gate = asyncio.Semaphore(50)
        started = time.perf_counter()
        await asyncio.gather(*(one(i, gate) for i in range(count)))
        return time.perf_counter() - started

    async def main() -> dict[str, Any]:
        seconds = await open_all()
        producer = Producer({"bootstrap.servers": f"{host}:{port}", "acks": "1"})
        delivered: list[Any] = []
        before = time.perf_counter()
        producer.produce(
            args["topic"],
            b"x" * VALUE_BYTES,
            partition=args["partition"],
            on_delivery=lambda e, _m: delivered.append(e),
        )
        await asyncio.get_running_loop().run_in_executor(None, producer.flush, 60)
        produce_ms = 1000 * (time.perf_counter() - before)
        if not delivered or delivered[0] is not None:
            raise RuntimeError(f"the produce failed with {count} connections open: {delivered}")
        # are they all still open? one more ApiVersions on each would be another load; a
        # closed socket shows as EOF, which the server's idle timeout (10 min) does not reach
        Path(args["ready"]).touch()
        deadline = time.monotonic() + 300
        while not Path(args["release"]).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for writer in writers:
            writer.close()
        return {"seconds": seconds, "produce_ms": produce_ms, "open": len(writers)}

    return asyncio.run(main())


def _worker_rebalance(args: dict[str, Any]) -> dict[str, Any]:
    """`members` consumers of one group (classic protocol, librdkafka's default assignors),
    each polled by its own thread, subscribe to a topic of as many partitions: the time from
    the first subscribe until every member holds one partition (the first join), then the
    time from an extra member's subscribe until every member, old and new, has had its new
    assignment and the topic's partitions are all assigned again."""
    from confluent_kafka import Consumer

    topic, members, partitions = args["topic"], args["members"], args["partitions"]
    group = f"bench-vs-kafka-rebalance-{uuid.uuid4().hex[:8]}"
    lock = threading.Lock()
    assigned: dict[int, set[int]] = {}
    assigned_at: dict[int, float] = {}
    stop = threading.Event()

    def make(index: int) -> Consumer:
        def on_assign(_consumer: Any, tps: list[Any]) -> None:
            with lock:
                assigned[index] = {tp.partition for tp in tps}
                assigned_at[index] = time.perf_counter()

        def on_revoke(_consumer: Any, _tps: list[Any]) -> None:
            with lock:
                assigned[index] = set()

        consumer = Consumer(
            {
                "bootstrap.servers": args["bootstrap"],
                "group.id": group,
                "enable.auto.commit": False,
                "group.protocol": "classic",
            }
        )
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return consumer

    def poll(consumer: Consumer) -> None:
        while not stop.is_set():
            consumer.poll(0.05)

    def settled(count: int, since: float) -> bool:
        with lock:
            if len(assigned_at) < count or any(t < since for t in assigned_at.values()):
                return False
            owned = [p for ps in assigned.values() for p in ps]
            return bool(len(owned) == partitions == len(set(owned)))

    consumers: list[Consumer] = []
    threads: list[threading.Thread] = []

    def add(index: int) -> None:
        consumer = make(index)
        consumers.append(consumer)
        thread = threading.Thread(target=poll, args=(consumer,), daemon=True)
        threads.append(thread)
        thread.start()

    def wait(count: int, since: float) -> float:
        deadline = time.monotonic() + 300
        while not settled(count, since):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the group did not settle: {assigned}")
            time.sleep(0.005)
        return max(assigned_at.values()) - since

    try:
        started = time.perf_counter()
        for index in range(members):
            add(index)
        first_join = wait(members, started)
        time.sleep(0.5)  # settled: no rebalance in flight when the extra member comes
        started = time.perf_counter()
        add(members)
        rebalance = wait(members + 1, started)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for consumer in consumers:
            consumer.close()
    return {"first_join_s": first_join, "rebalance_s": rebalance}


WORKERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "produce": _worker_produce,
    "consume": _worker_consume,
    "latency": _worker_latency,
    "latency_consumer": _worker_latency_consumer,
    "commits": _worker_commits,
    "first_produce": _worker_first_produce,
    "metadata": _worker_metadata,
    "connections": _worker_connections,
    "rebalance": _worker_rebalance,
}


def _barrier(args: dict[str, Any]) -> None:
    """Producers started together wait for the file `args["barrier"]` to exist."""
    path = args.get("barrier")
    if not path:
        return
    Path(path + f".ready.{os.getpid()}").touch()
    while not Path(path).exists():
        time.sleep(0.001)


def run_workers(
    name: str, jobs: list[dict[str, Any]], nice: int, barrier_dir: Path | None = None
) -> list[dict[str, Any]]:
    """Run the workers `name` in parallel processes (a barrier when several)."""
    barrier = None
    if len(jobs) > 1 and barrier_dir is not None:
        barrier = str(barrier_dir / f"barrier-{uuid.uuid4().hex[:8]}")
        jobs = [{**job, "barrier": barrier} for job in jobs]
    prefix = ["nice", "-n", str(nice)] if nice else []
    processes = [
        subprocess.Popen(
            [*prefix, sys.executable, __file__, "--worker", name, json.dumps(job)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    try:
        if barrier is not None:
            deadline = time.monotonic() + 120
            while len(list(Path(barrier).parent.glob(Path(barrier).name + ".ready.*"))) < len(jobs):
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise RuntimeError(f"{name} workers did not reach the barrier")
                time.sleep(0.005)
            Path(barrier).touch()
        results = []
        for process in processes:
            out, _ = process.communicate(timeout=900)
            if process.returncode != 0:
                raise RuntimeError(f"{name} worker failed ({process.returncode})")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


# ---------------------------------------------------------------------------------------
# Kafka's own load generators (org.apache.kafka.tools)


def java_tool(jars: Path, nice: int, main: str, *args: str) -> tuple[str, list[str]]:
    prefix = ["nice", "-n", str(nice)] if nice else []
    command = [*prefix, "java", "-Xmx512m", "-cp", f"{jars}/*", main, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{main} failed: {result.stderr[-2000:]}")
    return result.stdout, command


def java_produce(
    jars: Path, nice: int, bootstrap: str, topic: str, messages: int, acks: str, processes: int
) -> float:
    """ProducerPerformance: msgs/s (the sum over `processes` started together)."""
    prefix = ["nice", "-n", str(nice)] if nice else []
    command = [
        *prefix,
        "java",
        "-Xmx512m",
        "-cp",
        f"{jars}/*",
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(messages),
        "--record-size",
        str(VALUE_BYTES),
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={bootstrap}",
        f"acks={acks}",
        "linger.ms=5",
        "batch.size=1000000",
    ]
    running = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    rate = 0.0
    try:
        for process in running:
            out, err = process.communicate(timeout=900)
            match = re.findall(r"([\d.]+) records/sec", out)
            if process.returncode != 0 or not match:
                raise RuntimeError(f"ProducerPerformance failed: {err[-2000:]}{out[-500:]}")
            rate += float(match[-1])
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    _record_command(command)
    return rate


def java_consume(
    jars: Path, nice: int, bootstrap: str, topic: str, messages: int
) -> dict[str, float]:
    """ConsumerPerformance's columns: nMsg.sec (msgs/s over the whole run, the group join
    included), rebalance.time.ms (the join) and fetch.nMsg.sec (msgs/s after the join)."""
    out, command = java_tool(
        jars,
        nice,
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(messages),
        "--group",
        f"bench-vs-kafka-{uuid.uuid4().hex[:8]}",
        "--timeout",
        "60000",
    )
    _record_command(command)
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    return {
        column: float(values[header.index(column)])
        for column in ("nMsg.sec", "rebalance.time.ms", "fetch.nMsg.sec")
    }


COMMANDS: set[str] = set()


def _record_command(command: list[str]) -> None:
    """The tool's command line for the report, with the run's own ports and group names
    replaced (the same command ran against both servers)."""
    text = " ".join(command[command.index("java") :])
    text = re.sub(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+)*", "BOOTSTRAP", text)
    COMMANDS.add(re.sub(r"bench-vs-kafka-[0-9a-f]{8}", "bench-vs-kafka-RANDOM", text))


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class Figure:
    goal: str
    what: str
    unit: str
    trafka: list[float] = field(default_factory=list)
    kafka: list[float] = field(default_factory=list)
    ceiling: list[float] = field(default_factory=list)
    lower_is_better: bool = False

    def ratio(self) -> float | None:
        if not self.trafka or not self.kafka:
            return None
        t, k = statistics.median(self.trafka), statistics.median(self.kafka)
        if self.lower_is_better:
            return k / t if t else None
        return t / k if k else None


class Report:
    def __init__(self) -> None:
        self.figures: dict[tuple[str, str], Figure] = {}

    def add(
        self, goal: str, what: str, unit: str, target: str, value: float, *, lower: bool = False
    ) -> None:
        figure = self.figures.setdefault(
            (goal, what), Figure(goal, what, unit, lower_is_better=lower)
        )
        getattr(figure, target).append(value)
        print(f"  {goal} {what} [{target}]: {value:,.2f} {unit}", flush=True)

    def table(self) -> str:
        rows = [
            "| goal | measurement | trafka | Kafka | trafka/Kafka | load generator ceiling |",
            "|---|---|---|---|---|---|",
        ]
        for figure in self.figures.values():
            ratio = figure.ratio()
            rows.append(
                f"| {figure.goal} | {figure.what} | {_fmt(figure.trafka, figure.unit)} | "
                f"{_fmt(figure.kafka, figure.unit)} | "
                f"{'' if ratio is None else f'**{ratio:.2f}**'} | "
                f"{_ceiling(figure)} |"
            )
        return "\n".join(rows)


def _ceiling(figure: Figure) -> str:
    """The mock's figure when measured, else (throughputs) at least the faster server's."""
    if figure.ceiling:
        return _fmt(figure.ceiling, figure.unit) + " (mock)"
    if figure.lower_is_better or figure.unit == "x" or not figure.trafka or not figure.kafka:
        return ""
    best = max(statistics.median(figure.trafka), statistics.median(figure.kafka))
    return f">= {_fmt([best], figure.unit)} (faster server)"


def _fmt(values: list[float], unit: str) -> str:
    if not values:
        return ""
    median = statistics.median(values)
    text = f"{median:,.0f}" if median >= 100 else f"{median:,.2f}"
    if len(values) > 1:
        text += f" ({min(values):,.4g}-{max(values):,.4g})"
    return f"{text} {unit}"


@contextlib.contextmanager
def started(target: Any) -> Iterator[Any]:
    try:
        target.launch()
        target.wait_ready()
        yield target
    finally:
        target.close()


def create_topic(
    bootstrap: str, name: str, partitions: int, rf: int, configs: dict[str, str]
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics(
        [NewTopic(name, partitions, rf, config=configs)], operation_timeout=30
    )[name]
    future.result(timeout=60)
    # every partition has a leader known to the cluster
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = admin.list_topics(name, timeout=10).topics[name]
        if len(metadata.partitions) == partitions and all(
            p.leader >= 0 and len(p.isrs) == rf for p in metadata.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready")


def _rss_bytes(pid: int) -> int:
    """The resident set of a process and its descendants (/proc)."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                pending.extend(int(c) for c in children)
    return total


def node_pids(target: Any) -> dict[int, int]:
    """node id -> pid of the node's process (a JVM, a knode)."""
    if isinstance(target, KafkaCluster):
        return {n.node_id: n.process.pid for n in target.nodes if n.process is not None}
    return {
        node_id: node.process.pid
        for node_id, node in target.cluster.nodes.items()
        if node.process is not None
    }


def node_port(target: Any, node_id: int) -> int:
    if isinstance(target, KafkaCluster):
        return next(n.port for n in target.nodes if n.node_id == node_id)
    return int(target.cluster.address(node_id).rsplit(":", 1)[1])


def create_topics_timed(
    bootstrap: str, ports: list[int], partitions: int, rf: int
) -> tuple[list[str], float]:
    """Topics of at most 1,000 partitions totalling `partitions`, a CreateTopics each, all
    sent at once; the seconds from the first request until every node's own Metadata shows
    a leader for every partition."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    count = max(1, -(-partitions // 1000))
    sizes = [partitions // count + (1 if i < partitions % count else 0) for i in range(count)]
    names = [f"s2-{i}" for i in range(count)]
    # a CreateTopics of 10,000 partitions may take minutes: librdkafka's request timeout
    # at its maximum, and a request that times out anyway is left to the Metadata polls
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    admin.list_topics(timeout=30)  # connected before the clock starts
    started = time.perf_counter()
    # one CreateTopics per topic, all sent at once: Kafka's controller refuses a request
    # of more than 10,000 records ("excessively large batch operation", POLICY_VIOLATION)
    futures = [
        admin.create_topics([NewTopic(name, size, rf)], operation_timeout=600, request_timeout=660)[
            name
        ]
        for name, size in zip(names, sizes, strict=True)
    ]
    for future in futures:
        try:
            future.result(timeout=700)
        except KafkaException as error:
            if error.args[0].code() != KafkaError._TIMED_OUT:
                raise
            print(f"  (CreateTopics: {error.args[0].str()}; polling Metadata)", flush=True)
    # every node's own Metadata (a client may ask any of them) shows every leader
    deadline = time.monotonic() + 900
    pending = list(ports)
    while time.monotonic() < deadline:
        topics = node_leaders(pending[0])
        if all(
            len(topics.get(name, [])) == size and min(topics[name]) >= 0
            for name, size in zip(names, sizes, strict=True)
        ):
            pending.pop(0)
            if not pending:
                return names, time.perf_counter() - started
            continue
        time.sleep(0.2)
    raise RuntimeError(f"{partitions} partitions without a leader after 15 min")


def node_leaders(port: int) -> dict[str, list[int]]:
    """One node's own view: a Metadata v1 request for every topic on a raw socket, to
    topic -> the leader of each partition (-1: none). A node's metadata may lag the
    controller's (Kafka: a broker publishes it once it applied the records, logs created)."""
    import socket
    import struct

    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(_request(3, 1, 1, struct.pack(">i", -1)))
        reader = sock.makefile("rb")
        data = reader.read(struct.unpack(">i", reader.read(4))[0])
    at = 4  # correlation id

    def take(fmt: str) -> Any:
        nonlocal at
        values = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string() -> str:
        nonlocal at
        length = take(">h")
        text = data[at : at + max(0, length)].decode()
        at += max(0, length)
        return text

    for _ in range(take(">i")):  # brokers: id, host, port, rack
        take(">i")
        string()
        take(">i")
        string()
    take(">i")  # controller id
    topics: dict[str, list[int]] = {}
    for _ in range(take(">i")):
        take(">h")
        name = string()
        take(">b")
        leaders = []
        for _ in range(take(">i")):
            _error, _index, leader = take(">hii")
            take(">" + "i" * take(">i"))
            take(">" + "i" * take(">i"))
            leaders.append(leader)
        topics[name] = leaders
    return topics


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.list_topics(topic, timeout=30).topics[topic].partitions[partition].leader)


def measure_scale(
    report: Report, target_name: str, target: Any, sizes: dict[str, int], nice: int, base: Path
) -> None:
    """S2 on three nodes (RF=3): topic creation, Metadata p50/p99, produce spread over up to
    1,000 partitions against one, RSS per node, many connections to one node."""
    bootstrap = target.bootstrap_servers
    partitions = sizes["s2_partitions"]
    mib = 2**20
    # the one-partition topic first: with 10,000 partitions to replicate a new topic's
    # ISR may take long to fill on a loaded machine
    create_topic(bootstrap, "s2-one", 1, 3, {})
    rss_before = {i: _rss_bytes(pid) for i, pid in node_pids(target).items()}
    ports = [node_port(target, i) for i in node_pids(target)]
    names, seconds = create_topics_timed(bootstrap, ports, partitions, 3)
    what = f"{partitions:,} partitions RF=3"
    report.add("S2", f"create {what} ({len(names)} topics)", "s", target_name, seconds, lower=True)
    print(
        f"  ({target_name} RSS before creation, MiB: "
        + ", ".join(f"{v / mib:.0f}" for v in rss_before.values())
        + ")",
        flush=True,
    )
    result = run_workers(
        "metadata", [{"bootstrap": bootstrap, "requests": sizes["s2_metadata"]}], nice
    )[0]
    if result["partitions"] < partitions:
        raise RuntimeError(f"Metadata showed {result['partitions']} partitions")
    label = f"full Metadata ({result['partitions']:,} partitions)"
    report.add("S2", f"{label} p50", "ms", target_name, result["p50_ms"], lower=True)
    report.add("S2", f"{label} p99", "ms", target_name, result["p99_ms"], lower=True)
    rss = {i: _rss_bytes(pid) for i, pid in node_pids(target).items()}
    report.add(
        "S2", f"RSS per node, max, {what}", "MiB", target_name, max(rss.values()) / mib, lower=True
    )
    report.add(
        "S2", f"RSS of the 3 nodes, {what}", "MiB", target_name, sum(rss.values()) / mib, lower=True
    )
    # produce: one partition, then the same messages over the first topic's partitions
    spread = min(1000, partitions)
    rates = {}
    for topic, count in (("s2-one", 1), (names[0], spread)):
        rates[count] = run_workers(
            "produce",
            [
                {
                    "bootstrap": bootstrap,
                    "topic": topic,
                    "partitions": count,
                    "messages": sizes["s2_messages"],
                    "acks": "1",
                }
            ],
            nice,
        )[0]["rate"]
    report.add("S2", "produce acks=1, 1 partition", "msgs/s", target_name, rates[1])
    report.add("S2", f"produce acks=1, {spread:,} partitions", "msgs/s", target_name, rates[spread])
    report.add(
        "S2",
        f"produce {spread:,} partitions / 1 partition",
        "x",
        target_name,
        rates[spread] / rates[1],
    )
    # connections to the node leading s2-one/0, which must still take a produce
    node_id = leader_of(bootstrap, "s2-one", 0)
    pid = node_pids(target)[node_id]
    count = sizes["s2_connections"]
    before = _rss_bytes(pid)
    ready, release = base / "s2-connections.ready", base / "s2-connections.release"
    job = {
        "port": node_port(target, node_id),
        "count": count,
        "topic": "s2-one",
        "partition": 0,
        "ready": str(ready),
        "release": str(release),
    }
    prefix = ["nice", "-n", str(nice)] if nice else []
    process = subprocess.Popen(
        [*prefix, sys.executable, __file__, "--worker", "connections", json.dumps(job)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the connections worker failed")
            time.sleep(0.05)
        during = _rss_bytes(pid)
        release.touch()
        out, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            raise RuntimeError(f"connections worker failed ({process.returncode})")
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    label = f"{count:,} connections to one node"
    report.add(
        "S2",
        f"{label}: open + ApiVersions + Metadata",
        "s",
        target_name,
        result["seconds"],
        lower=True,
    )
    report.add(
        "S2", f"{label}: node RSS increase", "MiB", target_name, (during - before) / mib, lower=True
    )
    report.add(
        "S2", f"{label}: a produce meanwhile", "ms", target_name, result["produce_ms"], lower=True
    )


def measure_shape(
    report: Report,
    nodes: int,
    target_name: str,
    make: Callable[[], Any],
    goals: set[str],
    sizes: dict[str, int],
    nice: int,
    jars: Path | None,
    base: Path,
) -> None:
    target = make()
    with started(target):
        bootstrap = target.bootstrap_servers
        if "T1" in goals:
            result = run_workers(
                "first_produce",
                [
                    {
                        "bootstrap": bootstrap,
                        "topic": "t1-first",
                        "launched_at_wall": time.time()
                        - (time.perf_counter() - target.launched_at),
                    }
                ],
                nice,
            )[0]
            report.add(
                "T1",
                f"{nodes} node(s): launch to first produce",
                "s",
                target_name,
                result["seconds"],
                lower=True,
            )
            if target_name == "kafka":
                print(f"  (kafka format: {target.format_s:.2f} s, not counted)")
        if nodes == 1:
            if goals & {"P1", "C1"}:
                create_topic(bootstrap, "p1", 1, 1, {})
                rate = run_workers(
                    "produce",
                    [
                        {
                            "bootstrap": bootstrap,
                            "topic": "p1",
                            "partitions": 1,
                            "messages": sizes["messages"],
                            "acks": "1",
                        }
                    ],
                    nice,
                )[0]["rate"]
                report.add("P1", "1 partition, python producer", "msgs/s", target_name, rate)
            if "P1" in goals and jars is not None:
                create_topic(bootstrap, "p1j", 1, 1, {})
                rate = java_produce(jars, nice, bootstrap, "p1j", sizes["messages"], "1", 1)
                report.add("P1", "1 partition, ProducerPerformance", "msgs/s", target_name, rate)
            if "P1x12" in goals:
                create_topic(bootstrap, "p12", 12, 1, {})
                results = run_workers(
                    "produce",
                    [
                        {
                            "bootstrap": bootstrap,
                            "topic": "p12",
                            "partitions": 12,
                            "messages": sizes["messages"] // 4,
                            "acks": "1",
                        }
                    ]
                    * 4,
                    nice,
                    base,
                )
                report.add(
                    "P1x12",
                    "12 partitions, 4 python producers",
                    "msgs/s",
                    target_name,
                    sum(r["rate"] for r in results),
                )
                if jars is not None:
                    create_topic(bootstrap, "p12j", 12, 1, {})
                    rate = java_produce(
                        jars, nice, bootstrap, "p12j", sizes["messages"] // 4, "1", 4
                    )
                    report.add(
                        "P1x12", "12 partitions, 4 ProducerPerformance", "msgs/s", target_name, rate
                    )
            if "C1" in goals:
                rate = run_workers(
                    "consume",
                    [{"bootstrap": bootstrap, "topic": "p1", "messages": sizes["messages"]}],
                    nice,
                )[0]["rate"]
                report.add("C1", "python consumer", "msgs/s", target_name, rate)
                if jars is not None:
                    columns = java_consume(jars, nice, bootstrap, "p1", sizes["messages"])
                    report.add(
                        "C1", "ConsumerPerformance", "msgs/s", target_name, columns["nMsg.sec"]
                    )
                    report.add(
                        "C1",
                        "ConsumerPerformance after its join (fetch.nMsg.sec)",
                        "msgs/s",
                        target_name,
                        columns["fetch.nMsg.sec"],
                    )
                    report.add(
                        "C1",
                        "ConsumerPerformance group join (rebalance.time.ms)",
                        "ms",
                        target_name,
                        columns["rebalance.time.ms"],
                        lower=True,
                    )
        else:
            if "P2" in goals:
                create_topic(bootstrap, "p2", 1, 3, {"min.insync.replicas": "2"})
                rate = run_workers(
                    "produce",
                    [
                        {
                            "bootstrap": bootstrap,
                            "topic": "p2",
                            "partitions": 1,
                            "messages": sizes["messages"],
                            "acks": "all",
                        }
                    ],
                    nice,
                )[0]["rate"]
                report.add("P2", "RF=3 acks=all, python producer", "msgs/s", target_name, rate)
                if jars is not None:
                    create_topic(bootstrap, "p2j", 1, 3, {"min.insync.replicas": "2"})
                    rate = java_produce(jars, nice, bootstrap, "p2j", sizes["messages"], "all", 1)
                    report.add(
                        "P2", "RF=3 acks=all, ProducerPerformance", "msgs/s", target_name, rate
                    )
            if "L1" in goals:
                create_topic(bootstrap, "l1", 1, 3, {"min.insync.replicas": "2"})
                result = run_workers(
                    "latency",
                    [
                        {
                            "bootstrap": bootstrap,
                            "topic": "l1",
                            "rate": sizes["latency_rate"],
                            "seconds": sizes["latency_s"],
                        }
                    ],
                    nice,
                )[0]
                what = f"e2e at {sizes['latency_rate']:,} msgs/s"
                report.add("L1", f"{what} p50", "ms", target_name, result["p50_ms"], lower=True)
                report.add("L1", f"{what} p99", "ms", target_name, result["p99_ms"], lower=True)
            if "G1" in goals:
                create_topic(bootstrap, "g1", 1, 3, {})
                result = run_workers(
                    "commits",
                    [{"bootstrap": bootstrap, "topic": "g1", "commits": sizes["commits"]}],
                    nice,
                )[0]
                report.add(
                    "G1", "sync commits/s, 1 consumer", "commits/s", target_name, result["rate"]
                )
                report.add("G1", "sync commit p50", "ms", target_name, result["p50_ms"], lower=True)
                report.add("G1", "sync commit p99", "ms", target_name, result["p99_ms"], lower=True)
            if "G1 rebalance" in goals:
                members = sizes["members"]
                create_topic(bootstrap, "g1r", members, 3, {})
                result = run_workers(
                    "rebalance",
                    [
                        {
                            "bootstrap": bootstrap,
                            "topic": "g1r",
                            "members": members,
                            "partitions": members,
                        }
                    ],
                    nice,
                )[0]
                what = f"{members} members, {members} partitions"
                report.add(
                    "G1 rebalance",
                    f"{what}: first subscribe to all assigned",
                    "s",
                    target_name,
                    result["first_join_s"],
                    lower=True,
                )
                report.add(
                    "G1 rebalance",
                    f"{what}: member {members + 1} joins, to all reassigned",
                    "s",
                    target_name,
                    result["rebalance_s"],
                    lower=True,
                )
            if "S2" in goals:
                measure_scale(report, target_name, target, sizes, nice, base)
        print(f"  [{target_name}, {nodes} node(s)] server CPU: {target.cpu_s():.1f} s", flush=True)


def measure_ceilings(report: Report, goals: set[str], sizes: dict[str, int], nice: int) -> None:
    """The python producer against librdkafka's mock cluster. No consumer ceiling: the mock
    keeps only the last ~5 MB of a partition and serves ~30k msgs/s (docs/performance.md,
    "produce/consume"), far below either server."""
    if "P1" in goals:
        rate = run_workers(
            "produce",
            [
                {
                    "bootstrap": "mock",
                    "topic": "p1",
                    "partitions": 1,
                    "messages": sizes["messages"],
                    "acks": "1",
                }
            ],
            nice,
        )[0]["rate"]
        report.figures[("P1", "1 partition, python producer")].ceiling.append(rate)


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = "?"
    with contextlib.suppress(OSError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.0f} GiB"
    return (
        f"{platform.machine()} {cpu}, {os.cpu_count()} cpus, {memory}, Linux {platform.release()}"
    )


def _client_version() -> str:
    import confluent_kafka

    version: Any = confluent_kafka.version()  # a str in 2.16, a (str, int) tuple before
    return str(version if isinstance(version, str) else version[0])


def versions() -> str:
    import confluent_kafka

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    java_line = (java.stderr.splitlines() or ["?"])[0]
    trafka_commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (
        f"trafka {trafka_commit}, Apache Kafka {kafka_version()} (KRaft, {KAFKA_HEAP}), "
        f"Python {platform.python_version()}, confluent-kafka {_client_version()} "
        f"/ librdkafka {confluent_kafka.libversion()[0]}, {java_line}"
    )


def raise_file_limit(wanted: int = 1 << 20) -> None:
    """S2: 10,000 partitions RF=3 on three nodes are ~10,000 replicas per node, each with a
    log file open (Kafka also maps two index files), and 1,000 client connections on top:
    the soft limit of open files goes up to the hard one (for root, the hard one up to
    `fs.nr_open`), inherited by the nodes and the workers."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(OSError, ValueError):
        ceiling = int(Path("/proc/sys/fs/nr_open").read_text())
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, ceiling), min(wanted, ceiling)))
        return
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--goals", default=",".join(GOALS))
    parser.add_argument("--targets", default="trafka,kafka")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--latency-rate", type=int, default=10_000)
    parser.add_argument("--latency-seconds", type=int, default=10)
    parser.add_argument("--s2-partitions", type=int, default=10_000)
    parser.add_argument("--s2-connections", type=int, default=1000)
    parser.add_argument("--s2-metadata", type=int, default=200, help="Metadata requests")
    parser.add_argument("--s2-messages", type=int, default=200_000, help="per produce run")
    parser.add_argument("--members", type=int, default=10, help="G1 rebalance group size")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--nice", type=int, default=5, help="niceness of servers and loads")
    parser.add_argument("--no-java", action="store_true", help="skip Kafka's own tools")
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks it runs")
    parser.add_argument("--kafka-cache", type=Path, default=None)
    parser.add_argument("--append-doc", action="store_true")
    parser.add_argument("--keep-dirs", action="store_true", help="keep data dirs and logs")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker[0]](json.loads(args.worker[1]))), flush=True)
        return
    goals = {g.strip() for g in args.goals.split(",") if g.strip()}
    if goals - set(GOALS):
        parser.error(f"unknown goals {sorted(goals - set(GOALS))}; the goals: {', '.join(GOALS)}")
    raise_file_limit()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    sizes = {
        "messages": args.messages,
        "commits": args.commits,
        "latency_rate": args.latency_rate,
        "latency_s": args.latency_seconds,
        "s2_partitions": args.s2_partitions,
        "s2_connections": args.s2_connections,
        "s2_metadata": args.s2_metadata,
        "s2_messages": args.s2_messages,
        "members": args.members,
    }
    if args.smoke:
        # one node, P1 and C1 with both load generators: every moving part once (Maven,
        # format, both servers, the workers, the Java tools' output parsed), in < 1 min
        sizes = {
            "messages": 2000,
            "commits": 20,
            "latency_rate": 200,
            "latency_s": 1,
            "s2_partitions": 30,
            "s2_connections": 20,
            "s2_metadata": 20,
            "s2_messages": 2000,
            "members": args.members,
        }
        goals &= {"P1", "C1"} if args.goals == ",".join(GOALS) else goals
        args.repeat, args.no_ceiling = 1, True
    jars = None
    if "kafka" in targets or not args.no_java:
        cache = args.kafka_cache or Path.home() / ".cache" / "trafka-bench" / (
            f"kafka-{kafka_version()}"
        )
        jars = fetch_kafka(cache)
    java_jars = None if args.no_java else jars
    header = [
        f"machine: {machine()}",
        f"versions: {versions()}",
        f"command: {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"load average before: {load_average()}"
        f"  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
    ]
    print("\n".join(header), flush=True)
    report = Report()
    for run in range(args.repeat):
        for nodes, shape_goals in ((1, {"T1", *ONE_NODE_GOALS}), (3, {"T1", *THREE_NODE_GOALS})):
            wanted = goals & shape_goals
            if not wanted:
                continue
            for target_name in targets:
                print(f"run {run + 1}, {nodes} node(s), {target_name}:", flush=True)
                keep = tempfile.mkdtemp(prefix="trafka-vs-kafka-") if args.keep_dirs else None
                with (
                    contextlib.nullcontext(keep)
                    if keep
                    else tempfile.TemporaryDirectory(prefix="trafka-vs-kafka-")
                ) as tmp:
                    if keep:
                        print(f"  (data dirs and node logs kept in {keep})", flush=True)
                    base = Path(tmp)

                    def make(
                        target_name: str = target_name,
                        base: Path = base,
                        nodes: int = nodes,
                        wanted: set[str] = wanted,
                    ) -> Any:
                        if target_name == "kafka":
                            assert jars is not None
                            cluster = KafkaCluster(base, jars, nodes, nice=args.nice)
                            cluster.format()
                            return cluster
                        # S2's 1,000 client connections come from 127.0.0.1 like the
                        # replicas' own: trafka's max.connections.per.ip (1,000 by default,
                        # a hardening) goes to Kafka's default, unlimited
                        extra = ["max.connections.per.ip=2147483647"] if "S2" in wanted else []
                        return Trafka(base, nodes, nice=args.nice, extra=extra)

                    measure_shape(
                        report,
                        nodes,
                        target_name,
                        make,
                        wanted,
                        sizes,
                        args.nice,
                        java_jars,
                        base,
                    )
        if not args.no_ceiling and goals & {"P1", "C1"}:
            print(f"run {run + 1}, ceiling (librdkafka mock cluster):", flush=True)
            measure_ceilings(report, goals, sizes, args.nice)
    footer = f"load average after: {load_average()}"
    print(footer)
    text = "\n".join(
        [
            "",
            "```",
            *header,
            footer,
            "```",
            "",
            report.table(),
            "",
            "Kafka's tools in this run: " + "; ".join(f"`{c}`" for c in sorted(COMMANDS)),
            "",
        ]
    )
    print(text)
    if args.append_doc:
        with open(REPO / "docs" / "performance.md", "a") as doc:
            doc.write(text)


if __name__ == "__main__":
    main()
