"""Coordinator failover and full restarts on a 3-node cluster (issue 6, "Must show").

`__consumer_offsets` is replicated (RF 3); the coordinator of a group is the leader of its
partition. SIGKILLing that node moves the leadership; the new leader loads the partition
and the group keeps consuming from its committed offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group.members import Member, stop_all
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.replication.factor=3",
    "controller.quorum.secret=trafka-groups-test",
    "offsets.topic.num.partitions=6",
    "replica.lag.time.max.ms=3000",
    "broker.session.timeout.ms=6000",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KnodeCluster]:
    with KnodeCluster(tmp_path / "nodes", node_count=3, settings=SETTINGS) as c:
        _wait_for_brokers(c.bootstrap_servers, 3)
        yield c


def _wait_for_brokers(bootstrap: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(
        lambda: len(admin.list_topics(timeout=5).brokers) == count,
        timeout_s=60,
        what=f"{count} registered brokers",
    )


def _coordinator(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.describe_consumer_groups([group])[group].result(30).coordinator.id)


def _produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, str(value).encode(), partition=value % 3)
    assert producer.flush(120) == 0


def test_group_survives_coordinator_sigkill(cluster: KnodeCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fo", 3, 3)])["fo"].result(60)
    _produce(bootstrap, "fo", range(150))
    members = [Member(bootstrap, "g-fo", "fo", log_dir=tmp_path) for _ in range(2)]
    try:
        everything = {str(v) for v in range(150)}
        wait_until(
            lambda: everything <= {v for m in members for v in m.values()},
            timeout_s=60,
            what="the first 150 messages consumed",
        )
        coordinator = _coordinator(bootstrap, "g-fo")
        cluster.kill(coordinator)
        survivors = ",".join(cluster.address(n) for n in cluster.nodes if n != coordinator)
        wait_until(
            lambda: _coordinator(survivors, "g-fo") != coordinator,
            timeout_s=60,
            what="a new coordinator",
        )
        survivor_ids = {n for n in cluster.nodes if n != coordinator}
        survivor_admin = AdminClient({"bootstrap.servers": survivors})
        wait_until(
            lambda: all(
                p.leader in survivor_ids
                for p in survivor_admin.list_topics("fo", timeout=5)
                .topics["fo"]
                .partitions.values()
            ),
            timeout_s=60,
            what="the topic's leaders to move off the killed node",
        )
        _produce(survivors, "fo", range(150, 300))
        everything = {str(v) for v in range(300)}
        wait_until(
            lambda: everything <= {v for m in members for v in m.values()},
            timeout_s=90,
            what="every message consumed after the failover",
        )
        # Committed offsets were kept: after the failover nothing from before was re-read
        # beyond the at-least-once window (at most the in-flight message per partition).
        seen = [v for m in members for v in m.values()]
        redelivered = len(seen) - len(set(seen))
        assert redelivered <= 6
    finally:
        stop_all(members)


def test_committed_offsets_survive_a_restart_of_every_node(cluster: KnodeCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("keep", 3, 3)])["keep"].result(60)
    config = {"bootstrap.servers": bootstrap, "group.id": "g-keep", "enable.auto.commit": False}
    consumer = Consumer(config)
    try:
        consumer.commit(
            offsets=[TopicPartition("keep", p, 7 * (p + 1)) for p in range(3)], asynchronous=False
        )
    finally:
        consumer.close()
    for node_id in cluster.nodes:
        cluster.stop(node_id)
    cluster.start_all()
    _wait_for_brokers(bootstrap, 3)
    consumer = Consumer(config)
    try:
        committed = wait_until(
            lambda: consumer.committed([TopicPartition("keep", p) for p in range(3)], 10),
            timeout_s=60,
            what="committed offsets after the restart",
        )
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 7), (1, 14), (2, 21)]
