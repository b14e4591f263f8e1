"""Produce error paths over the wire: each partition gets Kafka's error code."""

from __future__ import annotations

import datetime
import socket

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.cluster.rawkafka import frame_request, read_frame
from tests.support.cluster import KnodeCluster
from trafka.log.records import NewRecord, build_batch
from trafka.net import codec

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

VERSION = 7  # non-flexible, as aiokafka and kafkajs send it


def _produce(cluster: KnodeCluster, acks: int, partitions: list[tuple[str, int, bytes]]) -> object:
    request_class = codec.request_class(0, VERSION)
    assert request_class is not None
    module = __import__(request_class.__module__, fromlist=["_"])
    by_topic: dict[str, list[object]] = {}
    for topic, partition, records in partitions:
        by_topic.setdefault(topic, []).append(
            module.PartitionProduceData(index=partition, records=records)
        )
    request = request_class(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(
            module.TopicProduceData(name=name, partition_data=tuple(data))
            for name, data in by_topic.items()
        ),
    )
    with socket.create_connection(("127.0.0.1", cluster.nodes[1].port), timeout=10) as sock:
        sock.sendall(frame_request(0, VERSION, 11, codec.encode_request(request)))
        if acks == 0:
            # no response: the next request on the connection is answered first
            sock.sendall(frame_request(18, 0, 12, b""))
            frame = read_frame(sock)
            assert frame is not None and frame[:4] == (12).to_bytes(4, "big")
            return None
        frame = read_frame(sock)
    assert frame is not None
    return codec.decode_response(0, VERSION, frame, 4)


def _codes(response: object) -> dict[tuple[str, int], int]:
    return {
        (str(topic.name), int(p.index)): int(p.error_code)
        for topic in response.responses  # type: ignore[attr-defined]
        for p in topic.partition_responses
    }


def test_produce_errors_per_partition(knode: KnodeCluster) -> None:
    admin = AdminClient({"bootstrap.servers": knode.bootstrap_servers})
    admin.create_topics([NewTopic("pe", 2, 1, config={"max.message.bytes": "2000"})])["pe"].result(
        15
    )
    good = build_batch([NewRecord(b"value", key=b"k")], now_ms=1)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # breaks the CRC-32C
    large = build_batch([NewRecord(b"x" * 5000)], now_ms=1)

    response = _produce(
        knode,
        1,
        [
            ("pe", 0, good),
            ("pe", 1, bytes(corrupt)),
            ("pe", 5, good),
            ("no-such-topic-here", 0, good),
        ],
    )
    codes = _codes(response)
    assert codes[("pe", 0)] == ErrorCode.none
    assert codes[("pe", 1)] == ErrorCode.corrupt_message
    assert codes[("pe", 5)] == ErrorCode.unknown_topic_or_partition
    assert codes[("no-such-topic-here", 0)] == ErrorCode.unknown_topic_or_partition

    assert _codes(_produce(knode, 1, [("pe", 0, large)]))[("pe", 0)] == ErrorCode.message_too_large
    assert (
        _codes(_produce(knode, 5, [("pe", 0, good)]))[("pe", 0)] == ErrorCode.invalid_required_acks
    )
    assert _produce(knode, 0, [("pe", 0, good)]) is None
    second = _codes(_produce(knode, -1, [("pe", 0, good)]))
    assert second[("pe", 0)] == ErrorCode.none
