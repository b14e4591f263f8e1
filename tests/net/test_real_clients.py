"""Real clients bootstrap against the trafka.net server with the toy handler.

Each client's first ApiVersions (librdkafka v3 flexible, kafka-python v4 -> answered with
the KIP-511 v0-layout error, then retried) and its Metadata request get through. The node
tests drive full produce/consume; this only checks the protocol layer.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio

from trafka.net import protocol
from trafka.net.server import KafkaServer, Listener

from .toy import SUPPORTED, ToyBroker

Start = Callable[[protocol.SupportedApis], Awaitable[ToyBroker]]


@pytest.fixture
async def start_toy(nursery: trio.Nursery) -> AsyncIterator[Start]:
    async def start(supported: protocol.SupportedApis) -> ToyBroker:
        broker = ToyBroker(supported=supported)
        server = KafkaServer(broker.handle, supported)
        bound = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
        broker.port = bound[0].port
        return broker

    yield start


def _confluent_list_topics(port: int) -> tuple[str | None, list[int]]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 5000})
    metadata = admin.list_topics(timeout=10)
    return metadata.cluster_id, sorted(metadata.brokers)


def _kafka_python_topics(port: int) -> set[str]:
    with warnings.catch_warnings():
        # kafka-python 3.0.12 loads its JSON schemas with importlib.resources.read_text.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=10000)
    try:
        topics: set[str] = consumer.topics()
        return topics
    finally:
        consumer.close()


async def test_confluent_kafka_bootstraps(start_toy: Start) -> None:
    broker = await start_toy(SUPPORTED)
    cluster_id, brokers = await trio.to_thread.run_sync(_confluent_list_topics, broker.port)
    assert (cluster_id, brokers) == ("toy-cluster", [1])
    first = broker.seen[0]
    assert first[:2] == (18, 3)  # librdkafka opens with ApiVersions v3 (flexible)


async def test_confluent_kafka_falls_back_from_api_versions_v3(start_toy: Start) -> None:
    older = protocol.SupportedApis(
        [
            protocol.ApiVersionRange(18, 0, 2),
            protocol.ApiVersionRange(3, 1, 8),
            protocol.ApiVersionRange(0, 3, 8, advertised_min_version=0),
        ]
    )
    broker = await start_toy(older)
    cluster_id, _ = await trio.to_thread.run_sync(_confluent_list_topics, broker.port)
    assert cluster_id == "toy-cluster"
    # The v3 attempt got the v0-layout error (it never reaches the handler); librdkafka
    # 2.16 then retries with a version we support (observed: v0).
    assert broker.seen[0][0] == 18 and broker.seen[0][1] <= 2


async def test_kafka_python_bootstraps_through_the_v0_error(start_toy: Start) -> None:
    broker = await start_toy(SUPPORTED)
    topics = await trio.to_thread.run_sync(_kafka_python_topics, broker.port)
    assert topics == set()
    api_versions = [v for key, v, _ in broker.seen if key == 18]
    assert api_versions and max(api_versions) == 3  # v4 was refused, v3 retried
    assert any(key == 3 for key, _, _ in broker.seen)


def _aiokafka_topics(port: int) -> set[str]:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def run() -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}")
        await consumer.start()
        try:
            topics: set[str] = await consumer.topics()
            return topics
        finally:
            await consumer.stop()

    return asyncio.run(run())


async def test_aiokafka_bootstraps_with_api_versions_v0(start_toy: Start) -> None:
    broker = await start_toy(SUPPORTED)
    topics = await trio.to_thread.run_sync(_aiokafka_topics, broker.port)
    assert topics == set()
    assert broker.seen[0][:2] == (18, 0)  # aiokafka opens with ApiVersions v0
