"""confluent-kafka (librdkafka) against one real knode: produce, consume, admin, restart."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.cluster.messages import check_order_per_partition, make_messages
from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _admin(cluster: KnodeCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _create(cluster: KnodeCluster, name: str, partitions: int, **configs: str) -> None:
    admin = _admin(cluster)  # must outlive the future
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config=dict(configs))], operation_timeout=10
    )
    futures[name].result(timeout=15)


def _consume_all(
    cluster: KnodeCluster, topic: str, partitions: int, expected: int
) -> list[tuple[int, int, bytes, bytes | None, list[tuple[str, bytes]], int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        received = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + 60
        while (
            len(received) < expected or len(at_eof) < partitions
        ) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_eof.add(message.partition())
                continue
            at_eof.discard(message.partition())
            received.append(
                (
                    message.partition(),
                    message.offset(),
                    message.value(),
                    message.key(),
                    message.headers() or [],
                    message.timestamp()[1],
                )
            )
        return received
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(knode: KnodeCluster, codec: str) -> None:
    topic = f"cfk-{codec}"
    _create(knode, topic, 3)
    count = 10_000 if codec == "none" else 2_000
    sent = make_messages(count, codec)
    producer = Producer(
        {
            "bootstrap.servers": knode.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 5,
            "enable.idempotence": codec == "none",
        }
    )
    errors: list[KafkaError] = []
    for message in sent:
        producer.produce(
            topic,
            key=message.key,
            value=message.value,
            headers=list(message.headers),
            timestamp=message.timestamp_ms,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []

    received = _consume_all(knode, topic, 3, count)
    assert len(received) == count
    check_order_per_partition((p, o, v) for p, o, v, *_ in received)
    by_value = {m.value: m for m in sent}
    for _partition, _offset, value, key, headers, timestamp in received:
        original = by_value[value]
        assert key == original.key
        assert [(k, v) for k, v in headers] == list(original.headers)
        assert timestamp == original.timestamp_ms

    # exact watermarks: HW = last offset + 1 per partition
    consumer = Consumer({"bootstrap.servers": knode.bootstrap_servers, "group.id": "wm"})
    try:
        for partition in range(3):
            offsets = [o for p, o, *_ in received if p == partition]
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            assert (low, high) == (0, max(offsets) + 1 if offsets else 0)
    finally:
        consumer.close()


def test_offset_out_of_range_resets(knode: KnodeCluster) -> None:
    topic = "cfk-reset"
    _create(knode, topic, 1)
    producer = Producer({"bootstrap.servers": knode.bootstrap_servers})
    for i in range(10):
        producer.produce(topic, value=f"value-{i}-".encode())
    assert producer.flush(10) == 0
    for reset, first_value in (("earliest", b"value-0-"), ("latest", None)):
        consumer = Consumer(
            {
                "bootstrap.servers": knode.bootstrap_servers,
                "group.id": f"reset-{reset}",
                "auto.offset.reset": reset,
                "enable.partition.eof": True,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 1000)])  # beyond the end
            got = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        assert message.offset() == 10
                        break
                    raise AssertionError(message.error())
                got = message.value()
                break
            assert got == first_value
        finally:
            consumer.close()


def test_admin_create_describe_alter_delete(knode: KnodeCluster) -> None:
    admin = _admin(knode)
    name = "cfk-admin"
    # validate_only creates nothing
    admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)[name].result(10)
    assert name not in admin.list_topics(timeout=10).topics
    _create(knode, name, 2, **{"retention.ms": "3600000", "cleanup.policy": "delete"})
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 2

    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].value == "1048588"

    change = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete"

    admin.create_partitions([NewPartitions(name, 4)])[name].result(10)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 4

    broker = ConfigResource(ResourceType.BROKER, "1")
    broker_configs = admin.describe_configs([broker])[broker].result(10)
    assert broker_configs["num.partitions"].value == "1"

    admin.delete_topics([name], operation_timeout=10)[name].result(10)
    assert name not in admin.list_topics(timeout=10).topics

    bad = admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"]
    with pytest.raises(Exception) as caught:
        bad.result(10)
    assert caught.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # 17


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_acknowledged_data_and_topics(tmp_path: object, hard: bool) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    with KnodeCluster(base, node_count=1) as cluster:
        _create(cluster, "durable", 2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        acknowledged = []
        for i in range(3000):
            producer.produce(
                "durable",
                value=f"value-{i}-".encode(),
                partition=i % 2,
                on_delivery=lambda err, msg: acknowledged.append(msg.value()) if not err else None,
            )
        assert producer.flush(20) == 0
        assert len(acknowledged) == 3000
        cluster.restart(1, hard=hard)
        received = _consume_all(cluster, "durable", 2, 3000)
        assert sorted(v for _, _, v, *_ in received) == sorted(acknowledged)
        admin = _admin(cluster)
        assert len(admin.list_topics(timeout=10).topics["durable"].partitions) == 2


def test_create_with_explicit_assignments(knode: KnodeCluster) -> None:
    admin = _admin(knode)
    futures = admin.create_topics(
        [
            NewTopic(
                "cfk-assigned",
                num_partitions=3,  # confluent-kafka wants the count; it sends -1 on the wire
                replica_assignment=[[1], [1], [1]],
            ),
            NewTopic(
                "cfk-bad-assignment",
                num_partitions=1,
                replica_assignment=[[7]],
            ),
        ]
    )
    futures["cfk-assigned"].result(15)
    partitions = admin.list_topics(timeout=10).topics["cfk-assigned"].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(p.replicas == [1] for p in partitions.values())
    with pytest.raises(Exception) as caught:
        futures["cfk-bad-assignment"].result(15)
    assert caught.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
