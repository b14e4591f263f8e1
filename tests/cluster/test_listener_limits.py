"""Bounded resources on a real knode (issue 12, item 4): 300 connections announcing 100 MB
frames leave the node's RSS within 256 MiB of its idle value, and a client that never reads
its Fetch responses is disconnected while another client's produce latency stays normal."""

from __future__ import annotations

import datetime
import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.rawkafka import frame_request
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.net import codec

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MIB = 1024 * 1024


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _pid(cluster: KnodeCluster) -> int:
    process = cluster.nodes[1].process
    assert process is not None
    return process.pid


def test_announced_frames_cost_no_memory(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path, settings=["connections.max.idle.ms=60000"]) as cluster:
        pid = _pid(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.list_topics(timeout=10)
        idle = _rss_bytes(pid)
        port = cluster.nodes[1].port
        sockets = []
        try:
            for number in range(300):
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                # 100 MB announced (socket.request.max.bytes), a valid Produce v9 header,
                # then a little of the body, and nothing more.
                sock.sendall(
                    struct.pack(">i", 100 * 1000 * 1000)
                    + struct.pack(">hhi", 0, 9, number)
                    + b"\x00" * 4096
                )
                sockets.append(sock)
            time.sleep(3)
            grown = _rss_bytes(pid) - idle
            assert grown < 256 * MIB, f"RSS grew by {grown // MIB} MiB"
            # still serving
            assert admin.list_topics(timeout=10).brokers
        finally:
            for sock in sockets:
                sock.close()


def _fetch_frame(topic: str, correlation_id: int) -> bytes:
    request_class = codec.request_class(1, 4)
    assert request_class is not None
    module = __import__(request_class.__module__, fromlist=["_"])
    request = request_class(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=50 * MIB,
        isolation_level=0,
        topics=(
            module.FetchTopic(
                topic=topic,
                partitions=(
                    module.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=50 * MIB
                    ),
                ),
            ),
        ),
    )
    return frame_request(1, 4, correlation_id, codec.encode_request(request))


def test_a_client_that_never_reads_is_disconnected_and_others_keep_their_latency(
    tmp_path: Path,
) -> None:
    settings = ["connections.max.idle.ms=4000", "message.max.bytes=2000000"]
    with KnodeCluster(tmp_path, settings=settings) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("big", 1, 1), NewTopic("small", 1, 1)])["big"].result(15)
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": 0}
        )
        for _ in range(80):  # 40 MB to fetch
            producer.produce("big", b"x" * 500_000, partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0

        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", cluster.nodes[1].port))
        stalled.settimeout(10)
        for correlation_id in range(20):  # 20 x 40 MB of answers, never read
            stalled.sendall(_fetch_frame("big", correlation_id))

        latencies: list[float] = []
        started = time.monotonic()
        log = cluster.nodes[1].stderr_path
        while "does not read its responses" not in log.read_text():
            assert time.monotonic() - started < 60, "the stalled client was never closed"
            sent = time.monotonic()
            producer.produce("small", b"ping", partition=0)
            assert producer.flush(10) == 0
            latencies.append(time.monotonic() - sent)
            time.sleep(0.1)
        assert time.monotonic() - started >= 3  # connections.max.idle.ms, not at once
        assert latencies and max(latencies) < 2.0, f"latencies {latencies}"

        def closed() -> bool:
            stalled.settimeout(1)
            try:
                while stalled.recv(1 << 20):
                    pass
            except ConnectionResetError:
                return True
            except TimeoutError:
                return False
            return True

        wait_until(closed, timeout_s=30, what="the server to close the stalled connection")
        stalled.close()


def _big_metadata_frame(count: int) -> bytes:
    request_class = codec.request_class(3, 9)
    assert request_class is not None
    module = __import__(request_class.__module__, fromlist=["_"])
    request = request_class(
        topics=tuple(module.MetadataRequestTopic(name=f"missing-{i:06d}") for i in range(count)),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return frame_request(3, 9, 77, codec.encode_request(request))


def test_a_200000_topic_metadata_request_does_not_delay_a_produce(tmp_path: Path) -> None:
    import threading

    frame = _big_metadata_frame(200_000)
    with KnodeCluster(tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("lat", 1, 1)])["lat"].result(15)
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": 0}
        )

        def produce_one() -> float:
            sent = time.monotonic()
            producer.produce("lat", b"ping", partition=0)
            assert producer.flush(10) == 0
            return time.monotonic() - sent

        baseline = [produce_one() for _ in range(30)]
        answer: list[bytes | None] = []

        def ask() -> None:
            # Reads into one bytearray (no quadratic concatenation holding this process's
            # GIL, which would slow the producer measured here, not the node).
            with socket.create_connection(("127.0.0.1", cluster.nodes[1].port)) as sock:
                sock.settimeout(120)
                sock.sendall(frame)
                received = bytearray()
                while len(received) < 4 or len(received) < 4 + int.from_bytes(received[:4]):
                    chunk = sock.recv(1 << 20)
                    if not chunk:
                        answer.append(None)
                        return
                    received += chunk
                answer.append(bytes(received[4:]))

        asking = threading.Thread(target=ask)
        asking.start()
        during: list[float] = []
        while asking.is_alive():
            during.append(produce_one())
        asking.join()
        assert answer and answer[0] is not None, "no Metadata answer"
        assert len(answer[0]) > 200_000 * 10  # every topic answered
        assert len(during) >= 3, "the request was answered before any produce overlapped"
        assert max(during) < max(baseline) + 0.2, (
            f"produce latency during the request {max(during):.3f}s, "
            f"before {max(baseline):.3f}s ({len(during)} produces)"
        )
