"""Kafka Streams with processing.guarantee=exactly_once_v2 on three nodes (RF=3,
min.insync.replicas=2) while a broker is SIGKILLed (EOS-01, issue 15).

`EosNumbers` (tests/java, built by `make java`) copies numbered records from `sn-in` to
`sn-out` through a repartition topic and counts them per bucket (number % 10) in a state
store whose every update goes to `sn-counts`. Every task commits its output, repartition
and changelog records and its consumer offsets in one transaction (Kafka's Java producer,
transaction version 1: KIP-447's TxnOffsetCommit with the group's generation). The leader of
an output partition is SIGKILLed while the application runs; afterwards a read_committed
consumer sees every number in `sn-out` exactly once and each bucket's last count is exactly
its size (at-least-once would count replayed records twice).
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.cluster.java_support import java_command, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOTAL = 10_000
BUCKETS = 10
APP, SOURCE, SINK, COUNTS = "sn", "sn-in", "sn-out", "sn-counts"
# Kafka's session and lag timeouts (not the EOS copier test's 2 s ones): with a JVM beside
# three nodes on two loaded cores, 2 s sessions expired by themselves and the cluster churned.
SETTINGS = [
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
    "auto.leader.rebalance.enable=false",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KnodeCluster]:
    java_command()  # fail at once when tests/java is not built
    with KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False) as cluster:
        start_slowly(cluster)
        yield cluster


class Reader:
    """A consumer of one topic from the start (assigned, no group), keeping every record."""

    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        self.records: list[tuple[bytes, bytes]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"sn-check-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        self.consumer.subscribe([topic])

    def poll(self) -> int:
        for message in self.consumer.consume(num_messages=1000, timeout=0.5):
            if message.error() is None:
                self.records.append((message.key() or b"", message.value() or b""))
        return len(self.records)

    def close(self) -> None:
        self.consumer.close()


def produce_numbers(bootstrap: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for number in range(first, first + count):
        producer.produce(SOURCE, str(number).encode(), key=str(number).encode())
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def fully_replicated(bootstrap: str) -> bool:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return all(
        p.leader >= 0 and len(p.isrs) == 3
        for topic in metadata.topics.values()
        for p in topic.partitions.values()
    )


def test_streams_exactly_once_v2_through_a_broker_sigkill(
    cluster: KnodeCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(name, 3, 3, config={"min.insync.replicas": "2"}) for name in (SOURCE, SINK, COUNTS)
    ]
    for future in admin.create_topics(topics).values():
        future.result(60)
    produce_numbers(bootstrap, 0, TOTAL // 2)
    stderr_path = tmp_path / "streams.stderr.log"
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        [
            *java_command(),
            "trafka.javatests.EosNumbers",
            bootstrap,
            APP,
            SOURCE,
            SINK,
            COUNTS,
            str(tmp_path / "state"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    stderr.close()
    events: list[dict[str, Any]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):
                events.append(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    output = Reader(bootstrap, SINK, "read_committed")
    try:
        wait_until(
            lambda: output.poll() >= TOTAL // 10,
            timeout_s=240,
            interval_s=0.1,
            what=f"the first numbers in {SINK} (events {events})",
        )
        # SIGKILL the leader of an output partition while transactions are under way
        leader = admin.list_topics(SINK, timeout=30).topics[SINK].partitions[0].leader
        cluster.kill(leader)
        cluster.start(leader, wait=False)
        cluster.wait_ready(leader, timeout_s=120)
        produce_numbers(bootstrap, TOTAL // 2, TOTAL // 2)
        wait_until(
            lambda: output.poll() >= TOTAL,
            timeout_s=300,
            interval_s=0.1,
            what=f"every number in {SINK} after node {leader} was killed (events {events})",
        )
        wait_until(
            lambda: fully_replicated(bootstrap), timeout_s=120, what="the cluster replicated"
        )
        # what arrives late would be a duplicate: read on a little
        for _ in range(6):
            output.poll()
        counts = Reader(bootstrap, COUNTS, "read_committed")
        latest: dict[str, int] = {}

        def settled() -> bool:
            counts.poll()
            latest.update(
                {k.decode(): int.from_bytes(v, "big", signed=True) for k, v in counts.records}
            )
            return latest == {str(b): TOTAL // BUCKETS for b in range(BUCKETS)}

        try:
            wait_until(settled, timeout_s=120, what=f"the bucket counts (last: {latest})")
        finally:
            counts.close()
    except AssertionError as error:
        error.add_note(cluster.describe_failure())
        error.add_note(
            "streams stderr:\n"
            + "\n".join(stderr_path.read_text(errors="replace").splitlines()[-40:])
        )
        raise
    finally:
        output.close()
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
    numbers = Counter(int(value) for _, value in output.records)
    duplicates = [n for n, c in numbers.items() if c > 1]
    assert not duplicates, f"{len(duplicates)} numbers twice, e.g. {duplicates[:10]}"
    assert set(numbers) == set(range(TOTAL))
    assert not [e for e in events if "error" in e], events
