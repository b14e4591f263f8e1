"""PySpark Python data source over Kafka log segments: `spark.read.format("trafka_log")`.

    df = (spark.read.format("trafka_log")
          .option("paths", "/data/b1,/data/b2")     # log dirs (or .load("/data/b1"))
          .option("splitBytes", str(32 << 20))      # max input partition size (optional)
          .option("minPartitions", "8")             # spread over at least this many tasks
          .option("topics", "orders,payments")      # prune by topic (optional)
          .load())

`format("trafka_batches")` reads the same files as one row per batch
(`trafka.spark.batches.BATCH_SCHEMA`: offsets, CRCs, digests), which the checks use.

Input partitions are byte ranges of at most `splitBytes` (and small enough to make about
`minPartitions` of them, but not below 1 MiB) cut at batch boundaries
(`trafka.spark.logdir.split_segment`: one or more per segment; small segments are packed
together, `pack_ranges`, so a log dir of many small partitions is not thousands of
tasks), decoded in the workers by `trafka.spark.columns`
into Arrow batches of exactly `LOG_SCHEMA`. The broker column comes from each log dir's
meta.properties (-1 if there is none).

Filter pushdown (needs `spark.sql.python.filterPushdown.enabled=true`, which
`trafka.spark.session.build_session` sets): `topic`, `partition`, `broker` (=, IN) prune
input partitions; `offset` (=, <, <=, >, >=) and `timestamp` (>, >=) skip whole batches
without decoding them. Every filter is still returned to Spark, which re-applies it to the
rows, so pruning can only ever be an optimisation.

Not implemented: column pruning (every column is decoded), the time index for timestamp
pruning, streaming reads.
"""

from __future__ import annotations

import datetime
import functools
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from trafka.spark.batches import BATCH_SCHEMA_DDL, decode_range_batches
from trafka.spark.columns import (
    LOG_SCHEMA_DDL,
    PARQUET_COMPRESSION,
    OffsetBounds,
    decode_range_to_arrow,
    write_ranges_parquet,
)
from trafka.spark.logdir import (
    DEFAULT_SPLIT_BYTES,
    ByteRange,
    list_segments,
    open_log_dir,
    pack_ranges,
    split_segment,
)

SOURCE_NAME = "trafka_log"
BATCH_SOURCE_NAME = "trafka_batches"

DEFAULT_MIN_PARTITIONS = 8
MIN_SPLIT_BYTES = 1 << 20

_TIMESTAMP_SLACK_MS = 24 * 3600 * 1000
"""Timestamp pruning keeps a day of slack: naive datetimes' time zone is not known here."""


def parse_paths(options: dict[str, str]) -> list[str]:
    raw = options.get("paths") or options.get("path") or ""
    paths = [p.strip() for p in raw.split(",") if p.strip()]
    if not paths:
        raise ValueError("trafka_log needs option 'paths' (comma-separated log dirs)")
    return paths


@dataclass(slots=True)
class PushedFilters:
    """What the reader learned from Spark's filters (all of them are returned to Spark)."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    brokers: set[int] | None = None
    offset_min: int | None = None
    offset_max: int | None = None
    timestamp_min_ms: int | None = None
    seen: list[str] = field(default_factory=list)

    def bounds(self) -> OffsetBounds:
        return OffsetBounds(self.offset_min, self.offset_max, self.timestamp_min_ms)

    def admits(self, topic: str, partition: int, broker: int) -> bool:
        return (
            (self.topics is None or topic in self.topics)
            and (self.partitions is None or partition in self.partitions)
            and (self.brokers is None or broker in self.brokers)
        )

    def add(self, item: Filter) -> None:
        attribute: tuple[str, ...] = getattr(item, "attribute", ())
        column = attribute[0] if len(attribute) == 1 else None
        if not hasattr(item, "value"):
            return
        if isinstance(item, EqualTo | In):
            values = (item.value,) if isinstance(item, EqualTo) else tuple(item.value)
            self._add_membership(column, values)
        if column == "offset" and isinstance(item.value, int):
            self._add_offset_bound(item, item.value)
        if column == "timestamp" and isinstance(item, GreaterThan | GreaterThanOrEqual):
            self._add_timestamp_bound(item.value)

    def _add_membership(self, column: str | None, values: Sequence[Any]) -> None:
        if column == "topic" and all(isinstance(v, str) for v in values):
            new_topics = {str(v) for v in values}
            self.topics = new_topics if self.topics is None else self.topics & new_topics
            self.seen.append(f"topic in {sorted(new_topics)}")
        elif column in ("partition", "broker") and all(isinstance(v, int) for v in values):
            ints = {int(v) for v in values}
            if column == "partition":
                self.partitions = ints if self.partitions is None else self.partitions & ints
            else:
                self.brokers = ints if self.brokers is None else self.brokers & ints
            self.seen.append(f"{column} in {sorted(ints)}")

    def _add_offset_bound(self, item: Filter, value: int) -> None:
        if isinstance(item, EqualTo | GreaterThan | GreaterThanOrEqual):
            low = value + 1 if isinstance(item, GreaterThan) else value
            self.offset_min = low if self.offset_min is None else max(self.offset_min, low)
        if isinstance(item, EqualTo | LessThan | LessThanOrEqual):
            high = value - 1 if isinstance(item, LessThan) else value
            self.offset_max = high if self.offset_max is None else min(self.offset_max, high)

    def _add_timestamp_bound(self, value: Any) -> None:
        if not isinstance(value, datetime.datetime):
            return
        low_ms = int(value.timestamp() * 1000) - _TIMESTAMP_SLACK_MS
        current = self.timestamp_min_ms
        self.timestamp_min_ms = low_ms if current is None else max(current, low_ms)


class SegmentRangePartition(InputPartition):
    """Byte ranges of segments, read in order by one task (picklable; sent to a worker)."""

    def __init__(self, byte_ranges: list[ByteRange], bounds: OffsetBounds) -> None:
        super().__init__(len(byte_ranges))
        self.byte_ranges = byte_ranges
        self.bounds = bounds


class LogSegmentReader(DataSourceReader):
    """Reads records (`batch_level=False`) or one row per batch (`batch_level=True`)."""

    def __init__(self, options: dict[str, str], *, batch_level: bool = False) -> None:
        self.batch_level = batch_level
        self.paths = parse_paths(options)
        self.split_bytes = int(options.get("splitBytes", DEFAULT_SPLIT_BYTES))
        self.min_partitions = int(options.get("minPartitions", DEFAULT_MIN_PARTITIONS))
        topics = options.get("topics")
        self.option_topics = (
            frozenset(t.strip() for t in topics.split(",") if t.strip()) if topics else None
        )
        self.pushed = PushedFilters()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for item in filters:
            self.pushed.add(item)
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        return self.partitions_of(None)

    def partitions_of(self, task_bytes: Callable[[int], int] | None) -> list[InputPartition]:
        """The input partitions; `task_bytes(total_bytes)`, when given, sets how many bytes
        one task gets (its ranges, each still at most the split size, are read one by one)."""
        log_dirs = [open_log_dir(path) for path in self.paths]
        topics = self.option_topics
        if self.pushed.topics is not None:
            topics = (
                frozenset(self.pushed.topics) if topics is None else topics & self.pushed.topics
            )
        bounds = self.pushed.bounds()
        segments = [
            segment
            for segment in list_segments(log_dirs, topics)
            if self.pushed.admits(segment.topic, segment.partition, int(segment.broker))
        ]
        # Like Spark's file sources: ranges of at most splitBytes, but small enough that
        # the data spreads over at least minPartitions tasks (not below MIN_SPLIT_BYTES).
        total_bytes = sum(segment.size_bytes for segment in segments)
        split_bytes = min(
            self.split_bytes, max(MIN_SPLIT_BYTES, total_bytes // max(1, self.min_partitions))
        )
        ranges: list[ByteRange] = []
        for segment in segments:
            ranges.extend(split_segment(segment, split_bytes))
        if not ranges:
            # Spark needs at least one partition; it yields no rows.
            return [InputPartition(None)]
        per_task = split_bytes if task_bytes is None else max(split_bytes, task_bytes(total_bytes))
        return [SegmentRangePartition(group, bounds) for group in pack_ranges(ranges, per_task)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentRangePartition):
            return
        decode = decode_range_batches if self.batch_level else decode_range_to_arrow
        for byte_range in partition.byte_ranges:
            yield from decode(byte_range, partition.bounds)


class LogSegmentDataSource(DataSource):
    """`format("trafka_log")`: the records of Kafka log dirs, one row per record."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return LOG_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogSegmentReader(dict(self.options))


class BatchDataSource(DataSource):
    """`format("trafka_batches")`: one row per batch of Kafka log dirs (`BATCH_SCHEMA`)."""

    @classmethod
    def name(cls) -> str:
        return BATCH_SOURCE_NAME

    def schema(self) -> str:
        return BATCH_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogSegmentReader(dict(self.options), batch_level=True)


def write_log_parquet(
    spark: SparkSession,
    paths: Sequence[str],
    out: str,
    *,
    options: dict[str, str] | None = None,
    compression: str = PARQUET_COMPRESSION,
) -> int:
    """The `trafka_log` table written as Parquet partitioned by topic, by the Python tasks.

    Same input partitions, rows and file layout as
    `spark.read.format("trafka_log")...write.partitionBy("topic").parquet(out)` (mode
    overwrite), but each Spark task writes its Arrow batches with pyarrow instead of
    handing them to the JVM: the JVM's Arrow-to-row conversion and Parquet encoding cost
    several times the decoding (docs/performance.md, "spark audit export"). Spark still
    schedules the tasks, so it runs wherever Spark runs (`out` must be storage every
    executor can write). Files are staged under `out/_temporary-<id>` and moved into place
    once every task has succeeded; then `_SUCCESS` is written. Returns the rows written.
    Tasks are sized by `task_bytes` (fewer, larger tasks than the reader's input
    partitions: 4 instead of 16 for 500 MB on 2 cores); each reads its ranges one by one.

    Not implemented: pushed-down filters (every record is written), appending.
    """
    reader = LogSegmentReader({**(options or {}), "paths": ",".join(paths)})
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    partitions = [
        p
        for p in reader.partitions_of(functools.partial(task_bytes, parallelism=parallelism))
        if isinstance(p, SegmentRangePartition)
    ]
    staging = os.path.join(out, f"_temporary-{uuid.uuid4().hex}")
    os.makedirs(staging)
    try:
        rows = 0
        if partitions:
            tasks = spark.sparkContext.parallelize(list(enumerate(partitions)), len(partitions))
            write = functools.partial(_write_partition, staging, compression)
            rows = sum(tasks.map(write).collect())
        for name in os.listdir(out):
            path = os.path.join(out, name)
            if path != staging:
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        for name in os.listdir(staging):
            os.replace(os.path.join(staging, name), os.path.join(out, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    with open(os.path.join(out, "_SUCCESS"), "wb"):
        pass
    return rows


MAX_TASK_BYTES = 128 << 20
"""Spark's `spark.sql.files.maxPartitionBytes` default."""
MIN_TASK_BYTES = 4 << 20
"""Spark's `spark.sql.files.openCostInBytes` default."""


def task_bytes(total_bytes: int, *, parallelism: int) -> int:
    """Bytes per writing task, by the rule of Spark's file sources (`maxSplitBytes`):
    min(128 MiB, max(4 MiB, total / parallelism)). Each Spark task costs tens of
    milliseconds of scheduling and worker round trips (docs/performance.md), so the writer
    uses as few as keep every core busy; its reads stay at most `splitBytes` each."""
    return min(MAX_TASK_BYTES, max(MIN_TASK_BYTES, total_bytes // max(1, parallelism)))


def _write_partition(
    staging: str, compression: str, item: tuple[int, SegmentRangePartition]
) -> int:
    index, partition = item
    return write_ranges_parquet(
        partition.byte_ranges, partition.bounds, staging, index, compression=compression
    )
