"""AlterReplicaLogDirs on a real knode: moving a partition of a few hundred MB between the
node's two log dirs keeps the event loop responsive (the copy runs in a worker thread;
only the closed remainder runs on the loop): ApiVersions round trips on another connection
stay short during the whole move, a producer keeps appending to the moving partition, and
every record, from before and during the move, is there afterwards."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MIB = 1024 * 1024
VALUE = b"v" * (256 * 1024)
TOTAL_BYTES = 300 * MIB
API_VERSIONS_V0 = bytes.fromhex("0012 0000 00000001 0004") + b"probe"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("dir-move")
    cluster = KnodeCluster(base, settings=["log.segment.bytes=67108864"], start=False)
    node = cluster.nodes[1]
    node.extra = [f"log.dirs={node.data_dir},{node.data_dir.parent / 'node-1-second'}"]
    with cluster as running:
        running.start_all()
        yield running


class _Prober:
    """ApiVersions round trips, one after another on one connection, with their times."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _receive(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            assert chunk, "closed"
            data += chunk
        return data

    def _run(self) -> None:
        frame = len(API_VERSIONS_V0).to_bytes(4, "big") + API_VERSIONS_V0
        while not self.stop.is_set():
            sent = time.monotonic()
            self.sock.sendall(frame)
            size = int.from_bytes(self._receive(4), "big")
            self._receive(size)
            self.samples.append((sent, time.monotonic() - sent))
            time.sleep(0.005)

    def worst_between(self, start: float, end: float) -> float:
        return max((lat for at, lat in self.samples if start <= at <= end), default=0.0)


def _alter_replica_log_dirs(port: int, path: Path, topic: str) -> list[int]:
    async def run() -> list[int]:
        connection = await KafkaConnection.connect("127.0.0.1", port)
        try:
            await connection.negotiate_api_versions()
            request_class = codec.request_class(ApiKey.ALTER_REPLICA_LOG_DIRS, 2)
            assert request_class is not None
            data = {"dirs": [{"path": str(path), "topics": [{"name": topic, "partitions": [0]}]}]}
            response = await connection.request(build(request_class, data), 2)
            return [int(p.error_code) for r in response.results for p in r.partitions]
        finally:
            await connection.close()

    return trio.run(run)


def test_a_large_move_keeps_the_loop_responsive(cluster: KnodeCluster) -> None:
    topic = "big-move"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replication_factor=1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "message.max.bytes": 2_000_000,
            "queue.buffering.max.kbytes": 65536,
        }
    )
    count = TOTAL_BYTES // len(VALUE)
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    node = cluster.nodes[1]
    first, second = node.data_dir, node.data_dir.parent / "node-1-second"
    source = first if (first / f"{topic}-0").is_dir() else second
    destination = second if source == first else first
    moved_bytes = sum(p.stat().st_size for p in (source / f"{topic}-0").iterdir())
    assert moved_bytes >= TOTAL_BYTES

    prober = _Prober(node.port)
    prober.thread.start()
    # A producer keeps appending small records to the moving partition meanwhile.
    acked: list[int] = []
    stop_producing = threading.Event()

    def produce_during_move() -> None:
        during = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
        number = 0
        while not stop_producing.is_set():
            during.produce(
                topic,
                value=b"during-%d" % number,
                partition=0,
                on_delivery=lambda error, m: acked.append(m.offset()) if error is None else None,
            )
            number += 1
            during.poll(0.01)
        assert during.flush(60) == 0

    appender = threading.Thread(target=produce_during_move, daemon=True)
    appender.start()
    try:
        wait_until(lambda: len(acked) >= 10, timeout_s=30, what="appends before the move")
        started = time.monotonic()
        assert _alter_replica_log_dirs(node.port, destination, topic) == [0]
        ended = time.monotonic()
        time.sleep(0.2)
    finally:
        stop_producing.set()
        appender.join(90)
        prober.stop.set()
        prober.thread.join(30)
        prober.sock.close()
    duration = ended - started
    worst = prober.worst_between(started - 0.05, ended)
    print(f"moved {moved_bytes / MIB:.0f} MiB in {duration:.2f} s; worst ApiVersions {worst:.3f} s")
    assert (destination / f"{topic}-0").is_dir() and not (source / f"{topic}-0").exists()
    # The old synchronous copy stalled the loop for the whole move.
    assert worst < max(1.0, duration / 3), (worst, duration)
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "dir-move"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, count + len(acked))
        assert sorted(acked) == list(range(count, count + len(acked)))
        # Records from before, and the last appended during the move, read back.
        for offset, value in ((0, VALUE), (count - 1, VALUE), (high - 1, None)):
            consumer.assign([TopicPartition(topic, 0, offset)])
            message = None
            deadline = time.monotonic() + 30
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(1.0)
            assert message is not None and message.error() is None
            assert message.offset() == offset
            assert value is None or message.value() == value
    finally:
        consumer.close()
