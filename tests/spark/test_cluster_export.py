"""Issue 7, first "Must show", end to end: a real 3-node cluster, real clients, real Spark.

Three knode processes; a topic with RF=3, 2 partitions and min.insync.replicas=2; one
acks=all confluent-kafka producer per codec (none, gzip, snappy, lz4, zstd) with keys and
headers. Once every partition's ISR is back to all three brokers the nodes are stopped with
SIGTERM (a clean shutdown writes the checkpoints) and the export job reads the three log dirs:
every acknowledged message is there exactly once per broker with its key, value, headers and
codec, each replica holds exactly the high watermark's worth of records (the leader's
`replication-offset-checkpoint` entry), and `run_check` on the untouched logs reports nothing.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.spark.jobs import run_check, run_export

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

TOPIC = "audited"
PARTITIONS = 2
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MESSAGES_PER_CODEC = 200
SETTINGS = [
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=5000",
    "replica.fetch.wait.max.ms=100",
]
Header = tuple[str, str | bytes | None]
Expected = tuple[bytes, bytes, list[Header], str]


def _isr_complete(admin: AdminClient) -> bool:
    metadata = admin.list_topics(TOPIC, timeout=5)
    partitions = metadata.topics[TOPIC].partitions
    return len(partitions) == PARTITIONS and all(
        sorted(int(r) for r in p.isrs) == [1, 2, 3] and p.leader in (1, 2, 3)
        for p in partitions.values()
    )


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
    )
    for future in futures.values():
        future.result(timeout=30)
    wait_until(lambda: _isr_complete(admin), timeout_s=30, what="ISR of 3 everywhere")


def _wait_for_full_isr(bootstrap: str) -> None:
    """A fresh client each time: it is gone (no reconnect noise) once the nodes stop."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: _isr_complete(admin), timeout_s=30, what="ISR of 3 after producing")


def _produce(bootstrap: str, codec: str) -> dict[tuple[int, int], Expected]:
    """Send MESSAGES_PER_CODEC keyed messages with headers; {(partition, offset): expected}."""
    acked: dict[tuple[int, int], Expected] = {}
    failed: list[str] = []
    sent: dict[bytes, Expected] = {}

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(str(error))
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        acked[(partition, offset)] = sent[message.key()]  # type: ignore[index]

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 20,
            "batch.num.messages": 50,
            "message.timeout.ms": 30_000,
        }
    )
    for i in range(MESSAGES_PER_CODEC):
        key = f"{codec}-key-{i:04d}".encode()
        # repetitive values so every codec actually shrinks the batch (librdkafka sends a
        # batch uncompressed when compression does not help)
        value = f"{codec}-value-{i:04d}|".encode() * (5 + i % 7)
        headers: list[Header] = [
            ("codec", codec.encode()),
            ("index", str(i).encode()),
            ("empty", b""),
        ]
        sent[key] = (key, value, headers, codec)
        producer.produce(TOPIC, value, key, headers=headers, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []
    assert len(acked) == MESSAGES_PER_CODEC
    return acked


def _checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint file: version line, count line, `topic partition offset`."""
    lines = (log_dir / "replication-offset-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    entries = {}
    for line in lines[2:]:
        topic, partition, offset = line.split()
        entries[(topic, int(partition))] = int(offset)
    return entries


def test_cluster_export_has_every_message_once_per_replica(spark: Any, tmp_path: Path) -> None:
    expected: dict[tuple[int, int], Expected] = {}
    cluster = KnodeCluster(tmp_path / "cluster", node_count=3, settings=SETTINGS, start=False)
    with cluster:
        cluster.start_all()
        _create_topic(cluster.bootstrap_servers)
        for codec in CODECS:
            acked = _produce(cluster.bootstrap_servers, codec)
            assert not expected.keys() & acked.keys(), "an offset was acknowledged twice"
            expected.update(acked)
        # acks=all with the full ISR: every replica has every message; still, wait for the
        # ISR to be complete after the last write before stopping (nobody fell behind)
        _wait_for_full_isr(cluster.bootstrap_servers)
        # SIGTERM to all at once (a clean shutdown writes the checkpoints), then wait for each
        processes = []
        for node in cluster.nodes.values():
            assert node.process is not None and node.running, cluster.describe_failure()
            processes.append(node.process)
            node.process.send_signal(signal.SIGTERM)
        for node_id, process in zip(cluster.nodes, processes, strict=True):
            process.wait(timeout=30)  # before cluster.stop, which would signal it again
            assert cluster.stop(node_id) == 0, cluster.describe_failure()

    log_dirs = {node_id: node.data_dir for node_id, node in cluster.nodes.items()}
    total = len(CODECS) * MESSAGES_PER_CODEC
    assert len(expected) == total
    high_watermarks: dict[int, int] = {}
    for partition in range(PARTITIONS):
        ends = [offset + 1 for (p, offset) in expected if p == partition]
        # offsets are dense from 0: the acknowledged messages are the whole log
        assert sorted(o for (p, o) in expected if p == partition) == list(range(len(ends)))
        checkpoints = [_checkpoint(d).get((TOPIC, partition), 0) for d in log_dirs.values()]
        # the leader's checkpoint is the largest; followers learn it one fetch later
        high_watermarks[partition] = max(checkpoints)
        assert high_watermarks[partition] == len(ends), checkpoints
    assert all(high_watermarks[p] > 0 for p in range(PARTITIONS))

    paths = [str(log_dirs[node_id]) for node_id in sorted(log_dirs)]
    out = str(tmp_path / "export")
    counts = run_export(spark, paths, out)
    rows = spark.read.parquet(os.path.join(out, "records")).where(f"topic = '{TOPIC}'").collect()

    seen: dict[tuple[int, int, int], Any] = {}
    for row in rows:
        at = (row["broker"], row["partition"], row["offset"])
        assert at not in seen, f"{at} exported twice"
        seen[at] = row
        assert row["batch_crc_valid"] and row["batch_error"] is None, at
        assert row["magic"] == 2 and not row["is_control"], at
    assert len(rows) == 3 * total
    for (partition, offset), (key, value, headers, codec) in expected.items():
        for broker in (1, 2, 3):
            row = seen.get((broker, partition, offset))
            assert row is not None, f"offset {offset} of partition {partition} missing on {broker}"
            assert row["key"] == key
            assert row["value"] == value
            assert [(h["key"], h["value"]) for h in row["headers"]] == headers
            assert row["compression"] == codec
    per_replica: dict[tuple[int, int], int] = {}
    for broker, partition, _offset in seen:
        per_replica[(broker, partition)] = per_replica.get((broker, partition), 0) + 1
    assert per_replica == {
        (broker, partition): high_watermarks[partition]
        for broker in (1, 2, 3)
        for partition in range(PARTITIONS)
    }
    assert counts["records"] >= 3 * total

    report = run_check(spark, paths)
    assert report.violations == [], report.summary()
    hws = {
        (p["topic"], p["partition"]): p["high_watermark"]
        for p in report.partitions
        if p["topic"] == TOPIC
    }
    assert hws == {(TOPIC, p): high_watermarks[p] for p in range(PARTITIONS)}
