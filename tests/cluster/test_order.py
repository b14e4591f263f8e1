"""Order within a partition under pipelining (MSG-05), against a real knode.

A connection's requests take effect in the order they arrived, whatever their partition
count: a later pipelined Produce can no longer append to a partition before an earlier one
(before the fix, a multi-partition Produce appended in nursery children one scheduling batch
later, and trio's randomised batch order let a later request overtake it).
"""

from __future__ import annotations

import datetime
import itertools
import socket
import struct
import time
import warnings

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from tests.cluster.rawkafka import read_frame
from tests.net.wire import request_frame
from tests.support.cluster import KnodeCluster
from trafka.log.records import NewRecord, build_batch

with warnings.catch_warnings():  # kafka-python 3.0.12 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def _create_topic(cluster: KnodeCluster, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        ready = described.error is None and len(described.partitions) == partitions
        if ready and all(p.leader >= 0 for p in described.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} never became ready")


def _read_sequences(
    cluster: KnodeCluster, topic: str, partitions: int, expected: int
) -> dict[int, list[int]]:
    """Every value of every partition, decoded as the producer's sequence number."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"order-check-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        by_partition: dict[int, list[int]] = {p: [] for p in range(partitions)}
        count = 0
        deadline = time.monotonic() + 180
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                assert message.error() is None, message.error()
                by_partition[message.partition()].append(int(message.value()))
                count += 1
        assert count == expected, f"read {count} of {expected} messages"
        return by_partition
    finally:
        consumer.close()


def _inversions(by_partition: dict[int, list[int]]) -> int:
    return sum(
        1
        for values in by_partition.values()
        for earlier, later in itertools.pairwise(values)
        if later <= earlier
    )


def _produce_request(topic: str, partitions: list[int], sequence: int) -> ProduceRequest:
    """One Produce with a one-record batch carrying `sequence` for each of `partitions`."""
    data = tuple(
        PartitionProduceData(
            index=i32(partition),
            records=Records(build_batch([NewRecord(value=str(sequence).encode())])),
        )
        for partition in partitions
    )
    return ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=data),),
    )


def test_pipelined_multi_partition_produce_keeps_partition_order(knode: KnodeCluster) -> None:
    # Multi-partition requests interleaved with single-partition ones: the single append of
    # a later request used to run in the same scheduling batch as the per-partition
    # children of the earlier one, in random order.
    topic, partitions, requests = "order-raw", 4, 2_000
    _create_topic(knode, topic, partitions)
    plan = [
        list(range(partitions)) if sequence % 2 == 0 else [sequence // 2 % partitions]
        for sequence in range(requests)
    ]
    frames = b"".join(
        request_frame(_produce_request(topic, targets, sequence), sequence)
        for sequence, targets in enumerate(plan)
    )
    host, port = knode.address(1).rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(frames)  # every request pipelined on one connection
        for sequence in range(requests):
            frame = read_frame(sock, timeout_s=30)
            assert frame is not None
            assert struct.unpack_from(">i", frame)[0] == sequence
    by_partition = _read_sequences(knode, topic, partitions, sum(map(len, plan)))
    assert _inversions(by_partition) == 0
    for partition, values in by_partition.items():
        assert values == [seq for seq, targets in enumerate(plan) if partition in targets]


def test_kafka_python_pipelined_rounds_arrive_in_order(knode: KnodeCluster) -> None:
    # The report that found the bug: non-idempotent kafka-python, five requests in flight,
    # small batches, many partitions; every round sends one numbered message per partition.
    topic, partitions, rounds = "order-kp", 24, 42_000  # 1,008,000 messages
    _create_topic(knode, topic, partitions)
    producer = KafkaProducer(
        bootstrap_servers=knode.bootstrap_servers,
        enable_idempotence=False,
        acks=1,
        max_in_flight_requests_per_connection=5,
        linger_ms=1,
        batch_size=2048,
        retries=0,
    )
    failures: list[Exception] = []
    try:
        for number in range(rounds):
            value = str(number).encode()
            for partition in range(partitions):
                producer.send(topic, value=value, partition=partition).add_errback(failures.append)
        producer.flush(timeout=300)
    finally:
        producer.close(timeout=30)
    assert failures == []
    by_partition = _read_sequences(knode, topic, partitions, partitions * rounds)
    assert _inversions(by_partition) == 0
    assert all(values == list(range(rounds)) for values in by_partition.values())
