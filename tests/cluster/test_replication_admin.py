"""Cluster operations on real processes (issue 5): reassignment, preferred election and topic
deletion across three knode processes, driven through `ktool` as a user would, and the
stray log a broker that was down during a reassignment deletes at its restart (KAFKA-14616)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "auto.leader.rebalance.enable=false",
]
STRAYED_MESSAGES = 400


def _ktool(cluster: KnodeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    address = ",".join(cluster.address(n) for n, node in cluster.nodes.items() if node.running)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trafka.tools.ktool",
            *args,
            "--bootstrap-server",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _wait_verified(cluster: KnodeCluster, plan: Path, what: str) -> None:
    """Until `ktool reassign verify` of `plan` exits 0 (every partition completed)."""
    wait_until(
        lambda: (
            _ktool(cluster, "reassign", "verify", "--reassignment-json-file", str(plan)).returncode
            == 0
        ),
        timeout_s=30,
        what=what,
    )


def _cluster(tmp_path: Path) -> KnodeCluster:
    cluster = KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False)
    for node_id in cluster.nodes:
        cluster.start(node_id, wait=False)
    try:
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _partitions(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, sorted isr)."""
    metadata = admin.list_topics(topic, timeout=5).topics[topic]
    return {
        p.id: (int(p.leader), list(p.replicas), sorted(p.isrs))
        for p in metadata.partitions.values()
    }


def _dirs(cluster: KnodeCluster, topic: str) -> set[tuple[int, str]]:
    return {
        (node_id, path.name)
        for node_id, node in cluster.nodes.items()
        if node.data_dir.exists()
        for path in node.data_dir.iterdir()
        if path.name.startswith(f"{topic}-")
    }


def _check_stray_log_deleted(cluster: KnodeCluster, admin: AdminClient) -> None:
    """Broker 3, restarted after strayed-0 moved to {1,2}, deleted its strayed-0 at start-up
    (one log line with the reason), left `gone` to the controller, kept strayed-1 and leads
    it again with every message."""
    node_log = cluster.nodes[3].stderr_path

    def this_run() -> str:
        return node_log.read_text(errors="replace").rsplit("===== start ", 1)[-1]

    wait_until(
        lambda: "stray-log check done" in this_run(), timeout_s=60, what="broker 3's stray check"
    )
    assert _dirs(cluster, "strayed") == {
        (1, "strayed-0"),
        (2, "strayed-0"),
        (1, "strayed-1"),
        (3, "strayed-1"),
    }
    lines = this_run().splitlines()
    deleted = [line for line in lines if "deleted stray log" in line]
    assert len(deleted) == 1, deleted
    assert "deleted stray log strayed-0 " in deleted[0], deleted
    assert "this broker is not in the partition's replicas" in deleted[0], deleted
    wait_until(
        lambda: _partitions(admin, "strayed")[1][2] == [1, 3],
        timeout_s=30,
        what="broker 3 back in strayed-1's ISR",
    )
    elected = _ktool(cluster, "preferred-elect", "--topic", "strayed", "--partition", "1")
    assert elected.returncode == 0, elected.stderr + elected.stdout
    wait_until(
        lambda: _partitions(admin, "strayed")[1][0] == 3, timeout_s=20, what="3 leads strayed-1"
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.address(3),
            "group.id": "strayed-check",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("strayed", 1, OFFSET_BEGINNING)])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    while len(seen) < STRAYED_MESSAGES // 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))  # type: ignore[arg-type]
    consumer.close()
    assert seen == list(range(1, STRAYED_MESSAGES, 2))


def test_reassign_preferred_elect_and_delete(tmp_path: Path) -> None:
    with _cluster(tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        created = _ktool(cluster, "topics", "create", "moving", "--replica-assignment", "1:2,2:1")
        assert created.returncode == 0, created.stderr + cluster.describe_failure()
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for number in range(1000):
            producer.produce("moving", str(number).encode(), partition=number % 2)
        assert producer.flush(30) == 0

        # Reassignment: {1,2} -> {2,3} and {2,1} -> {3,1}.
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": "moving", "partition": 0, "replicas": [2, 3]},
                        {"topic": "moving", "partition": 1, "replicas": [3, 1]},
                    ],
                }
            )
        )
        executed = _ktool(cluster, "reassign", "execute", "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stderr
        assert "Successfully started partition reassignment(s) for moving-0,moving-1" in (
            executed.stdout
        )
        assert '"replicas":[1,2]' in executed.stdout  # the rollback plan
        _wait_verified(cluster, plan, "the reassignment to complete")
        verified = _ktool(cluster, "reassign", "verify", "--reassignment-json-file", str(plan))
        assert "Reassignment of partition moving-0 is completed." in verified.stdout
        state = _partitions(admin, "moving")
        assert state[0][1] == [2, 3] and state[1][1] == [3, 1]
        wait_until(
            lambda: (
                (1, "moving-0") not in _dirs(cluster, "moving")
                and (2, "moving-1") not in _dirs(cluster, "moving")
            ),
            timeout_s=20,
            what="the removed replicas' logs deleted",
        )
        assert (3, "moving-0") in _dirs(cluster, "moving")
        listed = _ktool(cluster, "reassign", "list")
        assert listed.stdout.strip() == "No partition reassignments found."

        # Preferred election: kill partition 0's preferred leader (2), restart it, elect.
        wait_until(
            lambda: _partitions(admin, "moving")[0][2] == [2, 3],
            timeout_s=20,
            what="broker 3 in moving-0's ISR",
        )
        assert _partitions(admin, "moving")[0][0] == 2
        cluster.kill(2)
        wait_until(
            lambda: _partitions(admin, "moving")[0][0] == 3, timeout_s=20, what="3 leads moving-0"
        )
        cluster.start(2, wait=False)
        cluster.wait_ready(2, timeout_s=60)
        wait_until(
            lambda: _partitions(admin, "moving")[0][2] == [2, 3],
            timeout_s=30,
            what="broker 2 back in moving-0's ISR",
        )
        elected = _ktool(cluster, "preferred-elect", "--all-topic-partitions")
        assert elected.returncode == 0, elected.stderr
        assert "Successfully completed leader election (PREFERRED) for partitions moving-0" in (
            elected.stdout
        )
        wait_until(
            lambda: _partitions(admin, "moving")[0][0] == 2, timeout_s=10, what="2 leads again"
        )
        again = _ktool(cluster, "preferred-elect", "--topic", "moving", "--partition", "0")
        assert "Valid replica already elected for partitions moving-0" in again.stdout

        # Every message survived the moves and the failover.
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "check",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["moving"])
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 1000 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(int(message.value()))  # type: ignore[arg-type]
        consumer.close()
        assert seen == set(range(1000))

        # Deletion removes the files on every broker.
        deleted = _ktool(cluster, "topics", "delete", "moving")
        assert deleted.returncode == 0, deleted.stderr
        wait_until(lambda: not _dirs(cluster, "moving"), timeout_s=20, what="logs deleted")
        assert "moving" not in admin.list_topics(timeout=5).topics


def test_deletion_waits_for_a_down_broker_and_unclean_election_by_topic_config_or_request(
    tmp_path: Path,
) -> None:
    settings = [
        "broker.session.timeout.ms=6000",
        "broker.heartbeat.interval.ms=300",
        "replica.lag.time.max.ms=1500",
        "replica.fetch.wait.max.ms=200",
        "unclean.leader.election.enable=false",
        "auto.leader.rebalance.enable=false",
    ]
    cluster = KnodeCluster(tmp_path, node_count=3, settings=settings, start=False)
    with cluster:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.address(3)})

        # Deletion while broker 3 is down completes when it returns (CTL-30). A reassignment
        # while it is down moves strayed-0 away from it: at its restart it deletes that
        # stray log itself (KAFKA-14616), keeps strayed-1 and serves it.
        created = _ktool(cluster, "topics", "create", "gone", "--replica-assignment", "1:2:3")
        assert created.returncode == 0, created.stderr
        created = _ktool(cluster, "topics", "create", "strayed", "--replica-assignment", "1:3,3:1")
        assert created.returncode == 0, created.stderr
        wait_until(lambda: len(_dirs(cluster, "gone")) == 3, timeout_s=20, what="3 replicas")
        producer = Producer({"bootstrap.servers": cluster.address(1), "acks": "all"})
        for number in range(STRAYED_MESSAGES):
            producer.produce("strayed", str(number).encode(), partition=number % 2)
        assert producer.flush(30) == 0  # acks=all: in broker 3's logs too
        assert {(3, "strayed-0"), (3, "strayed-1")} <= _dirs(cluster, "strayed")
        cluster.kill(3)
        admin = AdminClient({"bootstrap.servers": cluster.address(1)})
        wait_until(
            lambda: 3 not in admin.list_topics(timeout=5).brokers,
            timeout_s=20,
            what="broker 3 gone",
        )
        _ktool(cluster, "topics", "delete", "gone")
        wait_until(
            lambda: _dirs(cluster, "gone") == {(3, "gone-0")},
            timeout_s=20,
            what="the live replicas deleted",
        )
        plan = tmp_path / "strayed.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": "strayed", "partition": 0, "replicas": [1, 2]}],
                }
            )
        )
        executed = _ktool(cluster, "reassign", "execute", "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stderr
        _wait_verified(cluster, plan, "strayed-0 reassigned to {1,2} without broker 3")
        assert (3, "strayed-0") in _dirs(cluster, "strayed")  # its StopReplica was not sent
        cluster.start(3, wait=False)
        cluster.wait_ready(3, timeout_s=60)
        wait_until(lambda: not _dirs(cluster, "gone"), timeout_s=30, what="replica 3 deleted")
        wait_until(
            lambda: "gone" not in admin.list_topics(timeout=5).topics,
            timeout_s=20,
            what="the topic gone",
        )
        _check_stray_log_deleted(cluster, admin)

        _check_unclean_elections(cluster)


def _check_unclean_elections(cluster: KnodeCluster) -> None:
    """Partitions dirty-0 and lax-0 on {1,2}; 2 falls out of both ISRs (SIGSTOP past the lag
    time, shorter than its session), then leader 1 dies: no clean leader is left. The
    brokers' `unclean.leader.election.enable=false` keeps both leaderless; enabling it on
    topic lax alone (IncrementalAlterConfigs, a dynamic topic config) elects 2 for lax-0
    without a restart, as Kafka's TopicUncleanLeaderElectionEnable does; dirty-0 waits for
    an ElectLeaders UNCLEAN."""
    for topic in ("dirty", "lax"):
        created = _ktool(cluster, "topics", "create", topic, "--replica-assignment", "1:2")
        assert created.returncode == 0, created.stderr
    admin = AdminClient({"bootstrap.servers": cluster.address(3)})
    wait_until(
        lambda: all(_partitions(admin, t)[0][2] == [1, 2] for t in ("dirty", "lax")),
        timeout_s=20,
        what="ISR {1,2}",
    )
    process = cluster.nodes[2].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        # Asked of the leader itself, over one connection (a librdkafka client could
        # pick the stopped broker).
        wait_until(
            lambda: all(
                "\tIsr: 1\t" in _ktool(cluster, "topics", "describe", t).stdout
                for t in ("dirty", "lax")
            ),
            timeout_s=10,
            what="2 out of both ISRs",
        )
        cluster.kill(1)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    wait_until(
        lambda: 1 not in admin.list_topics(timeout=5).brokers,
        timeout_s=20,
        what="broker 1 gone",
    )
    # The controller may have died with the ISR change unannounced: its successor's
    # UpdateMetadata brings the tree's state, leaderless (unclean.leader.election.enable=false).
    wait_until(
        lambda: all(_partitions(admin, t)[0] == (-1, [1, 2], [1]) for t in ("dirty", "lax")),
        timeout_s=30,
        what="dirty-0 and lax-0 leaderless with ISR {1}",
    )

    lax = ConfigResource(
        ResourceType.TOPIC,
        "lax",
        incremental_configs=[
            ConfigEntry(
                "unclean.leader.election.enable",
                "true",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin.incremental_alter_configs([lax])[lax].result(10)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "lax")])
    entry = next(iter(described.values())).result(10)["unclean.leader.election.enable"]
    assert (entry.value, entry.source) == ("true", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    wait_until(
        lambda: _partitions(admin, "lax")[0] == (2, [1, 2], [2]),
        timeout_s=20,
        what="2 leads lax-0 (unclean, by the topic's config)",
    )
    assert _partitions(admin, "dirty")[0][0] == -1  # the broker default did not change
    described = _ktool(cluster, "topics", "describe", "lax").stdout
    assert "\tLeader: 2\t" in described and "\tIsr: 2\t" in described, described
    logs = "".join(n.stderr_path.read_text() for n in cluster.nodes.values())
    assert "UNCLEAN leader election: lax-0 leader 2" in logs
    elected = _ktool(
        cluster,
        "preferred-elect",
        "--election-type",
        "unclean",
        "--topic",
        "dirty",
        "--partition",
        "0",
    )
    assert elected.returncode == 0, elected.stderr + elected.stdout
    assert "Successfully completed leader election (UNCLEAN) for partitions dirty-0" in (
        elected.stdout
    )
    wait_until(lambda: _partitions(admin, "dirty")[0][0] == 2, timeout_s=10, what="2 leads")
    logs = "".join(n.stderr_path.read_text() for n in cluster.nodes.values())
    assert "UNCLEAN leader election: dirty-0 leader 2" in logs
