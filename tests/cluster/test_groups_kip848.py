"""KIP-848 consumer groups with real clients on a 3-node cluster (issue 18, item 1).

One cluster for the module (the SIGKILL test runs last). confluent-kafka consumers with
`group.protocol=consumer` (librdkafka's KIP-848 consumer, GA since 2.10) run in threads;
every rebalance callback is recorded against one shared ownership table, so "a partition
owned by two members at once" is checked in real time from the clients' side: librdkafka
calls on_revoke before it acknowledges a revocation, and the coordinator hands a partition
to its next owner only after that acknowledgement.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from tests.cluster.java_support import run_program
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.replication.factor=3",
    "offsets.topic.num.partitions=6",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
    "replica.lag.time.max.ms=3000",
    "broker.session.timeout.ms=6000",
]
PARTITIONS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("kip848")
    with KnodeCluster(base / "nodes", node_count=3, settings=SETTINGS) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            timeout_s=60,
            what="3 registered brokers",
        )
        admin.create_topics([NewTopic("k", PARTITIONS, 3)])["k"].result(60)
        yield c


class Ownership:
    """Which member holds which partition, from the rebalance callbacks; overlaps recorded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.overlaps: list[str] = []

    def assign(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for partition in partitions:
                holder = self.owner.get(partition)
                if holder is not None and holder != member:
                    self.overlaps.append(f"{partition}: {holder} and {member}")
                self.owner[partition] = member

    def release(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for partition in partitions:
                if self.owner.get(partition) == member:
                    del self.owner[partition]


class Kip848Consumer:
    """A KIP-848 consumer polling in its own thread; keeps its assignment history."""

    def __init__(
        self, bootstrap: str, group: str, name: str, ownership: Ownership, topic: str = "k"
    ) -> None:
        self.name = name
        self.ownership = ownership
        self.assigned: set[int] = set()
        self.history: list[frozenset[int]] = []
        self.values: list[bytes] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
            }
        )
        self._consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        self.ownership.assign(self.name, numbers)
        with self._lock:
            self.assigned |= set(numbers)
            self.history.append(frozenset(self.assigned))

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        with self._lock:
            self.assigned -= set(numbers)
            self.history.append(frozenset(self.assigned))
        self.ownership.release(self.name, numbers)

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.errors.append(f"lost {[tp.partition for tp in partitions]}")
        self._on_revoke(consumer, partitions)

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                continue
            value = message.value()
            if value is not None:
                with self._lock:
                    self.values.append(value)

    def snapshot(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self.assigned)

    def history_since(self, index: int) -> list[frozenset[int]]:
        with self._lock:
            return list(self.history[index:])

    def history_length(self) -> int:
        with self._lock:
            return len(self.history)

    def consumed(self) -> set[bytes]:
        with self._lock:
            return set(self.values)

    def close(self) -> None:
        """Stop polling and leave the group (ConsumerGroupHeartbeat with epoch -1)."""
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def _balanced(consumers: list[Kip848Consumer]) -> bool:
    owned = [c.snapshot() for c in consumers]
    everything = frozenset().union(*owned)
    sizes = sorted(len(o) for o in owned)
    return len(everything) == PARTITIONS and sum(sizes) == PARTITIONS and sizes[-1] - sizes[0] <= 1


def _produce(bootstrap: str, topic: str, values: range, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, str(value).encode(), partition=value % partitions)
    assert producer.flush(120) == 0


@pytest.fixture(scope="module")
def group(cluster: KnodeCluster) -> Iterator[tuple[Ownership, list[Kip848Consumer]]]:
    ownership = Ownership()
    consumers: list[Kip848Consumer] = []
    yield ownership, consumers
    for consumer in consumers:
        consumer.close()


def test_ten_members_join_and_a_leave_or_join_moves_only_its_partitions(
    cluster: KnodeCluster, group: tuple[Ownership, list[Kip848Consumer]]
) -> None:
    bootstrap = cluster.bootstrap_servers
    ownership, consumers = group
    started = time.monotonic()
    for index in range(10):
        consumers.append(Kip848Consumer(bootstrap, "g848", f"m{index}", ownership))
    wait_until(lambda: _balanced(consumers), timeout_s=90, what="10 members with 2 partitions each")
    joined_s = time.monotonic() - started
    assert all(len(c.snapshot()) == 2 for c in consumers), joined_s
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups(["g848"])["g848"].result(30)
    assert len(description.members) == 10

    # a member leaves: only its partitions move, nobody else loses one
    before = {c.name: c.snapshot() for c in consumers}
    marks = {c.name: c.history_length() for c in consumers}
    leaver = consumers.pop(4)
    leaver.close()
    wait_until(lambda: _balanced(consumers), timeout_s=60, what="9 members covering 20")
    for consumer in consumers:
        for owned in consumer.history_since(marks[consumer.name]):
            assert before[consumer.name] <= owned, (consumer.name, before, owned)
    moved = sum(len(c.snapshot() - before[c.name]) for c in consumers)
    assert moved == len(before[leaver.name])

    # a member joins: the others give up only what it needs and never take it back
    before = {c.name: c.snapshot() for c in consumers}
    marks = {c.name: c.history_length() for c in consumers}
    newcomer = Kip848Consumer(bootstrap, "g848", "m-new", ownership)
    consumers.append(newcomer)
    wait_until(lambda: _balanced(consumers), timeout_s=60, what="10 members again")
    for consumer in consumers[:-1]:
        final = consumer.snapshot()
        assert final <= before[consumer.name]
        for owned in consumer.history_since(marks[consumer.name]):
            assert final <= owned <= before[consumer.name], (consumer.name, owned)
    assert len(newcomer.snapshot()) == 2
    assert ownership.overlaps == []
    assert all(not c.errors for c in consumers), [c.errors for c in consumers]


def test_offsets_committed_under_kip848_are_read_by_a_classic_consumer(
    cluster: KnodeCluster,
) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("handover", 3, 3)])["handover"].result(60)
    _produce(bootstrap, "handover", range(30), 3)
    new_style = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-handover",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    new_style.subscribe(["handover"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 30 and time.monotonic() < deadline:
        message = new_style.poll(0.2)
        if message is not None and not message.error():
            seen.add(message.value() or b"")
    assert len(seen) == 30
    new_style.commit(asynchronous=False)
    committed = new_style.committed([TopicPartition("handover", p) for p in range(3)], 30)
    assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    new_style.close()

    _produce(bootstrap, "handover", range(30, 45), 3)
    classic = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-handover",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    try:
        classic.subscribe(["handover"])
        after: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(after) < 15 and time.monotonic() < deadline:
            try:
                message = classic.poll(0.2)
            except KafkaException:
                continue
            if message is not None and not message.error():
                after.add(message.value() or b"")
        # the classic member starts from the offsets committed under KIP-848
        assert after == {str(v).encode() for v in range(30, 45)}
    finally:
        classic.close()


def test_regex_subscription_admin_types_and_ktool(cluster: KnodeCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic("rx-a", 2, 3), NewTopic("rx-b", 2, 3), NewTopic("unrelated", 1, 3)]
    ).values():
        future.result(60)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-regex",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["^rx-.*"])  # sent as subscribed_topic_regex (server-side regex)

        def assigned() -> set[tuple[str, int]]:
            consumer.poll(0.1)
            return {(tp.topic, tp.partition) for tp in consumer.assignment()}

        wait_until(
            lambda: assigned() == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1)},
            timeout_s=60,
            what="the regex's four partitions",
        )
        # a topic created later that matches moves the group epoch and is assigned
        admin.create_topics([NewTopic("rx-c", 1, 3)])["rx-c"].result(60)
        wait_until(lambda: ("rx-c", 0) in assigned(), timeout_s=60, what="rx-c assigned")

        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert "g-regex" in {g.group_id for g in listed.valid}
        assert all(g.type == ConsumerGroupType.CONSUMER for g in listed.valid)
        described = admin.describe_consumer_groups(["g-regex"])["g-regex"].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.partition_assignor == "uniform"

        result = CliRunner().invoke(
            app,
            [
                "groups",
                "describe",
                "--group",
                "g-regex",
                "--members",
                "--verbose",
                "--bootstrap-server",
                bootstrap,
            ],
        )
        assert result.exit_code == 0, result.output
        header, row = result.stdout.strip().splitlines()
        assert header.split()[-4:] == [
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ]
        assert "rx-a:0,1;rx-b:0,1;rx-c:0" in row
        state = CliRunner().invoke(
            app,
            [
                "groups",
                "describe",
                "--group",
                "g-regex",
                "--state",
                "--json",
                "--bootstrap-server",
                bootstrap,
            ],
        )
        record = json.loads(state.stdout)
        assert record["protocol"] == "consumer" and record["state"] == "Stable"
        assert record["group_epoch"] == record["target_assignment_epoch"] >= 2
    finally:
        consumer.close()


def test_java_consumer_with_the_consumer_protocol(cluster: KnodeCluster) -> None:
    """The Java client 4.4 (tests/java) with group.protocol=consumer."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("java848", 4, 3)])["java848"].result(60)
    _produce(cluster.bootstrap_servers, "java848", range(40), 4)
    records, _ = run_program("Clients", "kip848", cluster.bootstrap_servers, "java848")
    (result,) = records
    assert result["one_member_covers"] and result["two_members_cover"], result
    first = result["after_two"]["kip848-a"]
    second = result["after_two"]["kip848-b"]
    assert sorted(first["partitions"] + second["partitions"]) == [0, 1, 2, 3]
    assert len(first["partitions"]) == len(second["partitions"]) == 2
    assert first["generation"] >= 2 and second["generation"] >= 2  # member epochs
    assert result["records"] >= 40  # every record (a handover may redeliver a few)
    assert not any(e.startswith(("lost", "error")) for e in first["events"] + second["events"])


def test_coordinator_sigkill_is_survived(
    cluster: KnodeCluster, group: tuple[Ownership, list[Kip848Consumer]]
) -> None:
    bootstrap = cluster.bootstrap_servers
    ownership, consumers = group
    assert consumers, "runs after the join/leave test, with its group"
    _produce(bootstrap, "k", range(100), PARTITIONS)
    first = {str(v).encode() for v in range(100)}
    wait_until(
        lambda: first <= set().union(*(c.consumed() for c in consumers)),
        timeout_s=60,
        what="the first 100 messages consumed",
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    coordinator = int(admin.describe_consumer_groups(["g848"])["g848"].result(30).coordinator.id)
    before = {c.name: c.snapshot() for c in consumers}
    cluster.kill(coordinator)
    survivors = ",".join(cluster.address(n) for n in cluster.nodes if n != coordinator)
    survivor_admin = AdminClient({"bootstrap.servers": survivors})
    wait_until(
        lambda: (
            int(survivor_admin.describe_consumer_groups(["g848"])["g848"].result(10).coordinator.id)
            != coordinator
        ),
        timeout_s=60,
        what="a new coordinator",
    )
    survivor_ids = {n for n in cluster.nodes if n != coordinator}
    wait_until(
        lambda: all(
            p.leader in survivor_ids
            for p in survivor_admin.list_topics("k", timeout=5).topics["k"].partitions.values()
        ),
        timeout_s=60,
        what="the topic's leaders to move off the killed node",
    )
    _produce(survivors, "k", range(100, 200), PARTITIONS)
    everything = {str(v).encode() for v in range(200)}
    wait_until(
        lambda: everything <= set().union(*(c.consumed() for c in consumers)),
        timeout_s=90,
        what="every message consumed after the failover",
    )
    # the new coordinator rebuilt the group from __consumer_offsets: same members, same
    # partitions, nobody fenced, no partition held twice
    description = survivor_admin.describe_consumer_groups(["g848"])["g848"].result(30)
    assert len(description.members) == len(consumers)
    assert {c.name: c.snapshot() for c in consumers} == before
    assert ownership.overlaps == []
    assert all(not c.errors for c in consumers), [c.errors for c in consumers]
    cluster.start(coordinator)
