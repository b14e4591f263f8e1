"""aiokafka (never flexible versions) against one real knode."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.cluster.messages import check_order_per_partition, make_messages
from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


async def _produce_and_consume(bootstrap: str, topic: str, codec: str | None, count: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    sent = make_messages(count, codec or "none")
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, enable_idempotence=True
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                timestamp_ms=m.timestamp_ms,
            )
            for m in sent
        ]
        await producer.flush()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning()
        received = []
        async with asyncio.timeout(60):
            while len(received) < count:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    received.extend(records)
        end_offsets = await consumer.end_offsets(partitions)
        for tp in partitions:
            assert await consumer.position(tp) == end_offsets[tp]
            last = max(r.offset for r in received if r.partition == tp.partition)
            assert end_offsets[tp] == last + 1
    finally:
        await consumer.stop()
    assert len(received) == count
    check_order_per_partition((r.partition, r.offset, r.value) for r in received)
    by_value = {m.value: m for m in sent}
    for record in received:
        original = by_value[record.value]
        assert record.key == original.key
        assert list(record.headers) == list(original.headers)
        assert record.timestamp == original.timestamp_ms


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume(knode: KnodeCluster, codec: str | None) -> None:
    count = 10_000 if codec is None else 2_000
    asyncio.run(
        _produce_and_consume(knode.bootstrap_servers, f"aio-{codec or 'none'}", codec, count)
    )


async def _admin(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("aio-admin", 1, 1)], validate_only=True)
        assert "aio-admin" not in await admin.list_topics()
        await admin.create_topics(
            [NewTopic("aio-admin", 1, 1, topic_configs={"cleanup.policy": "compact"})]
        )
        described = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "aio-admin")]
        )
        assert "compact" in repr(described)
        await admin.create_partitions({"aio-admin": NewPartitions(2)})
        await admin.delete_topics(["aio-admin"])
        assert "aio-admin" not in await admin.list_topics()
    finally:
        await admin.close()


def test_admin_api(knode: KnodeCluster) -> None:
    asyncio.run(_admin(knode.bootstrap_servers))


async def _reset(bootstrap: str) -> tuple[int, int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait("aio-reset", f"value-{i}-".encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        partition = TopicPartition("aio-reset", 0)
        consumer.assign([partition])
        consumer.seek(partition, 1000)  # beyond the end: OFFSET_OUT_OF_RANGE, then reset
        async with asyncio.timeout(20):
            while True:
                batches = await consumer.getmany(timeout_ms=300)
                records = [r for rs in batches.values() for r in rs]
                if records:
                    return records[0].offset, len(records)
    finally:
        await consumer.stop()


def test_offset_out_of_range_resets_to_earliest(knode: KnodeCluster) -> None:
    first_offset, _count = asyncio.run(_reset(knode.bootstrap_servers))
    assert first_offset == 0
