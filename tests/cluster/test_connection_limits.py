"""Broker-wide and per-listener connection limits on a real knode (KIP-306/KIP-402/KIP-612),
driven with raw sockets: `listener.name.plaintext.max.connections` holds the next client
in the backlog until a connection closes, and `max.connection.creation.rate` set
dynamically (IncrementalAlterConfigs on the cluster default) paces new connections."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

API_VERSIONS_V0 = bytes.fromhex("0012 0000 00000001 0004") + b"test"


CLIENT_PORT = free_port()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    """One node with a second listener, CLIENT, limited to 2 connections (the node's own
    inter-broker connections use PLAINTEXT)."""
    base: Path = tmp_path_factory.mktemp("connection-limits")
    cluster = KnodeCluster(base)
    node = cluster.nodes[1]
    node.extra = [
        f"listeners=PLAINTEXT://127.0.0.1:{node.port},CLIENT://127.0.0.1:{CLIENT_PORT}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.name.client.max.connections=2",
    ]
    with cluster as running:
        yield running


def _open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(len(API_VERSIONS_V0).to_bytes(4, "big") + API_VERSIONS_V0)
    return sock


def _answered(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return len(sock.recv(4)) == 4
    except TimeoutError:
        return False


def test_a_listener_at_its_limit_serves_the_next_client_once_one_closes(
    cluster: KnodeCluster,
) -> None:
    port = CLIENT_PORT
    first = [_open(port) for _ in range(2)]
    try:
        assert all(_answered(sock, 10) for sock in first)
        waiting = _open(port)  # the kernel completes the handshake; the broker waits
        try:
            assert not _answered(waiting, 1.0)
            first.pop().close()
            assert _answered(waiting, 10)
        finally:
            waiting.close()
    finally:
        for sock in first:
            sock.close()


def _set_cluster_default(cluster: KnodeCluster, configs: dict[str, str | None]) -> None:
    async def run() -> None:
        connection = await KafkaConnection.connect("127.0.0.1", cluster.nodes[1].port)
        try:
            await connection.negotiate_api_versions()
            request_class = codec.request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
            assert request_class is not None
            data = {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configs": [
                            {
                                "name": key,
                                "config_operation": 0 if value is not None else 1,
                                "value": value,
                            }
                            for key, value in configs.items()
                        ],
                    }
                ],
                "validate_only": False,
            }
            response = await connection.request(build(request_class, data), 1)
            assert [int(r.error_code) for r in response.responses] == [0], response
        finally:
            await connection.close()

    trio.run(run)


def test_a_dynamic_creation_rate_paces_new_connections(cluster: KnodeCluster) -> None:
    port = CLIENT_PORT
    _set_cluster_default(cluster, {"max.connection.creation.rate": "2"})
    try:
        # 8 connections one after another (each closed once answered): at 2/s over the
        # quota window the listener waits between accepts, so they take seconds.
        started = time.monotonic()
        for _ in range(8):
            sock = _open(port)
            try:
                assert _answered(sock, 15)
            finally:
                sock.close()
        paced = time.monotonic() - started
        assert paced >= 1.5, paced
        # The inter-broker listener is exempt from the broker-wide rate (KIP-612).
        started = time.monotonic()
        for _ in range(8):
            sock = _open(cluster.nodes[1].port)
            try:
                assert _answered(sock, 15)
            finally:
                sock.close()
        assert time.monotonic() - started < paced / 2
    finally:
        _set_cluster_default(cluster, {"max.connection.creation.rate": None})
    started = time.monotonic()
    for _ in range(8):
        sock = _open(port)
        try:
            assert _answered(sock, 15)
        finally:
            sock.close()
    assert time.monotonic() - started < paced / 2
