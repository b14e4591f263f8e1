"""Incremental fetch sessions (KIP-227) seen from real processes: a consumer of 1,000
partitions and the followers of a 3-node cluster name far fewer partitions per steady-state
Fetch than they follow; the broker counts them (`trafka_fetch_request_partitions`, metrics
endpoint). kafka-python is the consumer: librdkafka (confluent-kafka) never opens a session
(it sends session 0, epoch -1 on every Fetch), which the first test shows too."""

from __future__ import annotations

import time
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.fetch.v13 import request as fetch13
from kio.schema.metadata.v11 import request as metadata11
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.java_support import run_tool_process
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from trafka.net.client import KafkaConnection

with warnings.catch_warnings():  # kafka-python 3.0.12 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

Counts = dict[tuple[str, str, str], float]


def _scrape(port: int) -> Counts:
    """(family, fetcher, kind) -> value of the trafka_fetch_* counters."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    counts: Counts = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("trafka_fetch_"):
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = sample.labels
                    counts[(family.name, labels["fetcher"], labels["kind"])] = sample.value
    return counts


def _delta(after: Counts, before: Counts, family: str, fetcher: str, kind: str) -> float:
    key = (family, fetcher, kind)
    return after.get(key, 0.0) - before.get(key, 0.0)


def _create(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
            timeout_ms=60_000,
        )
    finally:
        admin.close()


def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for n in range(count):
        producer.produce(topic, value=f"m{n}".encode(), partition=n % partitions)
    assert producer.flush(60) == 0


def _drain(poll: Callable[[], int], expected: int, timeout_s: float = 90.0) -> None:
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < expected:
        assert time.monotonic() < deadline, f"consumed {got} of {expected}"
        got += poll()
    assert got == expected


@dataclass
class Node:
    cluster: KnodeCluster
    metrics_port: int


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    metrics_port = free_port()
    with KnodeCluster(
        tmp_path_factory.mktemp("sessions"),
        node_count=1,
        settings=[f"metrics.listener=http://127.0.0.1:{metrics_port}"],
    ) as cluster:
        yield Node(cluster, metrics_port)


def test_thousand_partition_consumer_uses_incremental_sessions(node: Node) -> None:
    metrics_port = node.metrics_port
    partitions, messages = 1000, 400
    bootstrap = node.cluster.bootstrap_servers
    topic = f"sessions-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, partitions, 1)
    _produce(bootstrap, topic, messages, 100)  # data in 100 of the 1,000 partitions
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        max_poll_records=5000,
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()

        def poll() -> int:
            return sum(len(r) for r in consumer.poll(timeout_ms=500).values())

        _drain(poll, messages)
        settled = time.monotonic() + 1.0  # the fetch after the last records moves them all
        while time.monotonic() < settled:
            assert poll() == 0
        before = _scrape(metrics_port)
        polled_until = time.monotonic() + 2.5
        while time.monotonic() < polled_until:  # caught up: steady state
            assert poll() == 0
        after = _scrape(metrics_port)
    finally:
        consumer.close()
    requests = _delta(after, before, "trafka_fetch_requests", "consumer", "incremental")
    named = _delta(after, before, "trafka_fetch_request_partitions", "consumer", "incremental")
    answered = _delta(after, before, "trafka_fetch_response_partitions", "consumer", "incremental")
    assert requests >= 3, (before, after)
    # nothing changes: each request names (almost) none of the 1,000 partitions
    assert named / requests < 10, (named, requests)
    assert answered / requests < 10, (answered, requests)
    assert _delta(after, before, "trafka_fetch_requests", "consumer", "full") <= 1
    # librdkafka asks for no session: its fetches are sessionless and still complete
    before = _scrape(metrics_port)
    rdkafka = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        rdkafka.assign(
            [ConfluentTopicPartition(topic, p, 0) for p in range(partitions)]  # offset 0
        )

        def poll_rdkafka() -> int:
            return sum(1 for m in rdkafka.consume(1000, timeout=0.5) if m.error() is None)

        _drain(poll_rdkafka, messages)
    finally:
        rdkafka.close()
    after = _scrape(metrics_port)
    assert _delta(after, before, "trafka_fetch_requests", "consumer", "sessionless") >= 1
    assert _delta(after, before, "trafka_fetch_requests", "consumer", "incremental") == 0
    # Kafka 4.4's Java consumer (no group: one partition, assigned): Fetch v13 (topic ids)
    # in an incremental session
    before = _scrape(metrics_port)
    java = run_tool_process(
        "kafka-console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        str(messages // 100 + 1),  # never reached: reads all, then idles until the timeout
        "--timeout-ms",
        "4000",
        timeout_s=180,
    )
    assert len(java.lines) == messages // 100, java.err[-3000:]
    after = _scrape(metrics_port)
    java_requests = _delta(after, before, "trafka_fetch_requests", "consumer", "incremental")
    java_named = _delta(after, before, "trafka_fetch_request_partitions", "consumer", "incremental")
    assert java_requests >= 3, (before, after)
    assert java_named / java_requests < 1, (java_named, java_requests)
    assert _delta(after, before, "trafka_fetch_requests", "consumer", "error") == 0


def test_followers_use_incremental_sessions(tmp_path: Path) -> None:
    ports = {node: free_port() for node in (1, 2, 3)}
    partitions, messages = 30, 600
    with KnodeCluster(
        tmp_path,
        node_count=3,
        settings=["num.replica.fetchers=2", "replica.fetch.wait.max.ms=200"],
        node_settings={n: [f"metrics.listener=http://127.0.0.1:{p}"] for n, p in ports.items()},
    ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"replicated-{uuid.uuid4().hex[:6]}"
        _create(bootstrap, topic, partitions, 3)
        _produce(bootstrap, topic, messages, partitions)  # acks=all: every ISR member has it
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        try:
            consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
            consumer.seek_to_beginning()

            def poll() -> int:
                return sum(len(r) for r in consumer.poll(timeout_ms=500).values())

            _drain(poll, messages)
        finally:
            consumer.close()

        def follower_requests(counts: list[Counts]) -> float:
            return sum(
                c.get(("trafka_fetch_requests", "follower", "incremental"), 0.0) for c in counts
            )

        start = [_scrape(p) for p in ports.values()]
        # idle: the followers keep long-polling in their sessions
        wait_until(
            lambda: (
                follower_requests([_scrape(p) for p in ports.values()])
                >= follower_requests(start) + 20
            ),
            timeout_s=60,
            what="follower fetches in sessions",
        )
        end = [_scrape(p) for p in ports.values()]
        requests = sum(
            _delta(e, s, "trafka_fetch_requests", "follower", "incremental")
            for s, e in zip(start, end, strict=True)
        )
        named = sum(
            _delta(e, s, "trafka_fetch_request_partitions", "follower", "incremental")
            for s, e in zip(start, end, strict=True)
        )
        # every follower follows 10-20 partitions of each leader; idle requests name none
        assert requests >= 20
        assert named / requests < 1.0, (named, requests)


async def test_sessions_on_the_wire_with_topic_ids(node: Node) -> None:
    """Fetch v13 (topic ids) and v12 by hand: a session, incremental answers naming only the
    changed partition, forgotten partitions, and each session error."""
    bootstrap = node.cluster.bootstrap_servers
    topic = f"wire-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 3, 1)
    _produce(bootstrap, topic, 6, 3)
    host, port = bootstrap.rsplit(":", 1)
    connection = await KafkaConnection.connect(host, int(port), request_timeout_s=20)
    try:
        answer: Any = await connection.request(
            metadata11.MetadataRequest(
                topics=(metadata11.MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        topic_id = answer.topics[0].topic_id
        assert topic_id is not None and topic_id.int != 0

        async def fetch(
            session_id: int,
            epoch: int,
            offsets: dict[int, int],
            forgotten: tuple[int, ...] = (),
            wanted_id: uuid.UUID = topic_id,
        ) -> Any:
            return await connection.request(
                fetch13.FetchRequest(
                    max_wait=timedelta(milliseconds=50),  # type: ignore[arg-type]
                    min_bytes=i32(1),
                    session_id=i32(session_id),
                    session_epoch=i32(epoch),
                    topics=(
                        (
                            fetch13.FetchTopic(
                                topic_id=wanted_id,
                                partitions=tuple(
                                    fetch13.FetchPartition(
                                        partition=i32(p),
                                        fetch_offset=i64(o),
                                        partition_max_bytes=i32(1 << 20),
                                    )
                                    for p, o in offsets.items()
                                ),
                            ),
                        )
                        if offsets
                        else ()
                    ),
                    forgotten_topics_data=(
                        (
                            fetch13.ForgottenTopic(
                                topic_id=topic_id, partitions=tuple(i32(p) for p in forgotten)
                            ),
                        )
                        if forgotten
                        else ()
                    ),
                )
            )

        def named(response: Any) -> dict[int, Any]:
            return {p.partition_index: p for t in response.responses for p in t.partitions}

        full = await fetch(0, 0, {0: 0, 1: 0, 2: 0})
        session_id = int(full.session_id)
        assert full.error_code == 0 and session_id > 0
        assert [t.topic_id for t in full.responses] == [topic_id]
        assert sorted(named(full)) == [0, 1, 2]
        assert all(p.high_watermark == 2 and p.records for p in named(full).values())
        # the consumer moved past the records it got: nothing new, nothing answered
        quiet = await fetch(session_id, 1, {0: 2, 1: 2, 2: 2})
        assert quiet.error_code == 0 and quiet.session_id == session_id
        assert named(quiet) == {}
        # partition 0 moves on: only it is named (new records, new high watermark)
        _produce(bootstrap, topic, 1, 1)  # one more message, to partition 0
        moved = await fetch(session_id, 2, {})  # the session remembers the offsets
        assert named(moved).keys() == {0}
        assert named(moved)[0].high_watermark == 3 and named(moved)[0].records
        # forget partitions 1 and 2: a new message in partition 1 is no longer answered
        forgot = await fetch(session_id, 3, {0: 3}, forgotten=(1, 2))
        assert named(forgot) == {}
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, value=b"late", partition=1)
        assert producer.flush(30) == 0
        assert named(await fetch(session_id, 4, {})) == {}
        # session errors: top-level, no partitions
        wrong_epoch = await fetch(session_id, 9, {})
        assert wrong_epoch.error_code == ErrorCode.invalid_fetch_session_epoch
        assert wrong_epoch.responses == ()
        unknown = await fetch(session_id + 1, 1, {})
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
        by_name: Any = await connection.request(
            fetch12.FetchRequest(
                max_wait=timedelta(milliseconds=50),  # type: ignore[arg-type]
                min_bytes=i32(1),
                session_id=i32(session_id),
                session_epoch=i32(5),
                topics=(),
                forgotten_topics_data=(),
            )
        )
        assert by_name.error_code == ErrorCode.fetch_session_topic_id_error
        assert named(await fetch(session_id, 5, {})) == {}  # the session survived the errors
        # a topic id the node does not know
        stranger = uuid.uuid4()
        unknown_id = await fetch(0, -1, {0: 0}, wanted_id=stranger)
        assert unknown_id.session_id == 0
        assert [t.topic_id for t in unknown_id.responses] == [stranger]
        assert named(unknown_id)[0].error_code == ErrorCode.unknown_topic_id
    finally:
        await connection.close()
