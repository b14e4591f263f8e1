"""The trio client connection against the in-process server with the toy handler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12

from trafka.net import protocol
from trafka.net.client import (
    ConnectionBroken,
    KafkaConnection,
    RequestTimedOut,
    UnsupportedByBroker,
    choose_version,
)
from trafka.net.server import KafkaServer, Listener

from .toy import SUPPORTED, ToyBroker
from .wire import metadata_v1, produce_v3

Open = Callable[..., Awaitable[KafkaConnection]]


@pytest.fixture
async def open_connection(nursery: trio.Nursery) -> AsyncIterator[Open]:
    connections: list[KafkaConnection] = []

    async def open_(supported: protocol.SupportedApis = SUPPORTED) -> KafkaConnection:
        broker = ToyBroker(supported=supported)
        server = KafkaServer(broker.handle, supported)
        bound = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
        broker.port = bound[0].port
        connection = await KafkaConnection.connect(
            "127.0.0.1", broker.port, client_id="client-test"
        )
        connections.append(connection)
        return connection

    yield open_
    for connection in connections:
        await connection.close()


async def test_negotiation_and_version_choice(open_connection: Open) -> None:
    connection = await open_connection()
    ranges = await connection.negotiate_api_versions({3: (1, 12), 0: (3, 9)})
    assert (ranges[3].min_version, ranges[3].max_version) == (1, 12)
    assert ranges[0].min_version == 0  # advertised from v0
    assert connection.version_for(3) == 12
    assert connection.version_for(0, 3, 7) == 7
    response = await connection.request(
        MetadataRequestV12(topics=None, include_topic_authorized_operations=False)
    )
    assert response.cluster_id == "toy-cluster"
    assert response.brokers[0].port == connection._socket.getpeername()[1]


async def test_negotiation_falls_back_when_broker_has_older_api_versions(
    open_connection: Open,
) -> None:
    older = protocol.SupportedApis(
        [protocol.ApiVersionRange(18, 0, 2), protocol.ApiVersionRange(3, 1, 12)]
    )
    connection = await open_connection(older)
    ranges = await connection.negotiate_api_versions()
    assert ranges[18].max_version == 2
    assert not connection.closed


async def test_pipelined_requests_from_many_tasks(open_connection: Open) -> None:
    connection = await open_connection()
    results: dict[str, str] = {}

    async def produce(topic: str) -> None:
        response = await connection.request(produce_v3(topic))
        results[topic] = response.responses[0].name

    async with trio.open_nursery() as nursery:
        for index in range(20):
            nursery.start_soon(produce, f"slow-{(20 - index) * 3}")
    assert results == {topic: topic for topic in results} and len(results) == 20


async def test_acks_zero_returns_none(open_connection: Open) -> None:
    connection = await open_connection()
    assert await connection.request(produce_v3("t", acks=0)) is None
    response = await connection.request(metadata_v1())
    assert response.brokers[0].node_id == 1


async def test_timeout_breaks_the_connection(open_connection: Open) -> None:
    connection = await open_connection()
    with pytest.raises(RequestTimedOut):
        await connection.request(produce_v3("slow-2000"), timeout_s=0.05)
    assert connection.closed
    with pytest.raises(ConnectionBroken):
        await connection.request(metadata_v1())


async def test_server_closing_raises_connection_broken(open_connection: Open) -> None:
    connection = await open_connection()
    with pytest.raises(ConnectionBroken):
        await connection.request(MetadataRequestV0(topics=()))  # below the toy's minimum


async def test_wrong_class_for_version_is_refused(open_connection: Open) -> None:
    connection = await open_connection()
    with pytest.raises(ValueError):
        await connection.request(metadata_v1(), api_version=5)


def test_choose_version() -> None:
    ranges = {0: protocol.ApiVersionRange(0, 3, 9, advertised_min_version=0)}
    assert choose_version(ranges, 0, 3, 12) == 9
    assert choose_version(ranges, 0, 0, 7) == 7
    with pytest.raises(UnsupportedByBroker):
        choose_version(ranges, 1, 4, 11)
    with pytest.raises(UnsupportedByBroker):
        choose_version({0: protocol.ApiVersionRange(0, 10, 12)}, 0, 3, 9)
