"""Rack-aware replica placement on real processes: three knode processes with `broker.rack`
(two in rack "a", one in "b"), topics created and grown through a real client (CreateTopics,
CreatePartitions) and through Metadata's auto-creation: every partition has a replica in
each rack, as Kafka's rack-aware `assignReplicasToBrokers` places them.

With two brokers in one rack, Kafka's rack-unaware round robin over brokers 1, 2, 3 puts at
least one of six partitions on brokers 1 and 2 (both rack "a"), so this test fails without
rack awareness."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RACKS = {1: "a", 2: "a", 3: "b"}


def _replicas(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    metadata = admin.list_topics(topic, timeout=5).topics[topic]
    return {p.id: list(p.replicas) for p in metadata.partitions.values()}


def _racks_of(replicas: list[int]) -> set[str]:
    return {RACKS[broker] for broker in replicas}


def test_create_topics_and_partitions_spread_replicas_across_racks(tmp_path: Path) -> None:
    cluster = KnodeCluster(
        tmp_path,
        node_count=3,
        settings=["auto.create.topics.enable=true", "default.replication.factor=2"],
        node_settings={node_id: [f"broker.rack={rack}"] for node_id, rack in RACKS.items()},
        start=False,
    )
    with cluster:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        futures = admin.create_topics([NewTopic("racked", num_partitions=6, replication_factor=2)])
        futures["racked"].result(timeout=30)
        placed = wait_until(
            lambda: (found := _replicas(admin, "racked")) and len(found) == 6 and found,
            timeout_s=20,
            what="six partitions of racked",
        )
        assert all(len(replicas) == 2 for replicas in placed.values()), placed
        assert all(_racks_of(replicas) == {"a", "b"} for replicas in placed.values()), placed
        # Leaders (first replicas) are spread too: every broker leads two of the six.
        assert sorted(replicas[0] for replicas in placed.values()) == [1, 1, 2, 2, 3, 3]

        grown = admin.create_partitions([NewPartitions("racked", 12)])
        grown["racked"].result(timeout=30)
        placed = wait_until(
            lambda: (found := _replicas(admin, "racked")) and len(found) == 12 and found,
            timeout_s=20,
            what="twelve partitions of racked",
        )
        assert all(_racks_of(replicas) == {"a", "b"} for replicas in placed.values()), placed

        # Metadata's auto-creation (a producer's first Metadata) uses the same placement.
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        producer.produce("auto-racked", b"first")
        assert producer.flush(30) == 0
        auto = wait_until(
            lambda: (found := _replicas(admin, "auto-racked")) and found,
            timeout_s=20,
            what="auto-racked",
        )
        assert all(_racks_of(replicas) == {"a", "b"} for replicas in auto.values()), auto
