"""The audit's pure parts (no Spark): log-dir reading, decoding to Arrow, checks, metadata."""

from __future__ import annotations

import itertools
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.spark.logdirs import Cluster, flip_byte, write_cluster
from tests.spark.snapshots import NOW_MS, exported_snapshot
from trafka.group.records import OffsetCommitRecord, OffsetCommitValue, encode_record
from trafka.log.batch import CompressionType
from trafka.log.records import NewRecord, build_batch
from trafka.spark import checks
from trafka.spark.batches import BATCH_SCHEMA, decode_range_batches
from trafka.spark.columns import LOG_SCHEMA, OffsetBounds, decode_range_to_arrow
from trafka.spark.commands import EXIT_CANNOT_RUN, check_command
from trafka.spark.jobs import local_path
from trafka.spark.logdir import (
    ByteRange,
    SegmentFile,
    list_segments,
    open_log_dir,
    pack_ranges,
    parse_partition_dir,
    read_offset_checkpoint,
    split_segment,
)
from trafka.spark.metadata import metadata_tables, znodes_from_snapshot
from trafka.spark.offsets import decode_offsets_row
from trafka.spark.session import check_environment
from trafka.spark.source import LogSegmentReader, SegmentRangePartition, task_bytes


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return write_cluster(str(tmp_path / "cluster"))


def _segment(
    cluster: Cluster, broker: int, topic: str, partition: int, base: int = 0
) -> SegmentFile:
    log_dir = open_log_dir(cluster.log_dirs[broker])
    return next(
        s
        for s in list_segments([log_dir])
        if (s.topic, s.partition, s.base_offset) == (topic, partition, base)
    )


def _rows(
    cluster: Cluster, broker: int, topic: str, partition: int, base: int = 0
) -> list[dict[str, Any]]:
    segment = _segment(cluster, broker, topic, partition, base)
    rows: list[dict[str, Any]] = []
    for batch in decode_range_to_arrow(ByteRange(segment, 0, segment.size_bytes)):
        assert batch.schema == LOG_SCHEMA
        rows.extend(batch.to_pylist())
    return rows


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/data/audit/records", "/data/audit/records"),
        ("relative/out", "relative/out"),
        ("file:///data/audit/records", "/data/audit/records"),
        ("file:///data/with%20space", "/data/with space"),
        ("hdfs://namenode:8020/audit/records", None),
        ("s3a://bucket/audit/records", None),
    ],
)
def test_export_writes_records_itself_only_to_local_paths(
    location: str, expected: str | None
) -> None:
    assert local_path(location) == expected


def test_writing_tasks_are_sized_like_sparks_file_splits() -> None:
    mib = 1 << 20
    assert task_bytes(504 * mib, parallelism=2) == 128 * mib  # capped
    assert task_bytes(100 * mib, parallelism=2) == 50 * mib  # every core busy
    assert task_bytes(1 * mib, parallelism=8) == 4 * mib  # not below the open cost


def test_a_task_reads_its_bytes_in_split_sized_ranges(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for partition in range(2):
        directory = root / f"t-{partition}"
        directory.mkdir(parents=True)
        with open(directory / f"{0:020d}.log", "wb") as handle:
            for base in range(0, 3000, 100):
                records = [NewRecord(b"v" * 1000, key=b"k%d" % i) for i in range(100)]
                batch = build_batch(records, base_offset=base)
                handle.write(batch)
    reader = LogSegmentReader({"paths": str(root), "splitBytes": str(1 << 20)})
    default = reader.partitions()
    grouped = reader.partitions_of(lambda total: total)
    assert all(isinstance(p, SegmentRangePartition) for p in [*default, *grouped])
    ranges = [r for p in default for r in p.byte_ranges]  # type: ignore[attr-defined]
    assert len(default) == len(ranges) > 2
    assert len(grouped) == 1
    assert grouped[0].byte_ranges == ranges  # type: ignore[attr-defined]
    # Ranges are cut at the first batch boundary past the split size.
    assert max(r.end - r.start for r in ranges) <= (1 << 20) + len(batch)


def test_partition_dir_names_follow_kafka() -> None:
    assert parse_partition_dir("orders-3") == ("orders", 3)
    assert parse_partition_dir("my-topic-v2-10") == ("my-topic-v2", 10)
    assert parse_partition_dir("orders-3.0123456789abcdef0123456789abcdef-delete") is None
    assert parse_partition_dir("orders-3-future") is None
    assert parse_partition_dir("meta.properties") is None


def test_log_dir_broker_and_checkpoint(cluster: Cluster, tmp_path: Path) -> None:
    assert open_log_dir(cluster.log_dirs[2]).broker == 2
    legacy = tmp_path / "zk-era"
    legacy.mkdir()
    (legacy / "meta.properties").write_text("version=0\nbroker.id=7\n")
    assert open_log_dir(str(legacy)).broker == 7
    assert open_log_dir(str(tmp_path)).broker == -1
    checkpoint = read_offset_checkpoint(
        os.path.join(cluster.log_dirs[1], "replication-offset-checkpoint")
    )
    assert checkpoint[("orders", 0)] == 30 and checkpoint[("__consumer_offsets", 0)] == 4


def test_split_cuts_at_batch_boundaries_and_covers_the_file(cluster: Cluster) -> None:
    segment = _segment(cluster, 1, "orders", 0)
    ranges = split_segment(segment, split_bytes=200)
    assert len(ranges) > 1
    assert ranges[0].start == 0 and ranges[-1].end == segment.size_bytes
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
    offsets = [
        row["offset"]
        for r in ranges
        for batch in decode_range_to_arrow(r)
        for row in batch.to_pylist()
    ]
    assert offsets == list(range(15))
    groups = pack_ranges(ranges, split_bytes=10**9)
    assert groups == [ranges]


def test_decoded_rows_carry_batch_fields(cluster: Cluster) -> None:
    rows = _rows(cluster, 1, "orders", 0)
    assert [r["offset"] for r in rows] == list(range(15))
    assert [r["compression"] for r in rows[::5]] == ["none", "gzip", "snappy"]
    assert {r["broker"] for r in rows} == {1}
    assert all(r["batch_crc_valid"] and r["batch_error"] is None for r in rows)
    assert rows[3]["key"] is None and rows[4]["key"] == b"orders-0-key-00004"
    assert rows[2]["headers"] == [{"key": "trace", "value": b"t2"}, {"key": "empty", "value": None}]


def test_offset_bounds_skip_whole_batches(cluster: Cluster) -> None:
    segment = _segment(cluster, 1, "orders", 0)
    bounds = OffsetBounds(offset_min=6, offset_max=7)
    rows = [
        row
        for batch in decode_range_to_arrow(ByteRange(segment, 0, segment.size_bytes), bounds)
        for row in batch.to_pylist()
    ]
    assert [r["offset"] for r in rows] == [5, 6, 7, 8, 9]


def test_crc_mismatch_keeps_the_records(cluster: Cluster) -> None:
    flip_byte(cluster.segment_path(2, "orders", 0), b"orders-0-value-00001")
    rows = _rows(cluster, 2, "orders", 0)
    assert [r["offset"] for r in rows] == list(range(15))
    assert [r["batch_crc_valid"] for r in rows] == [False] * 5 + [True] * 10


def test_undecodable_batch_and_torn_tail_are_rows_not_crashes(cluster: Cluster) -> None:
    path = cluster.segment_path(2, "orders", 0)
    segment = _segment(cluster, 2, "orders", 0)
    second_batch = 5  # gzip: corrupt its compressed payload (after the 61-byte header)
    with open(path, "r+b") as handle:
        data = bytearray(handle.read())
        position = 0
        for _ in range(1):
            position += struct.unpack_from(">i", data, position + 8)[0] + 12
        data[position + 70 : position + 78] = b"\xff" * 8
        data += data[:30]  # a torn tail: a batch start with too few bytes
        handle.seek(0)
        handle.write(data)
    segment = _segment(cluster, 2, "orders", 0)
    rows = _rows(cluster, 2, "orders", 0)
    errors = [r for r in rows if r["batch_error"] is not None]
    assert [(r["offset"], r["batch_crc_valid"], r["value"]) for r in errors] == [
        (second_batch, False, None),
        (0, False, None),
    ]
    assert "torn" in errors[1]["batch_error"]
    assert errors[1]["position"] == segment.size_bytes - 30
    assert [r["offset"] for r in rows if r["batch_error"] is None] == [
        0,
        1,
        2,
        3,
        4,
        *range(10, 15),
    ]


def test_batch_rows_digests_agree_across_replicas_and_locate_a_flip(cluster: Cluster) -> None:
    def batch_rows(broker: int) -> list[dict[str, Any]]:
        segment = _segment(cluster, broker, "orders", 0)
        out: list[dict[str, Any]] = []
        for batch in decode_range_batches(ByteRange(segment, 0, segment.size_bytes)):
            assert batch.schema == BATCH_SCHEMA
            out.extend(batch.to_pylist())
        return out

    assert [r["digest"] for r in batch_rows(1)] == [r["digest"] for r in batch_rows(3)]
    flip_byte(cluster.segment_path(3, "orders", 0), b"orders-0-value-00003")
    good, bad = batch_rows(1)[0], batch_rows(3)[0]
    copies = [
        checks.ReplicaBatch(
            broker,
            r["digest"],
            r["last_offset"],
            r["crc_valid"],
            tuple(r["record_offsets"]),
            tuple(r["record_digests"]),
        )
        for broker, r in ((1, good), (2, good), (3, bad))
    ]
    [(divergent, reference)] = checks.divergent_replicas(copies, leader=None)
    assert divergent.broker == 3 and reference.broker == 1
    assert checks.first_divergent_offset(divergent, reference, 0) == 3


def test_two_replicas_prefer_the_valid_crc_then_the_leader() -> None:
    valid = checks.ReplicaBatch(2, 10, 4, True, None, None)
    invalid = checks.ReplicaBatch(1, 11, 4, False, None, None)
    assert checks.divergent_replicas([invalid, valid], leader=1) == [(invalid, valid)]
    other = checks.ReplicaBatch(1, 11, 4, True, None, None)
    assert checks.divergent_replicas([other, valid], leader=1) == [(valid, other)]


def test_index_entry_pointing_inside_a_batch_is_reported(cluster: Cluster) -> None:
    segment = _segment(cluster, 1, "orders", 1)
    assert list(checks.index_violations(segment)) == []
    with open(segment.index_path, "r+b") as handle:
        entries = list(struct.iter_unpack(">ii", handle.read()))
        handle.seek(0)
        handle.write(struct.pack(">ii", entries[1][0], 3))  # not a batch boundary
        handle.write(struct.pack(">ii", 12, entries[1][1]))  # the batch of 5..9, not 12
    violations = list(checks.index_violations(segment))
    assert [(v["check"], v["offset"], v["broker"]) for v in violations] == [
        ("index_mismatch", 9, 1),
        ("index_mismatch", 12, 1),
    ]


def test_time_index_entries_must_match_their_batch(cluster: Cluster) -> None:
    segment = _segment(cluster, 2, "orders", 1)
    assert list(checks.time_index_violations(segment)) == []
    with open(segment.time_index_path, "r+b") as handle:
        entries = list(struct.iter_unpack(">qi", handle.read()))
        assert len(entries) == 3
        handle.seek(0)
        handle.write(struct.pack(">qi", entries[0][0] + 1, entries[0][1]))  # wrong timestamp
        handle.write(struct.pack(">qi", entries[1][0], entries[1][1]))
        handle.write(struct.pack(">qi", entries[2][0], 99))  # beyond the segment
    violations = list(checks.time_index_violations(segment))
    assert [(v["check"], v["offset"], v["broker"]) for v in violations] == [
        ("time_index_mismatch", 4, 2),
        ("time_index_mismatch", 99, 2),
    ]


def test_high_watermark_choice() -> None:
    assert checks.choose_high_watermark({1: 10, 2: 12}, 1, [12, 12])[0] == 10
    assert checks.choose_high_watermark({1: 10, 2: 12}, None, [12, 12])[0] == 12
    assert checks.choose_high_watermark({}, None, [12, 9])[0] == 9


def test_snapshot_shapes_give_the_same_tables() -> None:
    topic = json.dumps(
        {"version": 3, "partitions": {"0": [1, 2]}, "adding_replicas": {}, "removing_replicas": {}}
    )
    state = json.dumps(
        {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 1, "isr": [2]}
    )
    listed = {
        "nodes": [
            {"path": "/brokers/topics/t", "data": topic},
            {"path": "/brokers/topics/t/partitions/0/state", "data": state},
            {"path": "/brokers/ids/x", "data": "{}"},
        ]
    }
    flat = {"/brokers/topics/t": json.loads(topic), "/brokers/topics/t/partitions/0/state": state}
    nested = {
        "tree": {
            "name": "",
            "children": {
                "brokers": {
                    "children": {
                        "topics": {
                            "children": {
                                "t": {
                                    "data": topic,
                                    "children": {
                                        "partitions": {
                                            "children": {
                                                "0": {"children": {"state": {"data": state}}}
                                            }
                                        }
                                    },
                                }
                            }
                        }
                    }
                },
            },
        }
    }
    results = [
        metadata_tables(*znodes_from_snapshot(doc)).rows["partitions"]
        for doc in (listed, flat, nested)
    ]
    assert results[0] == results[1] == results[2]
    [row] = results[0]
    assert (row["leader"], row["isr"], row["under_replicated"], row["leader_epoch"]) == (
        2,
        [2],
        True,
        4,
    )
    bad = metadata_tables(*znodes_from_snapshot({"nodes": {"/brokers/topics/u": "not json"}}))
    assert [e["path"] for e in bad.rows["metadata_errors"]] == ["/brokers/topics/u"]


def test_quorum_export_format_with_a_reassignment_in_progress() -> None:
    tables = metadata_tables(*znodes_from_snapshot(exported_snapshot()))
    assert tables.rows["metadata_errors"] == []
    assert tables.rows["reassignments"] == [
        {
            "topic": "orders",
            "partition": 0,
            "current_replicas": [1, 2, 3, 4],
            "target_replicas": [2, 3, 4],
            "adding_replicas": [4],
            "removing_replicas": [1],
            "source": "/admin/reassign_partitions",
        }
    ]
    assert tables.rows["pending_deletions"] == [{"topic": "events"}]
    assert tables.rows["controller"] == [
        {"controller_id": 1, "controller_epoch": 7, "registered_timestamp_ms": NOW_MS}
    ]
    status = {r["key"]: r["value"] for r in tables.rows["quorum_status"]}
    assert status["leader_id"] == "1" and status["voters"] == "[1, 2, 3]"


def test_offsets_rows_decode_commits_tombstones_and_garbage() -> None:
    key, value = encode_record(OffsetCommitRecord("g", "t", 3, OffsetCommitValue(42, 1, "md", 5)))
    row = decode_offsets_row(key, value, False)
    assert (row["record_type"], row["group_id"], row["commit_topic"], row["commit_partition"]) == (
        "offset_commit",
        "g",
        "t",
        3,
    )
    assert (row["committed_offset"], row["committed_metadata"], row["is_tombstone"]) == (
        42,
        "md",
        False,
    )
    assert decode_offsets_row(key, None, False)["is_tombstone"] is True
    assert decode_offsets_row(b"\x00", b"", False)["record_type"] == "corrupt"
    assert decode_offsets_row(None, None, True)["record_type"] == "control"


def test_commands_fail_in_one_line_without_log_dirs_or_java(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_command([]) == EXIT_CANNOT_RUN
    assert capsys.readouterr().err == "error: --log-dirs is required\n"
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert "Java is not installed" in (check_environment() or "")
    assert check_command(["/tmp"]) == EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Java" in err


def test_build_batch_of_every_codec_round_trips_through_the_decoder(tmp_path: Path) -> None:
    partition_dir = tmp_path / "b" / "codecs-0"
    partition_dir.mkdir(parents=True)
    data = b"".join(
        build_batch([NewRecord(b"x" * 100, key=b"k")], base_offset=i, compression=codec)
        for i, codec in enumerate(CompressionType)
    )
    (partition_dir / f"{0:020d}.log").write_bytes(data)
    [segment] = list_segments([open_log_dir(str(tmp_path / "b"))])
    rows = [
        r for b in decode_range_to_arrow(ByteRange(segment, 0, len(data))) for r in b.to_pylist()
    ]
    assert [r["compression"] for r in rows] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert all(r["value"] == b"x" * 100 for r in rows)


@settings(max_examples=60)
@given(
    prefix=st.binary(max_size=200),
    mutations=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    magic=st.sampled_from([0, 1, 2, 7]),
)
def test_arbitrary_bytes_never_crash_the_readers(
    tmp_path_factory: pytest.TempPathFactory,
    prefix: bytes,
    mutations: list[tuple[int, int]],
    magic: int,
) -> None:
    """Garbage, or a valid batch with bytes overwritten, gives rows (with errors), never an
    exception: a corrupt log must be reported, not crash the Spark task."""
    valid = build_batch(
        [NewRecord(b"v" * 50, key=b"k"), NewRecord(None)],
        base_offset=3,
        compression=CompressionType.GZIP,
    )
    data = bytearray(prefix + valid)
    if len(data) > 16:
        data[16] = magic if prefix == b"" else data[16]
    for position, value in mutations:
        if data:
            data[position % len(data)] = value
    root = tmp_path_factory.mktemp("fuzz")
    (root / "t-0").mkdir()
    (root / "t-0" / f"{0:020d}.log").write_bytes(bytes(data))
    [segment] = list_segments([open_log_dir(str(root))])
    byte_range = ByteRange(segment, 0, len(data))
    rows = [r for b in decode_range_to_arrow(byte_range) for r in b.to_pylist()]
    batches = [r for b in decode_range_batches(byte_range) for r in b.to_pylist()]
    if data:
        assert rows and batches
    assert all(r["batch_crc_valid"] is False for r in rows if r["batch_error"] is not None)
    list(checks.index_violations(segment))


def test_reads_log_dirs_written_by_trafka_log_storage(tmp_path: Path) -> None:
    """The storage engine's own files (segments rolled, sparse offset and time indexes,
    meta.properties, checkpoints, a compacted topic) read back with no violation."""
    from trafka.log.config import LogConfig
    from trafka.log.log_manager import LogManager

    now_ms = 1_700_000_000_000
    plain = LogConfig(segment_bytes=3000, index_interval_bytes=200)
    compact = LogConfig(
        segment_bytes=3000, index_interval_bytes=200, cleanup_policy=frozenset({"compact"})
    )
    manager = LogManager(
        [tmp_path / "d"],
        default_config=plain,
        now_ms=now_ms,
        node_id=5,
        cluster_id="c",
        topic_configs={"users": compact},
    )
    orders = manager.get_or_create("orders", 0)
    users = manager.get_or_create("users", 0)
    for i in range(40):
        codec = list(CompressionType)[i % 5]
        records = [
            NewRecord(b"value-%d-%d" % (i, j) * 3, key=b"k%d" % j, timestamp=now_ms + i)
            for j in range(4)
        ]
        orders.append_as_leader(
            build_batch(records, compression=codec), leader_epoch=2, now_ms=now_ms
        )
        users.append_as_leader(build_batch(records[:1]), leader_epoch=2, now_ms=now_ms)
    for log in (orders, users):
        log.update_high_watermark(log.log_end_offset)
    manager.maintenance(now_ms + 1000)
    manager.write_checkpoints()
    manager.close()

    log_dir = open_log_dir(str(tmp_path / "d"))
    assert log_dir.broker == 5
    segments = list_segments([log_dir])
    assert len([s for s in segments if s.topic == "orders"]) > 2
    rows: list[dict[str, Any]] = []
    for segment in segments:
        assert list(checks.index_violations(segment)) == []
        assert list(checks.time_index_violations(segment)) == []
        rows += [
            r
            for b in decode_range_to_arrow(ByteRange(segment, 0, segment.size_bytes))
            for r in b.to_pylist()
        ]
    assert all(r["batch_crc_valid"] and r["partition_leader_epoch"] == 2 for r in rows)
    order_offsets = [r["offset"] for r in rows if r["topic"] == "orders"]
    assert order_offsets == list(range(160))
    user_offsets = [r["offset"] for r in rows if r["topic"] == "users"]
    assert user_offsets[-1] == 39 and len(user_offsets) < 40  # the cleaner ran
    hws = checks.checkpoint_high_watermarks([log_dir])
    assert hws[("orders", 0)] == {5: 160} and hws[("users", 0)] == {5: 40}
