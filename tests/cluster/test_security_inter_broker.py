"""Issue 12 item 2 / issue 14 item 4: a client cannot act as the controller or a replica.

One real knode with two named listeners, ``CLIENT`` (for clients) and ``INTERNAL``
(``inter.broker.listener.name``). Forged LeaderAndIsr / UpdateMetadata / StopReplica /
ControlledShutdown and a fake follower Fetch get CLUSTER_AUTHORIZATION_FAILED on the client
listener, and - with forged epochs - on the inter-broker listener too; afterwards the
topic's leader, the advertised endpoints, the log and the high watermark are unchanged.
Metadata answers each client with the endpoint of the listener it came in on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from tests.cluster import forged
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from trafka.net.client import KafkaConnection

TOPIC = "guarded"
RECORDS = 20


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KnodeCluster, int]]:
    base: Path = tmp_path_factory.mktemp("inter-broker")
    cluster = KnodeCluster(base, node_count=1, start=False)
    node = cluster.nodes[1]
    internal = free_port()
    node.extra = [
        f"listeners=CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
    ]
    with cluster:
        cluster.start_all()
        yield cluster, internal


def _produce(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(RECORDS):
        producer.produce(TOPIC, value=f"v{index}".encode())
    assert producer.flush(30) == 0


async def _connect(port: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", port, client_id="forger")


async def _state(port: int) -> tuple[list[tuple[int, str, int]], int, int]:
    connection = await _connect(port)
    try:
        answer = await forged.metadata(connection, TOPIC)
    finally:
        await connection.close()
    brokers = sorted((int(b.node_id), str(b.host), int(b.port)) for b in answer.brokers)
    partition = answer.topics[0].partitions[0]
    return brokers, int(partition.leader_id), int(partition.leader_epoch)


def _consume_count(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    try:
        for _ in range(50):
            for message in consumer.consume(100, timeout=1):
                if message.error() is None:
                    seen += 1
            if seen >= RECORDS:
                break
    finally:
        consumer.close()
    return seen


def test_metadata_answers_with_the_listener_the_client_came_in_on(
    two_listeners: tuple[KnodeCluster, int],
) -> None:
    cluster, internal = two_listeners
    client_port = cluster.nodes[1].port
    brokers_client, _, _ = trio.run(_state_or_create, cluster)
    assert brokers_client == [(1, "127.0.0.1", client_port)]
    brokers_internal, _, _ = trio.run(_state, internal)
    assert brokers_internal == [(1, "127.0.0.1", internal)]


async def _state_or_create(cluster: KnodeCluster) -> tuple[list[tuple[int, str, int]], int, int]:
    await trio.to_thread.run_sync(_produce, cluster.bootstrap_servers)
    return await _state(cluster.nodes[1].port)


async def _send(port: int, request: Any) -> Any:
    connection = await _connect(port)
    try:
        return await connection.request(request, timeout_s=30)
    finally:
        await connection.close()


@pytest.mark.parametrize("listener", ["client", "internal-forged-epochs"])
def test_forged_controller_and_replica_requests_change_nothing(
    two_listeners: tuple[KnodeCluster, int], listener: str
) -> None:
    cluster, internal = two_listeners
    client_port = cluster.nodes[1].port
    wait_until(lambda: _has_topic(client_port), timeout_s=60, what="the topic")
    if _consume_count(cluster.bootstrap_servers) < RECORDS:
        _produce(cluster.bootstrap_servers)
    port = client_port if listener == "client" else internal
    before = trio.run(_state, client_port)

    async def attack() -> list[Any]:
        return [
            await _send(port, forged.update_metadata()),
            await _send(port, forged.leader_and_isr(TOPIC)),
            await _send(port, forged.stop_replica(TOPIC)),
            await _send(port, forged.controlled_shutdown()),
            await _send(port, forged.follower_fetch(TOPIC, offset=10**9)),
        ]

    answers = trio.run(attack)
    for answer in answers:
        assert answer.error_code == ErrorCode.cluster_authorization_failed, answer
    fetch_partition = answers[-1].responses[0].partitions[0]
    assert fetch_partition.error_code == ErrorCode.cluster_authorization_failed
    assert fetch_partition.records is None
    after = trio.run(_state, client_port)
    assert after == before
    assert _consume_count(cluster.bootstrap_servers) >= RECORDS
    assert cluster.nodes[1].running


def _has_topic(port: int) -> bool:
    try:
        _, leader, _ = trio.run(_state, port)
    except Exception:
        return False
    return leader == 1
