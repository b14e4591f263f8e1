"""Log engine throughput against plain os.write / os.read of the same bytes (issue 2).

    .venv/bin/python bench/log_append.py [--gigabytes 1.0] [--dir /tmp] [--repeat 1]

Builds batches of 1,000 records of 100 bytes (about 108 KB each, uncompressed) with
`records.build_batch`, then in the same run and directory:

* reference write: `os.write` of every batch, back to back, to one file;
* log append: `PartitionLog.append_as_leader` of the same batches (header + CRC checks,
  offset assignment, epoch stamp, index entries) with Kafka's default topic config;
* reference read: `os.read` of the reference file in 1 MiB chunks;
* log read: `PartitionLog.read(offset, max_bytes=1 MiB, with_bytes=True)` from
  offset 0 to the end, like a consumer with max.partition.fetch.bytes = 1 MiB.

Prints MB/s for each and the ratios log/reference (goal >= 0.8). Nothing is fsynced in
either path (the default flush policy leaves that to the OS, as Kafka does), so both
measure the page cache path. Each run measures the reference and the log back to back, so
the per-run ratio is robust to a machine shared with other work; the median ratio over
`--repeat` runs is reported, with the best MB/s of each.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch

RECORDS_PER_BATCH = 1000
RECORD_BYTES = 100
READ_CHUNK = 1 << 20
DISTINCT_BATCHES = 16


def make_batches(count: int, rng: random.Random) -> list[bytes]:
    templates = []
    for _ in range(min(count, DISTINCT_BATCHES)):
        records = [
            NewRecord(rng.randbytes(RECORD_BYTES), timestamp=1_700_000_000_000)
            for _ in range(RECORDS_PER_BATCH)
        ]
        templates.append(build_batch(records))
    return [templates[i % len(templates)] for i in range(count)]


def reference_write(path: Path, batches: list[bytes]) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for data in batches:
            os.write(fd, data)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def reference_read(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, READ_CHUNK):
            total += len(chunk)
    finally:
        os.close(fd)
    return time.perf_counter() - start, total


def log_append(directory: Path, batches: list[bytes]) -> tuple[float, PartitionLog]:
    log = PartitionLog.open(directory, LogConfig(), now_ms=1_700_000_000_000)
    start = time.perf_counter()
    for data in batches:
        log.append_as_leader(data, leader_epoch=0, now_ms=1_700_000_000_000)
    return time.perf_counter() - start, log


def log_read(log: PartitionLog) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    offset = 0
    end = log.log_end_offset
    while offset < end:
        fetched = log.read(offset, max_bytes=READ_CHUNK, with_bytes=True)
        data = fetched.to_bytes()
        total += len(data)
        offset = fetched.next_offset
    return time.perf_counter() - start, total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(1)
    one = make_batches(1, rng)[0]
    count = max(1, int(args.gigabytes * 1e9 / len(one)))
    batches = make_batches(count, rng)
    total_bytes = sum(len(b) for b in batches)
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
        f"python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(
        f"{count} batches x {len(one)} bytes = {total_bytes / 1e9:.3f} GB "
        f"({RECORDS_PER_BATCH} records x {RECORD_BYTES} B per batch)"
    )
    work = Path(tempfile.mkdtemp(prefix="trafka-bench-", dir=args.dir))
    runs: list[dict[str, float]] = []
    try:
        for _ in range(args.repeat):
            seconds: dict[str, float] = {}
            reference = work / "reference.bin"
            seconds["ref_write"] = reference_write(reference, batches)
            shutil.rmtree(work / "bench-0", ignore_errors=True)
            seconds["log_append"], log = log_append(work / "bench-0", batches)
            seconds["ref_read"], read_total = reference_read(reference)
            assert read_total == total_bytes
            seconds["log_read"], read_total = log_read(log)
            assert read_total == total_bytes, (read_total, total_bytes)
            log.close()
            runs.append({name: total_bytes / value / 1e6 for name, value in seconds.items()})
            print(
                "  run: append {log_append:.0f} vs {ref_write:.0f} MB/s, "
                "read {log_read:.0f} vs {ref_read:.0f} MB/s".format(**runs[-1])
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    append_ratios = sorted(r["log_append"] / r["ref_write"] for r in runs)
    read_ratios = sorted(r["log_read"] / r["ref_read"] for r in runs)
    best = {name: max(r[name] for r in runs) for name in runs[0]}
    print(
        f"append: log {best['log_append']:6.0f} MB/s  "
        f"os.write {best['ref_write']:6.0f} MB/s (best)  "
        f"ratio median {statistics.median(append_ratios):.2f} "
        f"(runs {', '.join(f'{r:.2f}' for r in append_ratios)})"
    )
    print(
        f"read:   log {best['log_read']:6.0f} MB/s  "
        f"os.read  {best['ref_read']:6.0f} MB/s (best)  "
        f"ratio median {statistics.median(read_ratios):.2f} "
        f"(runs {', '.join(f'{r:.2f}' for r in read_ratios)})"
    )


if __name__ == "__main__":
    main()
