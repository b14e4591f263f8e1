"""Benchmark: audit export throughput on Spark local[2] vs a single-process read via trafka.log.

    .venv/bin/python bench/spark_export.py [--records 1000000] [--partitions 4]
                                           [--master local[2]] [--keep DIR]

Writes a log dir of `--records` records (uncompressed v2 batches of 1,000 records,
100-byte values, 16-byte keys) over `--partitions` partitions, then measures in the same
run:

1. reference: one Python process decodes every batch of the same segments with
   `trafka.log.records.decode_batch_columns` (the log layer's fastest decoder) and counts
   the records;
2. Spark `trafka_log` source, `write.format("noop")` (decode + Arrow + Spark rows, no I/O);
3. Spark `trafka_log` source, Parquet write partitioned by topic (the `export` job's step).

Prints records/s for each and the ratios 2/1 and 3/1. Goals (issue 7): >= 1M records/s
and >= 1.5x the single process on local[2]. The Spark session start is not
timed; each figure is the best of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

from trafka.log.batch import LOG_OVERHEAD
from trafka.log.records import NewRecord, build_batch, decode_batch_columns

RECORDS_PER_BATCH = 1000
T = TypeVar("T")


def write_log_dir(root: str, records: int, partitions: int) -> list[str]:
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "meta.properties"), "w") as handle:
        handle.write("version=1\nnode.id=1\ncluster.id=bench\n")
    per_partition = records // partitions
    value = b"v" * 100
    paths = []
    for partition in range(partitions):
        directory = os.path.join(root, f"bench-{partition}")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{0:020d}.log")
        with open(path, "wb") as handle:
            template = [
                NewRecord(value, key=b"key-%011d" % i, timestamp=1_700_000_000_000 + i)
                for i in range(RECORDS_PER_BATCH)
            ]
            for base in range(0, per_partition, RECORDS_PER_BATCH):
                handle.write(build_batch(template, base_offset=base, producer_id=1))
        paths.append(path)
    return paths


def best_of(repeat: int, action: Callable[[], T]) -> tuple[T, float]:
    """The result and the best wall time of `repeat` runs (the machine is shared)."""
    best = float("inf")
    result: T | None = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - started)
    assert result is not None or repeat > 0
    return result, best  # type: ignore[return-value]


def reference_read(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            data = handle.read()
        pos = 0
        while pos < len(data):
            header, columns = decode_batch_columns(data, pos)
            total += len(columns)
            pos += header.batch_length + LOG_OVERHEAD
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", help="write the log dir here and keep it")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = parser.parse_args()

    root = args.keep or tempfile.mkdtemp(prefix="trafka-bench-")
    try:
        log_dir = os.path.join(root, "logs")
        started = time.perf_counter()
        paths = write_log_dir(log_dir, args.records, args.partitions)
        size = sum(os.path.getsize(p) for p in paths)
        print(
            f"wrote {args.records} records, {size / 1e6:.0f} MB in "
            f"{time.perf_counter() - started:.1f} s"
        )

        count, reference_s = best_of(args.repeat, lambda: reference_read(paths))
        reference_rate = count / reference_s
        print(
            f"reference (1 process, trafka.log): {count} records in {reference_s:.2f} s = "
            f"{reference_rate:,.0f} records/s"
        )

        from trafka.spark.session import build_session

        spark = build_session(args.master, "trafka-bench")
        frame = spark.read.format("trafka_log").option("paths", log_dir).load()
        frame.limit(1).collect()  # warm up the Python workers

        _, noop_s = best_of(
            args.repeat, lambda: frame.write.format("noop").mode("overwrite").save()
        )
        noop_rate = count / noop_s
        print(
            f"spark {args.master} noop:    {noop_s:.2f} s = {noop_rate:,.0f} records/s "
            f"({noop_rate / reference_rate:.2f}x reference)"
        )

        out = os.path.join(root, "out")
        _, parquet_s = best_of(
            args.repeat, lambda: frame.write.mode("overwrite").partitionBy("topic").parquet(out)
        )
        parquet_rate = count / parquet_s
        print(
            f"spark {args.master} parquet: {parquet_s:.2f} s = {parquet_rate:,.0f} records/s "
            f"({parquet_rate / reference_rate:.2f}x reference)"
        )
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
