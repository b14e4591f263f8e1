"""Consumer groups with real clients against a real knode (issue 6, "Must show").

One single-node cluster per module (start-up is the expensive part); each test uses its
own topic and group. `group.initial.rebalance.delay.ms=0` except where that delay is the
subject, so first joins are fast (REFERENCE fact 8).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group.members import Member, stop_all
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("groups")
    with KnodeCluster(base, node_count=1, settings=["group.initial.rebalance.delay.ms=0"]) as c:
        yield c


def create_topic(cluster: KnodeCluster, name: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(cluster: KnodeCluster, topic: str, values: range, partitions: int = 6) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for value in values:
        producer.produce(topic, str(value).encode(), partition=value % partitions)
    assert producer.flush(30) == 0


def covered(members: list[Member]) -> list[int]:
    return sorted(p for m in members for p in (m.assignment or []))


def sizes(members: list[Member]) -> list[int]:
    return sorted(len(m.assignment or []) for m in members)


def test_three_members_then_a_fourth_then_a_crash(cluster: KnodeCluster, tmp_path: Path) -> None:
    create_topic(cluster, "orders")
    produce(cluster, "orders", range(300))
    bootstrap = cluster.bootstrap_servers
    members = [Member(bootstrap, "g-orders", "orders", log_dir=tmp_path) for _ in range(3)]
    try:
        wait_until(
            lambda: sizes(members) == [2, 2, 2] and covered(members) == list(range(6)),
            timeout_s=30,
            what="3 members with 2 partitions each",
        )
        members.append(Member(bootstrap, "g-orders", "orders", log_dir=tmp_path))
        wait_until(
            lambda: sizes(members) == [1, 1, 2, 2] and covered(members) == list(range(6)),
            timeout_s=30,
            what="a rebalance to 4 members",
        )
        victim = next(m for m in members if len(m.assignment or []) == 2)
        victim.kill()
        survivors = [m for m in members if m is not victim]
        killed_at = time.monotonic()
        wait_until(
            lambda: covered(survivors) == list(range(6)),
            timeout_s=SESSION_TIMEOUT_MS / 1000 + 15,
            what="the killed member's partitions to move",
        )
        moved_after_s = time.monotonic() - killed_at
        assert moved_after_s < SESSION_TIMEOUT_MS / 1000 + 5
        produce(cluster, "orders", range(300, 600))
        everything = {str(v) for v in range(600)}
        wait_until(
            lambda: everything <= {v for m in members for v in m.values()},
            timeout_s=30,
            what="every message consumed (no skips)",
        )
    finally:
        stop_all(members)


def test_first_join_of_a_new_group_is_fast(cluster: KnodeCluster) -> None:
    create_topic(cluster, "fast", 2)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "g-fast",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        }
    )
    try:
        # Warm the connection (bootstrap, metadata) so only the group protocol is timed.
        consumer.list_topics("fast", timeout=10)
        started = time.monotonic()
        consumer.subscribe(["fast"])
        while not consumer.assignment():
            consumer.poll(0.02)
            assert time.monotonic() - started < 10
        elapsed_s = time.monotonic() - started
    finally:
        consumer.close()
    assert elapsed_s < 1.0, f"first join took {elapsed_s:.2f}s"


def test_committed_offsets_survive_a_node_restart(cluster: KnodeCluster) -> None:
    create_topic(cluster, "durable", 3)
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": "g-durable",
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    offsets = [TopicPartition("durable", p, 10 * (p + 1)) for p in range(3)]
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    cluster.restart(1)
    consumer = Consumer(config)
    try:
        committed = consumer.committed([TopicPartition("durable", p) for p in range(3)], 30)
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 10), (1, 20), (2, 30)]


def test_static_member_restart_gets_its_partitions_without_rebalance(
    cluster: KnodeCluster, tmp_path: Path
) -> None:
    create_topic(cluster, "static")
    bootstrap = cluster.bootstrap_servers
    kwargs = {"session_timeout_ms": 15_000, "log_dir": tmp_path}
    first = Member(bootstrap, "g-static", "static", instance_id="static-a", **kwargs)  # type: ignore[arg-type]
    other = Member(bootstrap, "g-static", "static", instance_id="static-b", **kwargs)  # type: ignore[arg-type]
    members = [first, other]
    try:
        wait_until(lambda: sizes(members) == [3, 3], timeout_s=30, what="2 static members, 3 each")
        before = first.assignment
        rebalances_of_other = len([e for e in other.snapshot() if e["event"] == "rebalance"])
        first.kill()  # a crash: a static member sends no LeaveGroup, the group waits for it
        restarted = Member(bootstrap, "g-static", "static", instance_id="static-a", **kwargs)  # type: ignore[arg-type]
        members.append(restarted)
        restarted.wait(lambda m: bool(m.assignment), timeout_s=30, what="restarted member")
        assert restarted.assignment == before
        # Both keep consuming their own partitions (a message to each, after the restart)
        # and the other member never went through a rebalance.
        produce(cluster, "static", range(1000, 1006))
        for member in (restarted, other):
            member.wait(
                lambda m: (
                    {str(v) for v in range(1000, 1006) if v % 6 in (m.assignment or [])}
                    <= set(m.values())
                ),
                timeout_s=30,
                what="messages after the restart",
            )
        assert len([e for e in other.snapshot() if e["event"] == "rebalance"]) == (
            rebalances_of_other
        )
    finally:
        stop_all(members)


def test_cooperative_sticky(cluster: KnodeCluster, tmp_path: Path) -> None:
    create_topic(cluster, "coop")
    bootstrap = cluster.bootstrap_servers

    def member() -> Member:
        return Member(bootstrap, "g-coop", "coop", strategy="cooperative-sticky", log_dir=tmp_path)

    members = [member(), member()]
    try:
        wait_until(lambda: sizes(members) == [3, 3], timeout_s=30, what="2 members, 3 each")
        kept = {id(m): set(m.assignment or []) for m in members}
        third_joined_at = time.monotonic()
        members.append(member())
        wait_until(
            lambda: sizes(members) == [2, 2, 2] and covered(members) == list(range(6)),
            timeout_s=30,
            what="3 members, 2 each",
        )
        # Sticky: the first two keep 2 of their 3 partitions; cooperative: never revoked
        # everything at once.
        for m in members[:2]:
            assert set(m.assignment or []) <= kept[id(m)]
            revoked = [
                e
                for e in m.snapshot()
                if e["event"] == "rebalance"
                and e["kind"] == "revoke"
                and e["at"] >= third_joined_at
            ]
            assert revoked, "the third member must take partitions from both"
            assert all(len(e["partitions"]) < 3 for e in revoked)
    finally:
        stop_all(members)


def test_mixed_clients_in_one_group(cluster: KnodeCluster, tmp_path: Path) -> None:
    create_topic(cluster, "mixed")
    produce(cluster, "mixed", range(60))
    bootstrap = cluster.bootstrap_servers
    members = [
        Member(bootstrap, "g-mixed", "mixed", client=client, log_dir=tmp_path)
        for client in ("confluent", "kafka-python", "aiokafka")
    ]
    try:
        wait_until(
            lambda: sizes(members) == [2, 2, 2] and covered(members) == list(range(6)),
            timeout_s=60,
            what="3 clients with 2 partitions each",
        )
        everything = {str(v) for v in range(60)}
        wait_until(
            lambda: everything <= {v for m in members for v in m.values()},
            timeout_s=30,
            what="every message consumed",
        )
    finally:
        stop_all(members)


def test_kafkajs_group(cluster: KnodeCluster, tmp_path: Path) -> None:
    # kafkajs names its assignor "RoundRobinAssigner", which no other client offers, so it
    # cannot share a group with them (INCONSISTENT_GROUP_PROTOCOL): a group of its own.
    create_topic(cluster, "js")
    produce(cluster, "js", range(60))
    bootstrap = cluster.bootstrap_servers
    members = [
        Member(bootstrap, "g-js", "js", client="kafkajs", log_dir=tmp_path) for _ in range(2)
    ]
    try:
        wait_until(
            lambda: sizes(members) == [3, 3] and covered(members) == list(range(6)),
            timeout_s=60,
            what="2 kafkajs members with 3 partitions each",
        )
        everything = {str(v) for v in range(60)}
        wait_until(
            lambda: everything <= {v for m in members for v in m.values()},
            timeout_s=30,
            what="every message consumed",
        )
    finally:
        stop_all(members)
