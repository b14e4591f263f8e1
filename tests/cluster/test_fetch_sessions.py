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
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until

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


def test_thousand_partition_consumer_uses_incremental_sessions(tmp_path: Path) -> None:
    metrics_port = free_port()
    partitions, messages = 1000, 2000
    with KnodeCluster(
        tmp_path,
        node_count=1,
        settings=[f"metrics.listener=http://127.0.0.1:{metrics_port}"],
    ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"sessions-{uuid.uuid4().hex[:6]}"
        _create(bootstrap, topic, partitions, 1)
        _produce(bootstrap, topic, messages, partitions)
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
            settled = time.monotonic() + 1.5  # the fetch after the last records moves them all
            while time.monotonic() < settled:
                assert poll() == 0
            before = _scrape(metrics_port)
            polled_until = time.monotonic() + 4.0
            while time.monotonic() < polled_until:  # caught up: steady state
                assert poll() == 0
            after = _scrape(metrics_port)
        finally:
            consumer.close()
        requests = _delta(after, before, "trafka_fetch_requests", "consumer", "incremental")
        named = _delta(after, before, "trafka_fetch_request_partitions", "consumer", "incremental")
        answered = _delta(
            after, before, "trafka_fetch_response_partitions", "consumer", "incremental"
        )
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


def test_followers_use_incremental_sessions(tmp_path: Path) -> None:
    ports = {node: free_port() for node in (1, 2, 3)}
    partitions, messages = 30, 3000
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
