"""Issue 7, `--bootstrap-server` for the audit's metadata side, on three real knode processes.

One topic on two of the three brokers, messages produced with acks=all and offsets committed
by a group. `ktool audit check --bootstrap-server` on the healthy running cluster exits 0 and
took its ISR and leaders from the live metadata. Then the third broker (never the
controller) is killed and, while it is still registered, a reassignment moves one copy of
partition 0 to it: it can never catch up, so the reassignment stays in progress. Once the broker's
registration has expired, `ktool audit export --bootstrap-server DEAD,LIVE,...` (the dead
node first: the next server answers) writes metadata tables equal to what the live cluster
says through standard clients: brokers, topics, partitions (replicas, leader, ISR), the
reassignment in progress, the committed group offsets and the quorum status. Both ktool
runs are in-process (CliRunner) on the session's one SparkSession.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.spark.commands import EXIT_OK
from trafka.tools.ktool import app

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

TOPIC = "audited"
GROUP = "auditors"
MESSAGES_PER_PARTITION = 40
COMMITTED = {0: 7, 1: 3}
SETTINGS = [
    "broker.session.timeout.ms=5000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=5000",
    "replica.fetch.wait.max.ms=100",
    "auto.leader.rebalance.enable=false",
    "offsets.topic.num.partitions=1",
    "offsets.topic.replication.factor=1",
    "replica.high.watermark.checkpoint.interval.ms=500",
]


def _ktool(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _metadata(bootstrap: str) -> ClusterMetadata:
    """A fresh, quiet client per read (one node is killed on purpose)."""
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10)


def _isr_complete(bootstrap: str, replicas: list[int]) -> bool:
    metadata = _metadata(bootstrap)
    topics = metadata.topics
    if TOPIC not in topics or "__consumer_offsets" not in topics:
        return False
    partitions = [
        *topics[TOPIC].partitions.values(),
        *topics["__consumer_offsets"].partitions.values(),
    ]
    return (
        len(topics[TOPIC].partitions) == 2
        and all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in partitions)
        and all(sorted(p.replicas) == replicas for p in topics[TOPIC].partitions.values())
    )


def _checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """Kafka's replication-offset-checkpoint: version line, count line, `topic partition hw`."""
    path = log_dir / "replication-offset-checkpoint"
    lines = path.read_text().splitlines() if path.exists() else []
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}


def _leaders_checkpointed(cluster: KnodeCluster) -> bool:
    """Each partition's leader has checkpointed the whole log as its HW (the check's HW)."""
    metadata = _metadata(cluster.bootstrap_servers)
    return all(
        _checkpoint(cluster.nodes[p.leader].data_dir).get((TOPIC, p.id)) == MESSAGES_PER_PARTITION
        for p in metadata.topics[TOPIC].partitions.values()
    )


def _produce_and_commit(bootstrap: str, keep: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assignment = [keep, keep[::-1]]
    futures = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=2, replica_assignment=assignment)]
    )
    for future in futures.values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(2 * MESSAGES_PER_PARTITION):
        producer.produce(TOPIC, f"value-{i}".encode(), f"key-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        committed = consumer.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()],
            asynchronous=False,
        )
        assert committed is not None
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()


def _rows(out: Path, table: str, spark: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.read.parquet(str(out / table)).collect()]


def test_audit_reads_live_metadata_through_bootstrap_server(spark: Any, tmp_path: Path) -> None:
    cluster = KnodeCluster(tmp_path / "cluster", node_count=3, settings=SETTINGS, start=False)
    with cluster:
        cluster.start_all()
        wait_until(
            lambda: _metadata(cluster.bootstrap_servers).controller_id in (1, 2, 3),
            timeout_s=30,
            what="a controller",
        )
        controller = _metadata(cluster.bootstrap_servers).controller_id
        doomed = max(b for b in (1, 2, 3) if b != controller)
        keep = sorted(b for b in (1, 2, 3) if b != doomed)
        _produce_and_commit(cluster.bootstrap_servers, keep)
        wait_until(
            lambda: _isr_complete(cluster.bootstrap_servers, keep),
            timeout_s=30,
            what="full ISR everywhere",
        )
        wait_until(lambda: _leaders_checkpointed(cluster), timeout_s=30, what="HW checkpoints")
        log_dirs = ",".join(str(n.data_dir) for n in cluster.nodes.values())

        # Healthy: check against the live metadata exits 0 and used it (ISR, leaders).
        report_path = tmp_path / "report.json"
        result = _ktool(
            "audit", "check", "--log-dirs", log_dirs, "--bootstrap-server",
            cluster.bootstrap_servers, "--report", str(report_path), "--master", "local[2]",
        )  # fmt: skip
        assert result.exit_code == EXIT_OK, result.output
        report = json.loads(report_path.read_text())
        assert report["ok"] and report["violations"] == [] and report["checks_skipped"] == []
        checked = {p["partition"]: p for p in report["partitions"] if p["topic"] == TOPIC}
        assert sorted(checked) == [0, 1]
        assert all(sorted(p["isr"]) == keep and p["leader"] in keep for p in checked.values())
        assert all(p["high_watermark"] == MESSAGES_PER_PARTITION for p in checked.values())

        # A reassignment that cannot finish: its new replica's broker is dead.
        cluster.kill(doomed)
        live = ",".join(cluster.address(b) for b in keep)
        plan = tmp_path / "plan.json"
        target = [keep[0], doomed]  # partition 0 is on keep: move keep[1]'s copy to doomed
        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": target}]}
            )
        )
        executed = _ktool(
            "reassign", "execute", "--reassignment-json-file", str(plan), "--bootstrap-server", live
        )
        assert executed.exit_code == 0, executed.output
        assert f"Successfully started partition reassignment(s) for {TOPIC}-0" in executed.output

        def settled() -> bool:
            metadata = _metadata(live)
            return doomed not in metadata.brokers and all(
                p.leader != doomed for t in metadata.topics.values() for p in t.partitions.values()
            )

        wait_until(settled, timeout_s=30, what=f"broker {doomed} gone and no partition led by it")
        before = _metadata(live)
        listed = _ktool("reassign", "list", "--bootstrap-server", live)

        out = tmp_path / "export"
        bootstrap = f"{cluster.address(doomed)},{live}"  # the dead node first: the next answers
        result = _ktool(
            "audit", "export", "--log-dirs", log_dirs, "--out", str(out),
            "--bootstrap-server", bootstrap, "--master", "local[2]",
        )  # fmt: skip
        assert result.exit_code == EXIT_OK, result.output
        after = _metadata(live)

    counts = json.loads(result.stdout.strip().splitlines()[-1])
    assert counts["records"] > 0 and counts["committed_offsets"] == len(COMMITTED)
    metadata_dir = out / "metadata"
    live_state = {
        (topic, p.id): (list(p.replicas), p.leader, sorted(p.isrs))
        for topic, t in after.topics.items()
        for p in t.partitions.values()
    }
    assert live_state == {
        (topic, p.id): (list(p.replicas), p.leader, sorted(p.isrs))
        for topic, t in before.topics.items()
        for p in t.partitions.values()
    }, "the cluster changed during the export"

    brokers = _rows(metadata_dir, "brokers", spark)
    assert {b["broker_id"]: (b["host"], b["port"]) for b in brokers} == {
        b.id: (b.host, b.port) for b in after.brokers.values()
    }
    assert sorted(after.brokers) == keep

    topics = {t["topic"]: t for t in _rows(metadata_dir, "topics", spark)}
    assert sorted(topics) == sorted(after.topics)
    for name, topic in topics.items():
        assert topic["partition_count"] == len(after.topics[name].partitions)
        assert not topic["pending_deletion"]
    assert topics[TOPIC]["replication_factor"] == 3  # during the move: old and new replicas

    partitions = _rows(metadata_dir, "partitions", spark)
    assert {
        (p["topic"], p["partition"]): (p["replicas"], p["leader"], sorted(p["isr"]))
        for p in partitions
    } == live_state
    moving = next(p for p in partitions if (p["topic"], p["partition"]) == (TOPIC, 0))
    assert moving["adding_replicas"] == [doomed] and moving["removing_replicas"] == [keep[1]]
    assert sorted(moving["replicas"]) == [1, 2, 3] and moving["leader"] == keep[0]
    assert moving["under_replicated"]

    reassignments = _rows(metadata_dir, "reassignments", spark)
    assert [(r["topic"], r["partition"]) for r in reassignments] == [(TOPIC, 0)]
    (reassignment,) = reassignments
    assert reassignment["target_replicas"] == target
    assert reassignment["current_replicas"] == moving["replicas"]
    assert reassignment["adding_replicas"] == [doomed]
    assert reassignment["removing_replicas"] == [keep[1]]
    # what kafka-reassign-partitions.sh --list says (ListPartitionReassignments)
    replicas = ",".join(str(r) for r in moving["replicas"])
    assert f"{TOPIC}-0: replicas: {replicas}. adding: {doomed}. removing: {keep[1]}." in (
        listed.output
    )

    status = {r["key"]: r["value"] for r in _rows(metadata_dir, "quorum_status", spark)}
    assert status["source"] == "bootstrap-server"
    assert status["bootstrap_server"] == live.split(",")[0]
    assert status["cluster_id"] == after.cluster_id
    assert json.loads(status["voters"]) == [1, 2, 3]
    assert int(status["leader_id"]) in (1, 2, 3)
    assert _rows(metadata_dir, "metadata_errors", spark) == []

    committed = {
        r["partition"]: r["committed_offset"]
        for r in _rows(out, "committed_offsets", spark)
        if r["group_id"] == GROUP and r["topic"] == TOPIC
    }
    assert committed == COMMITTED
    assert os.path.isdir(out / "records" / f"topic={TOPIC}")
