"""The audit jobs on a real local Spark: export, check, independent writers, metadata."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.spark.logdirs import (
    Cluster,
    flip_byte,
    write_checkpoint,
    write_cluster,
    write_properties,
    write_segments,
)
from tests.spark.snapshots import exported_snapshot
from trafka.group.records import OffsetCommitRecord, OffsetCommitValue, encode_record
from trafka.log.records import NewRecord, build_batch
from trafka.spark.commands import EXIT_OK, EXIT_VIOLATIONS, check_command
from trafka.spark.jobs import log_frame, run_export
from trafka.tools.ktool import app

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    return write_cluster(str(tmp_path_factory.mktemp("cluster")))


def _paths(cluster: Cluster) -> list[str]:
    return [cluster.log_dirs[b] for b in sorted(cluster.log_dirs)]


def test_export_every_message_once_per_replica(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(exported_snapshot()))
    out = str(tmp_path / "out")
    counts = run_export(spark, _paths(cluster), out, metadata_path=str(snapshot))

    rows = spark.read.parquet(os.path.join(out, "records")).collect()
    assert counts["records"] == len(rows)
    seen: dict[tuple[str, int, int, int], Any] = {}
    for row in rows:
        key = (row["topic"], row["partition"], row["broker"], row["offset"])
        assert key not in seen, f"{key} exported twice"
        seen[key] = row
        assert row["batch_crc_valid"] and row["batch_error"] is None
    expected = 0
    for message in cluster.messages:
        for broker in cluster.replicas[(message.topic, message.partition)]:
            row = seen[(message.topic, message.partition, broker, message.offset)]
            expected += 1
            assert row["key"] == message.key
            assert row["value"] == message.value
            assert [(h["key"], h["value"]) for h in row["headers"]] == list(message.headers)
            assert int(row["timestamp"].timestamp() * 1000) == message.timestamp_ms
            assert row["compression"] == message.compression
            assert row["producer_id"] == 1000 + message.partition
            assert row["sequence"] == message.offset
            assert row["partition_leader_epoch"] == 3
            assert row["is_transactional"] == (message.topic == "events")
            assert row["segment"] == (
                "00000000000000000015.log"
                if message.topic == "orders" and message.partition == 0 and message.offset >= 15
                else "00000000000000000000.log"
            )
    offsets_rows = [r for r in rows if r["topic"] == "__consumer_offsets"]
    assert expected + len(offsets_rows) == len(rows)
    # Per replica, the rows counted match the high watermark (logs end at the HW here).
    per_replica: dict[tuple[str, int, int], int] = {}
    for topic, partition, broker, _offset in seen:
        per_replica[(topic, partition, broker)] = per_replica.get((topic, partition, broker), 0) + 1
    for (topic, partition), replicas in cluster.replicas.items():
        for broker in replicas:
            assert (
                per_replica[(topic, partition, broker)]
                == cluster.high_watermarks[(topic, partition)]
            )

    committed = {
        (r["group_id"], r["topic"], r["partition"]): r["committed_offset"]
        for r in spark.read.parquet(os.path.join(out, "committed_offsets")).collect()
    }
    assert committed == {("billing", "orders", 0): 20, ("billing", "orders", 1): 5}

    reassignments = spark.read.parquet(os.path.join(out, "metadata", "reassignments")).collect()
    assert [
        (
            r["topic"],
            r["partition"],
            list(r["target_replicas"]),
            list(r["adding_replicas"]),
            list(r["removing_replicas"]),
        )
        for r in reassignments
    ] == [("orders", 0, [2, 3, 4], [4], [1])]
    partitions = {
        (r["topic"], r["partition"]): r
        for r in spark.read.parquet(os.path.join(out, "metadata", "partitions")).collect()
    }
    assert partitions[("orders", 1)]["under_replicated"]
    assert list(partitions[("orders", 0)]["isr"]) == [1, 2, 3]
    assert partitions[("orders", 0)]["controller_epoch"] == 7
    deletions = spark.read.parquet(os.path.join(out, "metadata", "pending_deletions")).collect()
    assert [r["topic"] for r in deletions] == ["events"]
    brokers = spark.read.parquet(os.path.join(out, "metadata", "brokers")).collect()
    assert sorted(r["broker_id"] for r in brokers) == [1, 2, 3, 4]


def test_filter_pushdown_selects_the_same_rows(spark: Any, cluster: Cluster) -> None:
    frame = log_frame(spark, _paths(cluster))
    rows = frame.where(
        "topic = 'orders' and partition = 0 and broker = 2 and offset >= 12"
    ).collect()
    assert sorted(r["offset"] for r in rows) == list(range(12, 30))


def test_check_exits_zero_when_clean_and_locates_a_flipped_byte(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    report_path = tmp_path / "clean.json"
    arguments = ["audit", "check", "--log-dirs", ",".join(_paths(cluster)), "--report"]
    result = CliRunner().invoke(app, [*arguments, str(report_path), "--master", "local[2]"])
    assert result.exit_code == EXIT_OK, result.output
    assert "0 error(s), 0 warning(s)" in result.output
    clean = json.loads(report_path.read_text())
    assert clean["ok"] and clean["violations"] == []
    hws = {(p["topic"], p["partition"]): p["high_watermark"] for p in clean["partitions"]}
    assert hws == cluster.high_watermarks

    copy_root = tmp_path / "flipped"
    shutil.copytree(cluster.root, copy_root)
    broken = Cluster(str(copy_root), {b: str(copy_root / f"b{b}") for b in cluster.log_dirs})
    # Offset 2 is in the first batch of orders-0 (uncompressed): flip a bit of its value.
    flip_byte(broken.segment_path(3, "orders", 0), b"orders-0-value-00002")
    # A compacted topic is compared per record: flip the group metadata (offset 3) on 2.
    flip_byte(broken.segment_path(2, "__consumer_offsets", 0), b"client-1")
    # A group commits an offset beyond the end of orders-1 (both offsets replicas).
    commit = encode_record(
        OffsetCommitRecord("billing", "orders", 1, OffsetCommitValue(99, 3, "", 0))
    )
    beyond = build_batch([NewRecord(commit[1], key=commit[0], timestamp=0)], base_offset=4)
    for broker in (1, 2):
        with open(broken.segment_path(broker, "__consumer_offsets", 0), "ab") as handle:
            handle.write(beyond)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(exported_snapshot()))
    report_path = tmp_path / "flipped.json"
    exit_code = check_command(_paths(broken), report=str(report_path), metadata=str(snapshot))
    assert exit_code == EXIT_VIOLATIONS
    report = json.loads(report_path.read_text())
    errors = [v for v in report["violations"] if v["severity"] == "error"]
    located = {(v["check"], v["topic"], v["partition"], v["broker"], v["offset"]) for v in errors}
    assert located == {
        ("corrupt_batch", "orders", 0, 3, 2),
        ("replica_divergence", "orders", 0, 3, 2),
        ("corrupt_batch", "__consumer_offsets", 0, 2, 3),
        ("replica_divergence", "__consumer_offsets", 0, 2, 3),
        # From the metadata: orders-0 has replica 4 outside the ISR (and no log dir here),
        # orders-1's ISR [2, 1] leaves out broker 3 (whose log ends at 15).
        ("under_replicated", "orders", 0, 4, None),
        ("under_replicated", "orders", 1, 3, 15),
    }
    warned = {
        (v["check"], v["topic"], v["partition"], v["broker"], v["offset"])
        for v in report["violations"]
        if v["severity"] == "warning"
    }
    # client data (Kafka accepts any committed offset): a warning, not a broker error
    assert ("committed_offset_beyond_log_end", "orders", 1, 1, 99) in warned


def test_independent_writer_v2_and_v1_message_sets(spark: Any, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        # kafka-python 3.0 imports its schemas with the deprecated importlib.resources API.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.record.legacy_records import LegacyRecordBatchBuilder

    log_dir = tmp_path / "kafka-python"
    log_dir.mkdir()
    write_properties(str(log_dir), 9)
    batches: list[tuple[int, int, bytes]] = []
    # v2, gzip, with headers (kafka-python's DefaultRecordBatchBuilder; codec id 1).
    builder = DefaultRecordBatchBuilder(2, 1, False, 55, 2, 0, 1 << 20)
    for i in range(3):
        builder.append(
            i,
            1_700_000_000_000 + i,
            f"k{i}".encode(),
            f"v{i}".encode() * 50,
            [("h", f"x{i}".encode())],
        )
    batches.append((0, 2, bytes(builder.build())))
    # v1 message set, uncompressed, then a gzip-compressed v1 wrapper.
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i in range(3, 5):
        legacy.append(i, 1_700_000_001_000 + i, f"k{i}".encode(), f"v{i}".encode())
    batches.append((3, 4, bytes(legacy.build())))
    wrapped = LegacyRecordBatchBuilder(1, 1, 1 << 20)
    for i in range(2):
        wrapped.append(i, 1_700_000_002_000 + i, None, f"w{i}".encode() * 50)
    data = bytearray(wrapped.build())
    data[0:8] = (6).to_bytes(8, "big")  # the wrapper carries the last inner offset (5 + 1)
    batches.append((5, 6, bytes(data)))
    write_segments(str(log_dir / "legacy-0"), batches, None)
    write_checkpoint(str(log_dir), {("legacy", 0): 7})

    out = tmp_path / "json-out"
    arguments = ["audit", "export", "--log-dirs", str(log_dir), "--out", str(out)]
    result = CliRunner().invoke(app, [*arguments, "--format", "json", "--master", "local[2]"])
    assert result.exit_code == EXIT_OK, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["records"] == 7
    exported = spark.read.json(str(out / "records")).collect()
    assert sorted((r["topic"], r["offset"]) for r in exported) == [("legacy", i) for i in range(7)]

    rows = sorted(log_frame(spark, [str(log_dir)]).collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in rows] == list(range(7))
    assert all(r["batch_crc_valid"] and r["broker"] == 9 for r in rows)
    assert [r["magic"] for r in rows] == [2, 2, 2, 1, 1, 1, 1]
    assert [r["value"] for r in rows] == [
        *(f"v{i}".encode() * 50 for i in range(3)),
        b"v3",
        b"v4",
        b"w0" * 50,
        b"w1" * 50,
    ]
    assert [r["key"] for r in rows] == [b"k0", b"k1", b"k2", b"k3", b"k4", None, None]
    assert [(h["key"], h["value"]) for h in rows[1]["headers"]] == [("h", b"x1")]
    assert [r["compression"] for r in rows] == ["gzip"] * 3 + ["none"] * 2 + ["gzip"] * 2
    assert rows[0]["producer_id"] == 55 and rows[2]["sequence"] == 2
    assert int(rows[4]["timestamp"].timestamp() * 1000) == 1_700_000_001_004
    assert rows[5]["batch_base_offset"] == 5 and rows[5]["batch_last_offset"] == 6
