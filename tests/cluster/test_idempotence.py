"""Idempotent producers: a connection cut mid-batch is retried and logged exactly once.

A small TCP proxy sits between the client and knode (the node advertises the proxy's port,
so every connection goes through it). For the first few Produce requests it forwards the
request, lets the node append and answer, then drops the answer and cuts both connections.
The producer cannot know whether its batch was written and retries it with the same
producer id and sequence; the node recognises the duplicate and answers with the original
offsets. The log must hold each message exactly once, in order.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes | None:
    size = _read_exactly(sock, 4)
    if size is None:
        return None
    body = _read_exactly(sock, struct.unpack(">i", size)[0])
    return None if body is None else size + body


class CuttingProxy:
    """Request/response proxy that cuts the connection after the first `cuts` Produces."""

    def __init__(self, listen_port: int, upstream_port: int, cuts: int) -> None:
        self.listen_port = listen_port
        self.upstream_port = upstream_port
        self.cuts_left = cuts
        self.cut_count = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", listen_port))
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def start(self) -> None:
        thread = threading.Thread(target=self._accept_loop, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _take_cut(self) -> bool:
        with self._lock:
            if self.cuts_left > 0:
                self.cuts_left -= 1
                self.cut_count += 1
                return True
            return False

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            client.close()
            return
        self._sockets += [client, upstream]
        try:
            self._pump(client, upstream)
        except OSError:
            pass  # either side went away (the client reconnects): end this pair
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        while True:
            request = _read_frame(client)
            if request is None:
                return
            (api_key,) = struct.unpack_from(">h", request, 4)
            upstream.sendall(request)
            response = _read_frame(upstream)
            if response is None:
                return
            if api_key == 0 and self._take_cut():
                return  # the node appended and answered; the client never hears of it
            client.sendall(response)

    def stop(self) -> None:
        self._stopped = True
        self._server.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass


@pytest.fixture
def proxied_node(tmp_path: Path) -> Iterator[tuple[KnodeCluster, CuttingProxy]]:
    proxy_port = free_port()
    cluster = KnodeCluster(
        tmp_path, settings=[f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy_port}"]
    )
    with cluster:
        proxy = CuttingProxy(proxy_port, cluster.nodes[1].port, cuts=3)
        proxy.start()
        try:
            yield cluster, proxy
        finally:
            proxy.stop()


def test_cut_connection_retries_are_deduplicated(
    proxied_node: tuple[KnodeCluster, CuttingProxy],
) -> None:
    cluster, proxy = proxied_node
    bootstrap = f"127.0.0.1:{proxy.listen_port}"
    count = 3000
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.num.messages": 200,
            "message.timeout.ms": 60000,
            "reconnect.backoff.ms": 20,
            "retry.backoff.ms": 20,
        }
    )
    failures: list[object] = []
    for i in range(count):
        producer.produce(
            "idem",
            value=f"value-{i}-".encode(),
            partition=0,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
        producer.poll(0)
        if i % 500 == 0:
            time.sleep(0.05)  # several produce requests, so several cuts happen mid-stream
    assert producer.flush(60) == 0
    assert failures == [], failures[:3]
    assert proxy.cut_count == 3

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "idem-check",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition("idem", 0, OFFSET_BEGINNING)])
        values = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF
                break
            values.append(message.value())
        low, high = consumer.get_watermark_offsets(TopicPartition("idem", 0), 10)
    finally:
        consumer.close()
    expected = [f"value-{i}-".encode() for i in range(count)]
    duplicates = len(values) - len(set(values))
    assert values == expected, f"{len(values)} values, {duplicates} duplicates"
    assert (low, high) == (0, count)
