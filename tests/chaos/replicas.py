"""Do the replicas agree byte for byte below the high watermark? (After a chaos run, with
every node stopped.)

Built on the audit's own readers (`trafka.spark.logdir`, `trafka.spark.checks`: no Spark, no
JVM): for every partition of the given topics, the high watermark is chosen as
`ktool audit check` chooses it without metadata (the largest `replication-offset-checkpoint`
entry, else the smallest log end), and every batch that ends below it must be the same
bytes in every replica that has the partition. A replica whose log ends below the high
watermark is reported too (`behind`): after a run that healed and let the ISR fill up, it
means a replica lost or never got acknowledged data.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trafka.log.batch import LOG_OVERHEAD, parse_header
from trafka.spark.checks import checkpoint_high_watermarks, choose_high_watermark
from trafka.spark.logdir import batch_positions, list_segments, open_log_dir


@dataclass
class ReplicaCheck:
    divergences: list[dict[str, Any]] = field(default_factory=list)
    behind: list[dict[str, Any]] = field(default_factory=list)
    partitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    compared_batches: int = 0

    @property
    def ok(self) -> bool:
        return not self.divergences


def _read_batches(path: str, size: int) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of each batch of one segment."""
    positions, _end = batch_positions(path, size)
    result = []
    with open(path, "rb") as handle:
        for position in positions:
            handle.seek(position)
            head = handle.read(LOG_OVERHEAD)
            length = int.from_bytes(head[8:12], "big", signed=True)
            data = head + handle.read(length)
            try:
                header = parse_header(data)
            except Exception:  # a legacy or undecodable entry: compare its bytes anyway
                base = int.from_bytes(data[:8], "big", signed=True)
                result.append((base, base, data))
                continue
            result.append((header.base_offset, header.base_offset + header.last_offset_delta, data))
    return result


def check_replicas(log_dir_paths: Iterable[str], topics: Iterable[str]) -> ReplicaCheck:
    log_dirs = [open_log_dir(path) for path in log_dir_paths if os.path.isdir(path)]
    wanted = frozenset(topics)
    report = ReplicaCheck()
    # (topic, partition) -> broker -> [(base, last, bytes)]
    replicas: dict[tuple[str, int], dict[int, list[tuple[int, int, bytes]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for segment in list_segments(log_dirs, wanted):
        replicas[(segment.topic, segment.partition)][int(segment.broker)].extend(
            _read_batches(segment.path, segment.size_bytes)
        )
    checkpoints = checkpoint_high_watermarks(log_dirs)
    for key in sorted(replicas):
        copies = replicas[key]
        log_ends = {b: (batches[-1][1] + 1 if batches else 0) for b, batches in copies.items()}
        hw, source = choose_high_watermark(checkpoints.get(key, {}), None, list(log_ends.values()))
        name = f"{key[0]}-{key[1]}"
        report.partitions[name] = {"high_watermark": hw, "source": source, "log_ends": log_ends}
        if hw is None:
            continue
        for broker, end in sorted(log_ends.items()):
            if end < hw:
                report.behind.append(
                    {
                        "topic": key[0],
                        "partition": key[1],
                        "broker": broker,
                        "log_end": end,
                        "high_watermark": hw,
                    }
                )
        by_base: dict[int, dict[int, bytes]] = defaultdict(dict)
        for broker, batches in copies.items():
            for base, last, data in batches:
                if last < hw:
                    by_base[base][broker] = data
        for base in sorted(by_base):
            versions = by_base[base]
            report.compared_batches += 1
            distinct = {data for data in versions.values()}
            missing = [b for b in copies if b not in versions and log_ends[b] > base]
            if len(distinct) > 1 or missing:
                report.divergences.append(
                    {
                        "topic": key[0],
                        "partition": key[1],
                        "offset": base,
                        "high_watermark": hw,
                        "brokers": sorted(versions),
                        "distinct_copies": len(distinct),
                        "brokers_without_this_batch": sorted(missing),
                    }
                )
    return report
