"""The chaos checker: pure code over a `History` (no clients, no processes).

Anomalies, as Jepsen's Kafka workload defines them:

* **lost**: a write was acknowledged at (partition, offset), its value was never read by any
  consumer, yet some later offset of that partition was read.
* **unseen**: acknowledged and never read, with nothing later read either (the run ended
  before a consumer got there): not an error by itself, reported.
* **duplicates**: a value read at more than one offset; counted separately for idempotent
  producers (an error) and the non-idempotent one (expected under retries, reported).
* **inconsistent offsets**: two different values read at one (partition, offset), or an
  acknowledged offset that holds another value.
* **unexpected values**: a value read that no producer sent.
* **non-monotonic polls**: within one consumer's unbroken assignment of a partition, an
  offset at or below the previous one polled.
* **skips**: within one unbroken assignment, two consecutive offsets polled with an offset
  between them that some consumer did read (so the log had a record there).
* **producer fatal errors**: an idempotent producer's fatal error (librdkafka raises one
  when the broker's sequence state and the producer's disagree, e.g. after acked data loss).

Unavailability per fault: for every partition, the time from the fault (and from its heal)
until a write sent at or after that moment was acknowledged; the worst partition counts.
`replica_divergences` come from `tests.chaos.replicas` (byte comparison of the replicas
below the high watermark), `nodes_down` from the harness.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.chaos.history import Fault, History, Read, Write

ERROR_KINDS = (
    "lost",
    "duplicates_idempotent",
    "inconsistent_offsets",
    "unexpected_values",
    "nonmonotonic_polls",
    "skips",
    "producer_fatal",
    "replica_divergences",
    "lost_metadata",
    "node_crashes",
)
"""Anomaly kinds that make a run invalid."""
INFO_KINDS = ("unseen", "duplicates_non_idempotent")


@dataclass
class Unavailability:
    nemesis: str
    detail: str
    start: float
    heal: float | None
    after_fault: float | None
    """Seconds until every partition acknowledged a write sent at or after the fault."""
    after_heal: float | None
    recovered: bool
    """False when some partition acknowledged no fresh write before the run ended."""
    longest_stall: float | None = None
    """The longest time any partition went without an acknowledgement between the fault
    and its end (for faults whose damage comes later than their start: rolling restarts)."""


@dataclass
class Report:
    verdict: str
    valid: bool
    seed: int | None
    counts: dict[str, int]
    anomalies: dict[str, list[dict[str, Any]]]
    unavailability: list[Unavailability]
    per_nemesis: dict[str, dict[str, Any]]
    skipped: dict[str, str]
    nodes_down: list[int]
    timeline: dict[str, list[float]]
    notes: list[str] = field(default_factory=list)

    def anomaly_counts(self) -> dict[str, int]:
        return {kind: len(items) for kind, items in self.anomalies.items()}

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=str)


def _reads_by_position(reads: list[Read]) -> dict[tuple[int, int], set[str]]:
    by_position: dict[tuple[int, int], set[str]] = defaultdict(set)
    for read in reads:
        by_position[(read.partition, read.offset)].add(read.value)
    return by_position


def check_history(
    history: History,
    *,
    seed: int | None = None,
    replica_divergences: list[dict[str, Any]] | None = None,
    nodes_down: list[int] | None = None,
    node_crashes: list[dict[str, Any]] | None = None,
    bucket_s: float = 1.0,
) -> Report:
    writes: dict[str, Write] = {w.value: w for w in history.writes}
    by_position = _reads_by_position(history.reads)
    positions_of: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for (partition, offset), values in by_position.items():
        for value in values:
            positions_of[value].add((partition, offset))
    read_offsets: dict[int, list[int]] = defaultdict(list)
    for partition, offset in by_position:
        read_offsets[partition].append(offset)
    for offsets in read_offsets.values():
        offsets.sort()

    anomalies: dict[str, list[dict[str, Any]]] = {k: [] for k in (*ERROR_KINDS, *INFO_KINDS)}

    # --- inconsistent offsets: two values at one offset ------------------------------------
    for (partition, offset), values in sorted(by_position.items()):
        if len(values) > 1:
            anomalies["inconsistent_offsets"].append(
                {"partition": partition, "offset": offset, "values": sorted(values)}
            )

    # --- acknowledged writes: lost, unseen, ack mismatch -------------------------------------
    for write in history.writes:
        if write.offset is None:
            continue
        held = by_position.get((write.partition, write.offset))
        if held and write.value not in held:
            anomalies["inconsistent_offsets"].append(
                {
                    "partition": write.partition,
                    "offset": write.offset,
                    "acked_value": write.value,
                    "values": sorted(held),
                    "producer": write.producer,
                }
            )
        if write.value in positions_of:
            continue
        later = read_offsets.get(write.partition, [])
        entry = {
            "value": write.value,
            "producer": write.producer,
            "partition": write.partition,
            "offset": write.offset,
            "sent": round(write.sent, 3),
            "acked": round(write.acked or 0.0, 3),
        }
        if later and later[-1] > write.offset:
            anomalies["lost"].append(entry)
        else:
            anomalies["unseen"].append(entry)

    # --- duplicates and unexpected values ----------------------------------------------------
    for value, positions in sorted(positions_of.items()):
        origin = writes.get(value)
        if origin is None:
            anomalies["unexpected_values"].append({"value": value, "positions": sorted(positions)})
            continue
        if len(positions) > 1:
            kind = "duplicates_idempotent" if origin.idempotent else "duplicates_non_idempotent"
            anomalies[kind].append(
                {"value": value, "producer": origin.producer, "positions": sorted(positions)}
            )

    # --- polls within one unbroken assignment ------------------------------------------------
    streams: dict[tuple[str, int, int], list[Read]] = defaultdict(list)
    for read in history.reads:
        streams[(read.consumer, read.assignment, read.partition)].append(read)
    for (consumer, assignment, partition), stream in sorted(streams.items()):
        known = read_offsets[partition]
        for previous, current in itertools.pairwise(stream):
            base = {
                "consumer": consumer,
                "assignment": assignment,
                "partition": partition,
                "previous": previous.offset,
                "offset": current.offset,
                "time": round(current.time, 3),
            }
            if current.offset <= previous.offset:
                anomalies["nonmonotonic_polls"].append(base)
                continue
            low = bisect.bisect_right(known, previous.offset)
            high = bisect.bisect_left(known, current.offset)
            if high > low:
                anomalies["skips"].append({**base, "skipped": known[low:high][:20]})

    for error in history.errors:
        if error.fatal:
            anomalies["producer_fatal"].append(
                {"client": error.client, "error": error.error, "time": round(error.time, 3)}
            )
    for op in history.meta_ops:
        if op.get("acked") and not op.get("present_at_end"):
            anomalies["lost_metadata"].append(op)
    anomalies["replica_divergences"] = list(replica_divergences or [])
    anomalies["node_crashes"] = list(node_crashes or [])

    unavailability = [_unavailability(fault, history) for fault in history.faults]
    timeline = _timeline(history, bucket_s)
    per_nemesis = _per_nemesis(history, anomalies, unavailability)
    down = sorted(nodes_down or [])

    counts = {
        "writes": len(history.writes),
        "acked": sum(1 for w in history.writes if w.offset is not None),
        "failed": sum(1 for w in history.writes if w.failed is not None),
        "indefinite": sum(1 for w in history.writes if w.offset is None and w.failed is None),
        "reads": len(history.reads),
        "distinct_values_read": len(positions_of),
        "faults": len(history.faults),
        "client_errors": len(history.errors),
    }
    problems = [f"{len(anomalies[k])} {k}" for k in ERROR_KINDS if anomalies[k]]
    notes: list[str] = []
    if down:
        problems.append(f"nodes down at the end: {down}")
    if not history.final_reads_complete:
        notes.append("the final read did not reach every partition's high watermark")
    valid = not problems
    summary = (
        f"{counts['acked']} acked of {counts['writes']} writes, {len(history.faults)} faults, "
        f"{len(anomalies['unseen'])} unseen, "
        f"{len(anomalies['duplicates_non_idempotent'])} non-idempotent duplicates"
    )
    verdict = f"VALID: {summary}" if valid else f"INVALID: {', '.join(problems)} ({summary})"
    return Report(
        verdict=verdict,
        valid=valid,
        seed=seed,
        counts=counts,
        anomalies=anomalies,
        unavailability=unavailability,
        per_nemesis=per_nemesis,
        skipped=dict(history.skipped),
        nodes_down=down,
        timeline=timeline,
        notes=notes,
    )


def _first_fresh_ack(writes: list[Write], since: float) -> float | None:
    """When the first write sent at or after `since` was acknowledged (None: never)."""
    acks = [w.acked for w in writes if w.sent >= since and w.acked is not None]
    return min(acks) if acks else None


def _unavailability(fault: Fault, history: History) -> Unavailability:
    by_partition: dict[int, list[Write]] = defaultdict(list)
    for write in history.writes:
        by_partition[write.partition].append(write)
    recovered = True

    def worst(since: float | None) -> float | None:
        nonlocal recovered
        if since is None:
            return None
        result = 0.0
        for partition in range(history.partitions):
            first = _first_fresh_ack(by_partition.get(partition, []), since)
            if first is None:
                recovered = False
                first = history.duration
            result = max(result, first - since)
        return round(result, 3)

    window_end = fault.end if fault.end is not None else fault.heal
    stall: float | None = None
    if window_end is not None:
        stall = 0.0
        for partition in range(history.partitions):
            times = sorted(
                w.acked
                for w in by_partition.get(partition, [])
                if w.acked is not None and fault.start <= w.acked <= window_end
            )
            edges = [fault.start, *times, window_end]
            stall = max(stall, *(b - a for a, b in itertools.pairwise(edges)))
        stall = round(stall, 3)
    return Unavailability(
        longest_stall=stall,
        nemesis=fault.nemesis,
        detail=fault.detail,
        start=round(fault.start, 3),
        heal=None if fault.heal is None else round(fault.heal, 3),
        after_fault=worst(fault.start),
        after_heal=worst(fault.heal),
        recovered=recovered,
    )


def _timeline(history: History, bucket_s: float) -> dict[str, list[float]]:
    buckets = max(1, int(history.duration / bucket_s) + 1)
    acked = [0.0] * buckets
    failed = [0.0] * buckets
    errors = [0.0] * buckets

    def slot(t: float) -> int:
        return min(buckets - 1, max(0, int(t / bucket_s)))

    for write in history.writes:
        if write.acked is not None:
            acked[slot(write.acked)] += 1
        if write.failed is not None:
            failed[slot(write.failed)] += 1
    for error in history.errors:
        errors[slot(error.time)] += 1
    return {
        "bucket_s": [bucket_s],
        "acked": acked,
        "failed": failed,
        "errors": errors,
    }


def _fault_at(faults: list[Fault], t: float) -> Fault | None:
    """The fault whose window (from its start to the next fault's start) holds `t`."""
    chosen: Fault | None = None
    for fault in faults:
        if fault.start <= t:
            chosen = fault
    return chosen


def _anomaly_time(kind: str, item: dict[str, Any], writes: dict[str, Write]) -> float | None:
    if "time" in item:
        return float(item["time"])
    value = item.get("value") or item.get("acked_value")
    if isinstance(value, str) and value in writes:
        return writes[value].sent
    return None


def _per_nemesis(
    history: History,
    anomalies: dict[str, list[dict[str, Any]]],
    unavailability: list[Unavailability],
) -> dict[str, dict[str, Any]]:
    faults = sorted(history.faults, key=lambda f: f.start)
    writes = {w.value: w for w in history.writes}
    table: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        return table.setdefault(
            name,
            {
                "faults": 0,
                "acked": 0,
                "anomalies": {k: 0 for k in ERROR_KINDS if k != "replica_divergences"},
                "worst_after_fault_s": None,
                "worst_after_heal_s": None,
                "worst_stall_s": None,
                "unrecovered": 0,
            },
        )

    for fault in faults:
        row(fault.nemesis)["faults"] += 1
    for write in history.writes:
        if write.acked is None:
            continue
        window = _fault_at(faults, write.acked)
        if window is not None and (window.end is None or write.acked <= window.end):
            row(window.nemesis)["acked"] += 1
    for kind, items in anomalies.items():
        if kind not in ERROR_KINDS or kind == "replica_divergences":
            continue
        for item in items:
            t = _anomaly_time(kind, item, writes)
            owner = _fault_at(faults, t) if t is not None else None
            row(owner.nemesis if owner else "(no fault)")["anomalies"][kind] += 1
    for entry in unavailability:
        current = row(entry.nemesis)
        for key, value in (
            ("worst_after_fault_s", entry.after_fault),
            ("worst_after_heal_s", entry.after_heal),
            ("worst_stall_s", entry.longest_stall),
        ):
            if value is not None and (current[key] is None or value > current[key]):
                current[key] = value
        if not entry.recovered:
            current["unrecovered"] += 1
    return table
