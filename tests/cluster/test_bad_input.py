"""Bad input at the node level: the node keeps serving other clients and bounded memory."""

from __future__ import annotations

import os
import random
import socket
import struct

import pytest
from confluent_kafka import Producer

from tests.cluster.rawkafka import api_versions, frame_request, read_frame
from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _healthy(cluster: KnodeCluster) -> None:
    port = cluster.nodes[1].port
    error_code, ranges = api_versions(port, 3)
    assert error_code == 0 and 0 in ranges
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    delivered: list[object] = []
    producer.produce("health", value=b"ok", on_delivery=lambda err, _m: delivered.append(err))
    assert producer.flush(15) == 0
    assert delivered == [None]


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _send_and_expect_close(port: int, payload: bytes, *, shutdown_write: bool = True) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        if shutdown_write:
            sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        while True:  # the node answers or closes; it never hangs on us
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return
            if not chunk:
                return


def test_garbage_frames_do_not_hurt_other_clients(knode: KnodeCluster) -> None:
    port = knode.nodes[1].port
    rng = random.Random(1234)
    process = knode.nodes[1].process
    assert process is not None
    idle = socket.create_connection(("127.0.0.1", port))  # connects and never sends
    try:
        _healthy(knode)
        rss_before = _rss_bytes(process.pid)
        _send_and_expect_close(port, bytes(rng.getrandbits(8) for _ in range(4096)))
        _send_and_expect_close(port, struct.pack(">i", 2**31 - 1) + b"\x00" * 100)  # oversize
        _send_and_expect_close(port, struct.pack(">i", -5) + b"\x00" * 10)  # negative size
        _send_and_expect_close(port, struct.pack(">i", 100) + b"\x00\x12\x00")  # truncated
        _send_and_expect_close(port, frame_request(999, 0, 1, b""))  # unknown API key
        _send_and_expect_close(port, frame_request(0, 99, 1, b""))  # unknown version
        _healthy(knode)
        assert _rss_bytes(process.pid) < rss_before + 200 * 1024 * 1024
    finally:
        idle.close()


def test_every_supported_api_with_a_random_body(knode: KnodeCluster) -> None:
    port = knode.nodes[1].port
    _, ranges = api_versions(port, 3)
    rng = random.Random(99)
    for api_key, (low, high) in sorted(ranges.items()):
        for version in {low, high}:
            for size in (0, 3, 64):
                body = bytes(rng.getrandbits(8) for _ in range(size))
                with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                    sock.sendall(frame_request(api_key, version, 5, body))
                    read_frame(sock, timeout_s=10)  # an answer or a close, never a hang
    assert knode.nodes[1].running
    _healthy(knode)


@pytest.mark.parametrize(
    ("version", "who"),
    [(0, "aiokafka"), (1, "old clients"), (2, "kafkajs"), (3, "librdkafka"), (4, "kafka-python")],
)
def test_first_api_versions_request_of_each_client(
    knode: KnodeCluster, version: int, who: str
) -> None:
    error_code, ranges = api_versions(knode.nodes[1].port, version)
    if version <= 3:
        assert error_code == 0, who
        assert ranges[0] == (0, 9)  # Produce advertised from v0 (KAFKA-18659)
        assert ranges[1][0] <= 4 <= ranges[1][1]  # Fetch v4 (MsgVer2 with Produce v3)
        assert ranges[2][1] == 7  # ListOffsets v7 -> kafka-python infers Kafka 3.0
        assert ranges[3][0] <= 1 and ranges[3][1] >= 6  # Metadata: kafkajs 6, aiokafka 5
        assert ranges[18] == (0, 3)
    else:
        assert error_code == 35, who  # UNSUPPORTED_VERSION, v0 layout, our range listed
        assert ranges[18] == (0, 3)


def test_idle_connection_is_not_a_problem(knode: KnodeCluster) -> None:
    port = knode.nodes[1].port
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    try:
        _healthy(knode)
    finally:
        for sock in sockets:
            sock.close()
    assert os.path.exists(knode.nodes[1].stderr_path)
