"""Transactions end to end on one knode with confluent-kafka (librdkafka).

A transactional producer commits some transactions and aborts others; a read_committed
consumer sees exactly the committed records, a read_uncommitted one sees everything (the
aborted records too); the log holds COMMIT/ABORT control batches and a `.txnindex`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("knode-txn")
    settings = [
        "group.initial.rebalance.delay.ms=0",
        "transaction.state.log.num.partitions=4",
        "offsets.topic.num.partitions=4",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    ]
    with KnodeCluster(base, node_count=1, settings=settings) as cluster:
        yield cluster


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)


def producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **extra,
        }
    )


def consume_all(bootstrap: str, topic: str, isolation: str, expected_at_least: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    idle = 0
    try:
        while idle < 6 or len(values) < expected_at_least:
            message = consumer.poll(1.0)
            if message is None:
                idle += 1
                if idle > 40:
                    break
                continue
            if message.error():
                continue
            idle = 0
            values.append((message.value() or b"").decode())
    finally:
        consumer.close()
    return values


def test_commit_and_abort_visibility(node: KnodeCluster) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "txn-visibility")
    p = producer(bootstrap, "tx-visibility")
    p.init_transactions(30)
    expected_committed: list[str] = []
    aborted: list[str] = []
    for round_number in range(6):
        p.begin_transaction()
        values = [f"r{round_number}-{i}" for i in range(20)]
        for value in values:
            p.produce("txn-visibility", value.encode(), key=value.encode())
        if round_number % 2 == 0:
            p.commit_transaction(30)
            expected_committed += values
        else:
            p.flush(30)  # written to the log first: abort_transaction purges unsent messages
            p.abort_transaction(30)
            aborted += values
    p.flush(10)
    committed = consume_all(bootstrap, "txn-visibility", "read_committed", len(expected_committed))
    assert sorted(committed) == sorted(expected_committed)
    everything = consume_all(
        bootstrap, "txn-visibility", "read_uncommitted", len(expected_committed) + len(aborted)
    )
    assert sorted(everything) == sorted(expected_committed + aborted)


def test_second_instance_fences_the_first(node: KnodeCluster) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "txn-fence", 1)
    first = producer(bootstrap, "tx-fence")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("txn-fence", b"zombie")
    first.flush(10)
    second = producer(bootstrap, "tx-fence")
    second.init_transactions(30)  # aborts the first instance's open transaction
    second.begin_transaction()
    second.produce("txn-fence", b"winner")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(10)
    assert raised.value.args[0].fatal() or not raised.value.args[0].retriable()
    assert consume_all(bootstrap, "txn-fence", "read_committed", 1) == ["winner"]


def test_consume_transform_produce_with_send_offsets(node: KnodeCluster) -> None:
    """send_offsets_to_transaction: output and input offsets commit (or abort) together."""
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "ctp-in", 1)
    create_topic(bootstrap, "ctp-out", 1)
    source = Producer({"bootstrap.servers": bootstrap})
    for number in range(300):
        source.produce("ctp-in", str(number).encode())
    source.flush(30)
    group = "ctp-copier"

    def copier(abort_first: bool) -> int:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe(["ctp-in"])
        out = producer(bootstrap, "tx-copier")
        out.init_transactions(30)
        copied = 0
        idle = 0
        try:
            while idle < 5:
                messages = consumer.consume(100, 1.0)
                messages = [m for m in messages if not m.error()]
                if not messages:
                    idle += 1
                    continue
                idle = 0
                out.begin_transaction()
                for message in messages:
                    out.produce("ctp-out", message.value())
                out.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
                )
                if abort_first:
                    out.flush(30)
                    out.abort_transaction(30)
                    return len(messages)
                out.commit_transaction(30)
                copied += len(messages)
        finally:
            consumer.close()
        return copied

    aborted = copier(abort_first=True)
    assert aborted > 0
    assert copier(abort_first=False) == 300  # the aborted batch's offsets were not committed
    values = consume_all(bootstrap, "ctp-out", "read_committed", 300)
    assert sorted(values, key=int) == [str(n) for n in range(300)]
    everything = consume_all(bootstrap, "ctp-out", "read_uncommitted", 300 + aborted)
    assert len(everything) == 300 + aborted


def test_open_transaction_times_out_and_the_lso_moves_on(node: KnodeCluster) -> None:
    """A producer that vanishes mid-transaction: after transaction.timeout.ms the coordinator
    aborts it, so read_committed consumers get past it."""
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "txn-timeout", 1)
    hanging = producer(bootstrap, "tx-hanging", **{"transaction.timeout.ms": 2000})
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce("txn-timeout", b"never-committed")
    hanging.flush(10)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("txn-timeout", b"after")
    plain.flush(10)
    # Blocked by the open transaction at first, then visible once it is aborted (2 s timeout
    # + 0.5 s abort check interval; generous margins for a loaded machine).
    assert consume_all(bootstrap, "txn-timeout", "read_committed", 1) == ["after"]
    assert sorted(consume_all(bootstrap, "txn-timeout", "read_uncommitted", 2)) == [
        "after",
        "never-committed",
    ]
    with pytest.raises(KafkaException):
        hanging.commit_transaction(10)  # fenced by the coordinator's abort
