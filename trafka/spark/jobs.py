"""The Spark side of the audit: DataFrames over log dirs and metadata, `export` and `check`.

`run_export` writes (Parquet by default, or JSON) under `out/`:

    records/topic=<t>/...        one row per record per replica (`LOG_SCHEMA`), by topic
    consumer_offsets/            the decoded `__consumer_offsets` records (if any)
    committed_offsets/           latest committed offset per (group, topic, partition)
    log_dirs/                    path, broker, cluster id of each log dir
    metadata/<table>/            the quorum snapshot's tables (`--metadata`, or read live
                                 with `--bootstrap-server`)

`run_check` runs `trafka.spark.checks` and returns an `AuditReport`.

Progress lines go to stderr (`[audit] ...`); Spark's console progress bar shows stages.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from trafka.spark import checks
from trafka.spark.checks import (
    ALWAYS_COMPACTED,
    ERROR,
    WARNING,
    AuditReport,
    ReplicaBatch,
    ReplicaSummary,
    Violation,
)
from trafka.spark.logdir import LogDir, list_segments, open_log_dir
from trafka.spark.metadata import (
    TABLES,
    MetadataTables,
    read_snapshot_document,
    tables_from_document,
)
from trafka.spark.offsets import (
    INPUT_COLUMNS,
    OFFSETS_SCHEMA_DDL,
    OFFSETS_TOPIC,
    decode_offsets_arrow,
)
from trafka.spark.source import BATCH_SOURCE_NAME, SOURCE_NAME, write_log_parquet

FORMATS = ("parquet", "json")
MAX_COLLECTED_VIOLATIONS = 10_000
"""Per check: a broken log dir must not flood the driver; the count is still reported."""


def progress(message: str) -> None:
    print(f"[audit] {message}", file=sys.stderr, flush=True)


def open_log_dirs(paths: Sequence[str]) -> list[LogDir]:
    log_dirs = [open_log_dir(path) for path in paths]
    for log_dir in log_dirs:
        if not os.path.isdir(log_dir.path):
            raise FileNotFoundError(f"log dir {log_dir.path} does not exist")
    return log_dirs


def log_frame(spark: SparkSession, paths: Sequence[str], topics: Sequence[str] = ()) -> DataFrame:
    reader = spark.read.format(SOURCE_NAME).option("paths", ",".join(paths))
    if topics:
        reader = reader.option("topics", ",".join(topics))
    return reader.load()


def batch_frame(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    return spark.read.format(BATCH_SOURCE_NAME).option("paths", ",".join(paths)).load()


def consumer_offsets_frame(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """`__consumer_offsets` records decoded into offset-commit and group-metadata columns."""
    records = log_frame(spark, paths, (OFFSETS_TOPIC,)).where(F.col("topic") == OFFSETS_TOPIC)
    return records.select(*INPUT_COLUMNS).mapInArrow(decode_offsets_arrow, OFFSETS_SCHEMA_DDL)


def committed_offsets_frame(offsets: DataFrame) -> DataFrame:
    """The latest offset commit per (group, topic, partition), tombstones dropped.

    Replicas of `__consumer_offsets` hold the same records; the highest log offset wins.
    """
    latest = Window.partitionBy("group_id", "commit_topic", "commit_partition").orderBy(
        F.col("offset").desc(), F.col("broker")
    )
    return (
        offsets.where(F.col("record_type") == "offset_commit")
        .withColumn("rank", F.row_number().over(latest))
        .where((F.col("rank") == 1) & ~F.col("is_tombstone"))
        .select(
            "group_id",
            F.col("commit_topic").alias("topic"),
            F.col("commit_partition").alias("partition"),
            "committed_offset",
            "committed_leader_epoch",
            "committed_metadata",
            "commit_timestamp",
            "expire_timestamp",
            F.col("offset").alias("record_offset"),
            F.col("broker").alias("record_broker"),
        )
    )


def load_metadata(
    metadata_path: str | None = None, metadata_document: Any = None
) -> MetadataTables | None:
    """The metadata tables from a snapshot file or an already-read snapshot document (the
    live read of `--bootstrap-server`); None without either. Both at once is a ValueError."""
    if metadata_path is not None and metadata_document is not None:
        raise ValueError("give a metadata snapshot path or a document, not both")
    if metadata_path is not None:
        progress(f"reading metadata from {metadata_path}")
        return tables_from_document(read_snapshot_document(metadata_path))
    if metadata_document is not None:
        status = metadata_document.get("status") if isinstance(metadata_document, dict) else None
        where = status.get("bootstrap_server") if isinstance(status, dict) else None
        progress(f"metadata read from {where or 'a snapshot document'}")
        return tables_from_document(metadata_document)
    return None


def table_frame(spark: SparkSession, ddl: str, rows: list[dict[str, Any]]) -> DataFrame:
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    data = [tuple(r.get(n) for n in schema.names) for r in rows]
    frame: DataFrame = spark.createDataFrame(data, schema)
    return frame


def metadata_frames(spark: SparkSession, tables: MetadataTables) -> dict[str, DataFrame]:
    return {name: table_frame(spark, TABLES[name], tables.rows[name]) for name in TABLES}


def _write(frame: DataFrame, path: str, fmt: str, partition_by: Sequence[str] = ()) -> None:
    writer = frame.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if fmt == "parquet":
        writer.parquet(path)
    else:
        writer.json(path)


def _read(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    return spark.read.parquet(path) if fmt == "parquet" else spark.read.json(path)


def local_path(location: str) -> str | None:
    """The file-system path of `location` when it is local (a plain path or a `file:` URI),
    else None (hdfs://, s3a://, ...: only Spark's own writers reach those)."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme == "file":
        return urllib.parse.unquote(parsed.path)
    if "://" in location:
        return None
    return location


def _write_records(spark: SparkSession, paths: Sequence[str], out: str, fmt: str) -> int:
    """The records table under `out` partitioned by topic; returns its row count.

    Parquet to a local (or mounted shared) path is written by the Spark tasks themselves
    with pyarrow (`write_log_parquet`: same rows, schema and layout as Spark's writer, at
    about 4x the rate, docs/performance.md); JSON, and Parquet to a URI of another file
    system, go through Spark's writer."""
    target = local_path(out)
    if fmt == "parquet" and target is not None:
        return write_log_parquet(spark, paths, target)
    _write(log_frame(spark, paths), out, fmt, ("topic",))
    return _read(spark, out, fmt).count()


def run_export(
    spark: SparkSession,
    paths: Sequence[str],
    out: str,
    *,
    fmt: str = "parquet",
    metadata_path: str | None = None,
    metadata_document: Any = None,
) -> dict[str, Any]:
    """Export records, consumer offsets, log dirs and metadata; returns row counts.

    The metadata comes from `metadata_path` (a snapshot file) or `metadata_document` (the
    same document already read, e.g. live from a node), or is left out.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    started = time.monotonic()
    tables = load_metadata(metadata_path, metadata_document)
    log_dirs = open_log_dirs(paths)
    segments = list_segments(log_dirs)
    total_bytes = sum(s.size_bytes for s in segments)
    brokers = ",".join(str(d.broker) for d in log_dirs)
    progress(
        f"{len(log_dirs)} log dir(s) (brokers {brokers}): {len(segments)} segment(s), "
        f"{total_bytes / 1e6:.1f} MB"
    )
    counts: dict[str, Any] = {}
    progress(f"writing records ({fmt}, partitioned by topic) to {out}/records")
    counts["records"] = _write_records(spark, paths, os.path.join(out, "records"), fmt)
    _write(
        table_frame(
            spark,
            "path string, broker int, cluster_id string",
            [
                {"path": d.path, "broker": int(d.broker), "cluster_id": d.cluster_id}
                for d in log_dirs
            ],
        ),
        os.path.join(out, "log_dirs"),
        fmt,
    )
    if any(s.topic == OFFSETS_TOPIC for s in segments):
        progress("decoding __consumer_offsets")
        offsets = consumer_offsets_frame(spark, paths)
        _write(offsets, os.path.join(out, "consumer_offsets"), fmt)
        committed_path = os.path.join(out, "committed_offsets")
        _write(
            committed_offsets_frame(_read(spark, os.path.join(out, "consumer_offsets"), fmt)),
            committed_path,
            fmt,
        )
        counts["committed_offsets"] = _read(spark, committed_path, fmt).count()
    if tables is not None:
        progress("writing metadata tables")
        for name, frame in metadata_frames(spark, tables).items():
            _write(frame.coalesce(1), os.path.join(out, "metadata", name), fmt)
            counts[f"metadata.{name}"] = len(tables.rows[name])
    elapsed = time.monotonic() - started
    progress(f"done in {elapsed:.1f} s: {counts['records']} record row(s)")
    counts["seconds"] = round(elapsed, 3)
    return counts


# --------------------------------------------------------------------------- check


def _violation(
    check: str, row: Any, detail: str, *, severity: str = ERROR, offset: Any = None
) -> Violation:
    return Violation(
        check=check,
        severity=severity,
        topic=row["topic"],
        partition=row["partition"],
        broker=row["broker"],
        offset=row["base_offset"] if offset is None else offset,
        detail=detail,
    )


def _collect(frame: DataFrame) -> list[Any]:
    return frame.limit(MAX_COLLECTED_VIOLATIONS).collect()


def run_check(
    spark: SparkSession,
    paths: Sequence[str],
    *,
    metadata_path: str | None = None,
    metadata_document: Any = None,
) -> AuditReport:
    """Run every check over the log dirs (and the metadata: a snapshot file or an
    already-read snapshot document, if given)."""
    tables = load_metadata(metadata_path, metadata_document)
    report = AuditReport()
    log_dirs = open_log_dirs(paths)
    report.log_dirs = [
        {"path": d.path, "broker": int(d.broker), "cluster_id": d.cluster_id} for d in log_dirs
    ]
    segments = list_segments(log_dirs)
    progress(f"{len(log_dirs)} log dir(s), {len(segments)} segment(s): reading batches")
    partitions_meta = (
        {(r["topic"], r["partition"]): r for r in tables.rows["partitions"]} if tables else {}
    )
    compacted = set(ALWAYS_COMPACTED)
    if tables is not None:
        for row in tables.rows["topics"]:
            if "compact" in row["configs"].get("cleanup.policy", ""):
                compacted.add(row["topic"])

    batches = batch_frame(spark, paths).cache()
    valid = batches.where(F.col("error").isNull())
    summaries = [
        ReplicaSummary(
            r["topic"],
            r["partition"],
            r["broker"],
            r["start"],
            r["end"],
            r["batches"],
            r["records"],
        )
        for r in valid.groupBy("topic", "partition", "broker")
        .agg(
            F.min("base_offset").alias("start"),
            (F.max("last_offset") + 1).alias("end"),
            F.count(F.lit(1)).alias("batches"),
            F.sum("records_count").alias("records"),
        )
        .collect()
    ]
    # Replicas whose every batch is corrupt still exist: they show up with no offsets.
    seen = {(s.topic, s.partition, s.broker) for s in summaries}
    for seg in segments:
        replica_key = (seg.topic, seg.partition, int(seg.broker))
        if replica_key not in seen:
            seen.add(replica_key)
            summaries.append(
                ReplicaSummary(seg.topic, seg.partition, int(seg.broker), None, None, 0, 0)
            )
    by_partition: dict[tuple[str, int], list[ReplicaSummary]] = {}
    for summary in summaries:
        by_partition.setdefault((summary.topic, summary.partition), []).append(summary)
    checkpoint_hws = checks.checkpoint_high_watermarks(log_dirs)
    high_watermarks: dict[tuple[str, int], int] = {}
    for key, replicas in sorted(by_partition.items()):
        meta = partitions_meta.get(key)
        leader = meta["leader"] if meta and meta["leader"] >= 0 else None
        log_ends = [r.log_end_offset or 0 for r in replicas]
        hw, source = checks.choose_high_watermark(checkpoint_hws.get(key, {}), leader, log_ends)
        if hw is not None:
            high_watermarks[key] = hw
        report.partitions.append(
            {
                "topic": key[0],
                "partition": key[1],
                "high_watermark": hw,
                "high_watermark_source": source,
                "leader": leader,
                "isr": meta["isr"] if meta else None,
                "replicas": [
                    {
                        "broker": r.broker,
                        "log_start_offset": r.log_start_offset,
                        "log_end_offset": r.log_end_offset,
                        "batches": r.batches,
                        "records": r.records,
                    }
                    for r in sorted(replicas, key=lambda r: r.broker)
                ],
            }
        )

    progress("checking CRCs and framing")
    for row in _collect(batches.where(F.col("error").isNotNull() | ~F.col("crc_valid"))):
        if row["error"] is not None:
            detail = f"{row['segment']} position {row['position']}: {row['error']}"
        else:
            detail = (
                f"{row['segment']} position {row['position']}: stored CRC {row['crc']} does not "
                f"match the batch (offsets {row['base_offset']}..{row['last_offset']})"
            )
        report.violations.append(_violation("corrupt_batch", row, detail))

    corrupt_ranges = {
        (v.topic, v.partition, v.broker, v.offset): index
        for index, v in enumerate(report.violations)
        if v.check == "corrupt_batch"
    }
    progress("checking offset order")
    _check_offset_order(valid, compacted, report)
    progress("comparing replicas below the high watermark")
    divergent = _check_divergence(
        spark, batches, high_watermarks, partitions_meta, compacted, report
    )
    _locate_corrupt_records(report, corrupt_ranges, divergent)
    progress("checking offset indexes")
    _check_indexes(spark, segments, report)
    _check_replicas_against_high_watermark(by_partition, high_watermarks, partitions_meta, report)
    if tables is None:
        report.checks_skipped.append(
            "isr_below_high_watermark, under_replicated: no --metadata or --bootstrap-server"
        )
    if any(s.topic == OFFSETS_TOPIC for s in segments):
        progress("checking committed offsets")
        _check_committed_offsets(spark, paths, by_partition, report)
    batches.unpersist()
    report.violations.sort(
        key=lambda v: (v.topic, v.partition, v.check, v.broker or -1, v.offset or -1)
    )
    return report


def _locate_corrupt_records(
    report: AuditReport,
    corrupt: dict[tuple[str, int, int | None, int | None], int],
    divergent: dict[tuple[str, int, int | None, int | None], int],
) -> None:
    """A corrupt batch that still decodes names the record that differs from the other
    replicas (found by the divergence check), not just the batch's base offset."""
    for key, index in corrupt.items():
        if key in divergent:
            current = report.violations[index]
            report.violations[index] = dataclasses.replace(current, offset=divergent[key])


def _check_offset_order(valid: DataFrame, compacted: set[str], report: AuditReport) -> None:
    order = Window.partitionBy("topic", "partition", "broker").orderBy(
        "segment_base_offset", "position"
    )
    ordered = valid.withColumn("prev_last", F.lag("last_offset").over(order))
    for row in _collect(ordered.where(F.col("base_offset") <= F.col("prev_last"))):
        report.violations.append(
            _violation(
                "offset_overlap",
                row,
                f"{row['segment']} position {row['position']}: batch {row['base_offset']}.."
                f"{row['last_offset']} starts at or below the previous batch's last offset "
                f"{row['prev_last']}",
            )
        )
    gaps = ordered.where(F.col("base_offset") > F.col("prev_last") + 1)
    if compacted:
        gaps = gaps.where(~F.col("topic").isin(sorted(compacted)))
    for row in _collect(gaps):
        report.violations.append(
            _violation(
                "offset_gap",
                row,
                f"{row['segment']}: offsets {row['prev_last'] + 1}..{row['base_offset'] - 1} "
                "missing (topic not compacted)",
                offset=row["prev_last"] + 1,
            )
        )
    for row in _collect(valid.where(F.col("base_offset") < F.col("segment_base_offset"))):
        report.violations.append(
            _violation(
                "segment_base_offset",
                row,
                f"{row['segment']} position {row['position']}: batch offset "
                f"{row['base_offset']} below the segment's base offset",
            )
        )


def _check_divergence(
    spark: SparkSession,
    batches: DataFrame,
    high_watermarks: dict[tuple[str, int], int],
    partitions_meta: dict[tuple[str, int], dict[str, Any]],
    compacted: set[str],
    report: AuditReport,
) -> dict[tuple[str, int, int | None, int | None], int]:
    """Report divergent copies; return {(topic, partition, broker, base offset): first
    differing offset} of each.

    Compacted topics are compared record by record (offsets present on several replicas
    must hold the same record): each broker's log cleaner rewrites batches on its own, so
    their batch layouts legitimately differ.
    """
    divergent: dict[tuple[str, int, int | None, int | None], int] = {}
    if not high_watermarks:
        return divergent
    hw_frame = table_frame(
        spark,
        "topic string, partition int, high_watermark long",
        [
            {"topic": t, "partition": p, "high_watermark": hw}
            for (t, p), hw in high_watermarks.items()
        ],
    )
    below = (
        batches.where(F.col("digest").isNotNull() & F.col("base_offset").isNotNull())
        .join(F.broadcast(hw_frame), ["topic", "partition"])
        .where(F.col("base_offset") < F.col("high_watermark"))
    )
    if compacted:
        divergent.update(
            _check_compacted_divergence(below.where(F.col("topic").isin(sorted(compacted))), report)
        )
        below = below.where(~F.col("topic").isin(sorted(compacted)))
    groups = (
        below.groupBy("topic", "partition", "base_offset")
        .agg(
            F.countDistinct("digest").alias("digests"),
            F.collect_list(
                F.struct(
                    "broker",
                    "digest",
                    "last_offset",
                    "crc_valid",
                    "record_offsets",
                    "record_digests",
                )
            ).alias("copies"),
        )
        .where(F.col("digests") > 1)
    )
    for group in _collect(groups):
        key = (group["topic"], group["partition"])
        meta = partitions_meta.get(key)
        leader = meta["leader"] if meta else None
        copies = [
            ReplicaBatch(
                c["broker"],
                c["digest"],
                c["last_offset"],
                bool(c["crc_valid"]),
                None if c["record_offsets"] is None else tuple(c["record_offsets"]),
                None if c["record_digests"] is None else tuple(c["record_digests"]),
            )
            for c in group["copies"]
        ]
        for copy, reference in checks.divergent_replicas(copies, leader):
            offset = checks.first_divergent_offset(copy, reference, group["base_offset"])
            divergent[(key[0], key[1], copy.broker, group["base_offset"])] = offset
            report.violations.append(
                Violation(
                    "replica_divergence",
                    ERROR,
                    group["topic"],
                    group["partition"],
                    copy.broker,
                    offset,
                    f"batch at base offset {group['base_offset']} differs from broker "
                    f"{reference.broker}'s copy (below high watermark "
                    f"{high_watermarks[key]}); first differing offset {offset}",
                )
            )
    return divergent


def _check_compacted_divergence(
    below: DataFrame, report: AuditReport
) -> dict[tuple[str, int, int | None, int | None], int]:
    records = below.where(F.col("record_offsets").isNotNull()).select(
        "topic",
        "partition",
        "broker",
        "base_offset",
        "crc_valid",
        "high_watermark",
        F.explode(F.arrays_zip("record_offsets", "record_digests")).alias("record"),
    )
    groups = (
        records.where(F.col("record.record_offsets") < F.col("high_watermark"))
        .groupBy("topic", "partition", F.col("record.record_offsets").alias("offset"))
        .agg(
            F.countDistinct("record.record_digests").alias("digests"),
            F.collect_list(
                F.struct(
                    "broker",
                    "base_offset",
                    "crc_valid",
                    F.col("record.record_digests").alias("digest"),
                )
            ).alias("copies"),
        )
        .where(F.col("digests") > 1)
    )
    divergent: dict[tuple[str, int, int | None, int | None], int] = {}
    for group in _collect(groups):
        bases = {c["broker"]: c["base_offset"] for c in group["copies"]}
        copies = [
            ReplicaBatch(
                c["broker"], c["digest"], group["offset"], bool(c["crc_valid"]), None, None
            )
            for c in group["copies"]
        ]
        for copy, reference in checks.divergent_replicas(copies, None):
            key = (group["topic"], group["partition"], copy.broker, bases[copy.broker])
            divergent[key] = min(divergent.get(key, group["offset"]), group["offset"])
            report.violations.append(
                Violation(
                    "replica_divergence",
                    ERROR,
                    group["topic"],
                    group["partition"],
                    copy.broker,
                    group["offset"],
                    f"record at offset {group['offset']} differs from broker "
                    f"{reference.broker}'s copy (compacted topic: compared per record)",
                )
            )
    return divergent


def _check_indexes(spark: SparkSession, segments: list[Any], report: AuditReport) -> None:
    if not segments:
        return
    slices = max(1, min(len(segments), spark.sparkContext.defaultParallelism * 2))
    rows = (
        spark.sparkContext.parallelize(segments, slices)
        .flatMap(
            lambda segment: [
                *checks.index_violations(segment),
                *checks.time_index_violations(segment),
            ]
        )
        .take(MAX_COLLECTED_VIOLATIONS)
    )
    report.violations.extend(Violation(**row) for row in rows)


def _check_replicas_against_high_watermark(
    by_partition: dict[tuple[str, int], list[ReplicaSummary]],
    high_watermarks: dict[tuple[str, int], int],
    partitions_meta: dict[tuple[str, int], dict[str, Any]],
    report: AuditReport,
) -> None:
    for key, replicas in sorted(by_partition.items()):
        hw = high_watermarks.get(key)
        meta = partitions_meta.get(key)
        isr = set(meta["isr"] or ()) if meta else set()
        for replica in replicas:
            log_end = replica.log_end_offset or 0
            if hw is None or log_end >= hw:
                continue
            in_isr = replica.broker in isr
            report.violations.append(
                Violation(
                    "isr_below_high_watermark" if in_isr else "replica_below_high_watermark",
                    ERROR if in_isr else WARNING,
                    key[0],
                    key[1],
                    replica.broker,
                    log_end,
                    f"log ends at {log_end}, below the high watermark {hw}"
                    + (" although the replica is in the ISR" if in_isr else ""),
                )
            )
    for key, meta in sorted(partitions_meta.items()):
        if meta["isr"] is None:
            continue  # no state znode: the ISR is unknown, not empty
        isr = set(meta["isr"])
        for broker in meta["replicas"]:
            if broker in isr:
                continue
            follower_end = next(
                (r.log_end_offset for r in by_partition.get(key, []) if r.broker == broker), None
            )
            report.violations.append(
                Violation(
                    "under_replicated",
                    ERROR,
                    key[0],
                    key[1],
                    broker,
                    follower_end,
                    f"replica {broker} is not in the ISR {sorted(isr)} "
                    f"(replicas {meta['replicas']}, leader {meta['leader']})",
                )
            )


def _check_committed_offsets(
    spark: SparkSession,
    paths: Sequence[str],
    by_partition: dict[tuple[str, int], list[ReplicaSummary]],
    report: AuditReport,
) -> None:
    committed = committed_offsets_frame(consumer_offsets_frame(spark, paths))
    for row in _collect(committed):
        replicas = by_partition.get((row["topic"], row["partition"]))
        if not replicas or row["committed_offset"] is None:
            continue
        log_end = max(r.log_end_offset or 0 for r in replicas)
        if row["committed_offset"] > log_end:
            # A warning about the client's data, not a broker inconsistency: Kafka accepts an
            # OffsetCommit of any offset, also above the log end (the consumer then resets
            # by auto.offset.reset), and so does trafka.
            report.violations.append(
                Violation(
                    "committed_offset_beyond_log_end",
                    WARNING,
                    row["topic"],
                    row["partition"],
                    row["record_broker"],
                    row["committed_offset"],
                    f"group {row['group_id']!r} committed offset {row['committed_offset']} "
                    f"but the log ends at {log_end} (record at __consumer_offsets offset "
                    f"{row['record_offset']}; client data: Kafka accepts any committed offset)",
                )
            )
