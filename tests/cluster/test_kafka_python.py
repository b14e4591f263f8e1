"""kafka-python 3 (idempotent producer by default) against one real knode."""

from __future__ import annotations

import time
import warnings

import pytest

with warnings.catch_warnings():  # kafka-python 3.0.12 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )
    from kafka.errors import InvalidTopicError

from tests.cluster.messages import check_order_per_partition, make_messages
from tests.support.cluster import KnodeCluster

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def _consume(cluster: KnodeCluster, topic: str, partitions: int, expected: int) -> list:  # type: ignore[type-arg]
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        received = []
        deadline = time.monotonic() + 60
        while len(received) < expected and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                received.extend(records)
        # EOF at the high watermark: nothing more arrives, positions equal end offsets
        assert consumer.poll(300) == {}
        end_offsets = consumer.end_offsets(assigned)
        for tp in assigned:
            assert consumer.position(tp) == end_offsets[tp]
        return received
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_produce_and_consume(knode: KnodeCluster, codec: str | None) -> None:
    topic = f"kp-{codec or 'none'}"
    admin = KafkaAdminClient(bootstrap_servers=knode.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    count = 10_000 if codec is None else 2_000
    sent = make_messages(count, codec or "none")
    producer = KafkaProducer(
        bootstrap_servers=knode.bootstrap_servers, compression_type=codec, linger_ms=5
    )
    try:
        futures = [
            producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                timestamp_ms=m.timestamp_ms,
            )
            for m in sent
        ]
        producer.flush(30)
        metadata = [f.get(timeout=30) for f in futures]
    finally:
        producer.close()
    assert all(m.offset >= 0 for m in metadata)
    received = _consume(knode, topic, 2, count)
    assert len(received) == count
    check_order_per_partition((r.partition, r.offset, r.value) for r in received)
    by_value = {m.value: m for m in sent}
    for record in received:
        original = by_value[record.value]
        assert record.key == original.key
        assert list(record.headers) == list(original.headers)
        assert record.timestamp == original.timestamp_ms


def test_admin_api(knode: KnodeCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=knode.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("kp-admin", 1, 1)], validate_only=True)
        assert "kp-admin" not in admin.list_topics()
        admin.create_topics(
            [NewTopic("kp-admin", 1, 1, topic_configs={"retention.bytes": "1000000"})]
        )
        assert "kp-admin" in admin.list_topics()
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        text = repr(described)
        assert "retention.bytes" in text and "1000000" in text
        admin.create_partitions({"kp-admin": NewPartitions(3)})
        topics = admin.describe_topics(["kp-admin"])
        assert len(topics[0]["partitions"]) == 3
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("..", 1, 1)])
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


@pytest.mark.parametrize(("reset", "expected_first"), [("earliest", 0), ("latest", None)])
def test_offset_out_of_range_resets(
    knode: KnodeCluster, reset: str, expected_first: int | None
) -> None:
    topic = f"kp-reset-{reset}"
    producer = KafkaProducer(bootstrap_servers=knode.bootstrap_servers)
    try:
        for i in range(5):
            producer.send(topic, value=f"value-{i}-".encode(), partition=0).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=knode.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        fetch_max_wait_ms=100,
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 1000)  # beyond the end: OFFSET_OUT_OF_RANGE, then reset
        records = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not records:
            for batch in consumer.poll(300).values():
                records.extend(batch)
            if expected_first is None and consumer.position(partition) == 5:
                break
        if expected_first is None:
            assert records == []
            assert consumer.position(partition) == 5
        else:
            assert records and records[0].offset == expected_first
    finally:
        consumer.close()


def test_cluster_log_dirs_and_delete_records(knode: KnodeCluster) -> None:
    producer = KafkaProducer(bootstrap_servers=knode.bootstrap_servers)
    try:
        for i in range(10):
            producer.send("kp-records", value=f"value-{i}-".encode(), partition=0).get(timeout=30)
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=knode.bootstrap_servers)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1
        assert len(cluster["brokers"]) == 1, cluster
        assert cluster["cluster_id"]

        log_dirs = repr(admin.describe_log_dirs())
        assert "kp-records" in log_dirs

        partition = TopicPartition("kp-records", 0)
        result = admin.delete_records({partition: 4})
        assert "4" in repr(result)
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=knode.bootstrap_servers)
    try:
        assert consumer.beginning_offsets([partition])[partition] == 4
        assert consumer.end_offsets([partition])[partition] == 10
    finally:
        consumer.close()
