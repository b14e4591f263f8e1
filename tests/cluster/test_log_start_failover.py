"""Records removed by DeleteRecords stay removed after a failover (issue 12, item 6): the
followers adopt the leader's log start offset from every fetch answer, so a new leader's
earliest offset is the old leader's, not 0. Three real knode processes, confluent-kafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.fetch.wait.max.ms=200",
    "offsets.topic.num.partitions=1",
]
TOPIC = "trimmed"


def _leader(admin: AdminClient) -> int:
    return int(admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0].leader)


def _earliest(bootstrap: str) -> int:
    """The partition's log start offset as a client sees it. Asked again (bounded) while the
    new leader is still taking over: the metadata can name it a moment before its
    LeaderAndIsr is applied, and librdkafka answers that moment with "Unknown partition"
    (seen once right after the election)."""
    answers: list[int] = []

    def ask() -> bool:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-check"})
        try:
            low, _ = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=5)
        except KafkaException:
            return False
        finally:
            consumer.close()
        answers.append(int(low))
        return True

    wait_until(ask, timeout_s=30, what="the partition's offsets from the new leader")
    return answers[-1]


def test_deleted_records_do_not_come_back_after_a_failover(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False) as cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics(
            [NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})]
        ).values():
            future.result(timeout=30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for number in range(100):
            producer.produce(TOPIC, str(number).encode(), partition=0)
        assert producer.flush(30) == 0
        deleted = admin.delete_records([TopicPartition(TOPIC, 0, 60)])
        assert next(iter(deleted.values())).result(timeout=30).low_watermark == 60
        # One more acks=all write with min.insync.replicas=3: acknowledged only after every
        # follower fetched past it, i.e. after each got a fetch answer written after the
        # DeleteRecords (which carries log start offset 60).
        producer.produce(TOPIC, b"100", partition=0)
        assert producer.flush(30) == 0
        old_leader = _leader(admin)
        cluster.kill(old_leader)
        survivor = next(node_id for node_id in cluster.nodes if node_id != old_leader)
        survivor_admin = AdminClient({"bootstrap.servers": cluster.address(survivor)})
        wait_until(
            lambda: _leader(survivor_admin) not in (-1, old_leader),
            timeout_s=60,
            what="a new leader",
        )
        assert _earliest(cluster.address(survivor)) == 60
