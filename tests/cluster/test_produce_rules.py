"""Kafka's produce rules on a real knode (issue 12, item 3): a transactional batch without a
transaction, a client's control batch and a produce to `__consumer_offsets` are refused with
Kafka's codes, and a read_committed consumer keeps reading (a pinned last stable offset
would freeze it). Keyless records on a compacted topic fail with INVALID_RECORD and
record_errors naming them (KIP-467), as librdkafka reports them."""

from __future__ import annotations

import datetime
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.cluster.rawkafka import frame_request, read_frame
from tests.support.cluster import KnodeCluster
from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.records import NewRecord, build_batch
from trafka.net import codec

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

VERSION = 8  # record_errors (KIP-467), non-flexible


def _produce(
    cluster: KnodeCluster, topic: str, records: bytes, *, transactional_id: str | None = None
) -> object:
    request_class = codec.request_class(0, VERSION)
    assert request_class is not None
    module = __import__(request_class.__module__, fromlist=["_"])
    request = request_class(
        transactional_id=transactional_id,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(module.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )
    with socket.create_connection(("127.0.0.1", cluster.nodes[1].port), timeout=10) as sock:
        sock.sendall(frame_request(0, VERSION, 5, codec.encode_request(request)))
        frame = read_frame(sock)
    assert frame is not None
    return codec.decode_response(0, VERSION, frame, 4)


def _partition(response: object) -> object:
    return response.responses[0].partition_responses[0]  # type: ignore[attr-defined]


def test_hostile_batches_are_refused_and_read_committed_consumers_keep_reading(
    knode: KnodeCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": knode.bootstrap_servers})
    admin.create_topics([NewTopic("rules", 1, 1)])["rules"].result(15)
    transactional = build_batch(
        [NewRecord(b"t")],
        producer_id=4242,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        now_ms=1,
    )
    refused = _partition(_produce(knode, "rules", transactional, transactional_id="tx"))
    assert refused.error_code == ErrorCode.invalid_txn_state  # type: ignore[attr-defined]
    refused = _partition(_produce(knode, "rules", transactional))
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed  # type: ignore[attr-defined]
    marker = build_end_transaction_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, 0),
        producer_id=4242,
        producer_epoch=0,
        now_ms=1,
    )
    refused = _partition(_produce(knode, "rules", marker))
    assert refused.error_code == ErrorCode.invalid_record  # type: ignore[attr-defined]
    plain = build_batch([NewRecord(b"x", key=b"k")], now_ms=1)
    refused = _partition(_produce(knode, "__consumer_offsets", plain))
    assert refused.error_code == ErrorCode.invalid_topic_exception  # type: ignore[attr-defined]
    assert "Cannot append to internal topic" in str(refused.error_message)  # type: ignore[attr-defined]
    two = build_batch([NewRecord(b"a")], now_ms=1) + build_batch([NewRecord(b"b")], now_ms=1)
    refused = _partition(_produce(knode, "rules", two))
    assert refused.error_code == ErrorCode.invalid_record  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": knode.bootstrap_servers, "acks": "all"})
    for number in range(20):
        producer.produce("rules", str(number).encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": knode.bootstrap_servers,
            "group.id": "rules-rc",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("rules", 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())  # type: ignore[arg-type]
        assert values == [str(n).encode() for n in range(20)]
        low, high = consumer.get_watermark_offsets(TopicPartition("rules", 0), timeout=10)
        assert (low, high) == (0, 20)
    finally:
        consumer.close()


def test_keyless_records_on_a_compacted_topic_fail_one_by_one(knode: KnodeCluster) -> None:
    admin = AdminClient({"bootstrap.servers": knode.bootstrap_servers})
    admin.create_topics([NewTopic("keys", 1, 1, config={"cleanup.policy": "compact"})])[
        "keys"
    ].result(15)
    batch = build_batch(
        [NewRecord(b"a", key=b"k"), NewRecord(b"b"), NewRecord(b"c", key=b"k")], now_ms=1
    )
    refused = _partition(_produce(knode, "keys", batch))
    assert refused.error_code == ErrorCode.invalid_record  # type: ignore[attr-defined]
    assert [e.batch_index for e in refused.record_errors] == [1]  # type: ignore[attr-defined]

    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": knode.bootstrap_servers, "linger.ms": 0})
    producer.produce("keys", b"no key", partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert [f.code() for f in failures] == [KafkaError.INVALID_RECORD]
