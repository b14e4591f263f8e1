"""The chaos checker on hand-made histories (no cluster, no clients)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.checker import check_history
from tests.chaos.history import (
    ClientError,
    Fault,
    History,
    Read,
    Write,
    history_from_json_object,
)
from tests.chaos.nodes import halted_in_order
from tests.chaos.timeline import render_html


def _write(
    value: str,
    partition: int,
    offset: int | None,
    *,
    sent: float = 1.0,
    acked: float | None = 1.1,
    idempotent: bool = True,
    producer: str = "p1",
) -> Write:
    return Write(
        value=value,
        producer=producer,
        idempotent=idempotent,
        partition=partition,
        sent=sent,
        acked=acked if offset is not None else None,
        offset=offset,
    )


def _read(
    offset: int,
    value: str,
    *,
    partition: int = 0,
    consumer: str = "c",
    assignment: int = 0,
    time: float = 2.0,
) -> Read:
    return Read(
        consumer=consumer,
        assignment=assignment,
        time=time,
        partition=partition,
        offset=offset,
        value=value,
    )


def _history(writes: list[Write], reads: list[Read], partitions: int = 1) -> History:
    return History(topic="t", partitions=partitions, duration=10.0, writes=writes, reads=reads)


def test_clean_history_is_valid() -> None:
    writes = [_write(f"p1-{i}", 0, i) for i in range(5)]
    reads = [_read(i, f"p1-{i}") for i in range(5)]
    report = check_history(_history(writes, reads), seed=7)
    assert report.valid, report.verdict
    assert report.verdict.startswith("VALID")
    assert report.counts["acked"] == 5
    assert all(not items for kind, items in report.anomalies.items())
    assert json.loads(report.to_json())["seed"] == 7


def test_lost_write_needs_a_later_offset_read() -> None:
    writes = [_write("a", 0, 0), _write("b", 0, 1), _write("c", 0, 2)]
    # b is acked at 1 and never read, but offset 2 was read: lost
    report = check_history(_history(writes, [_read(0, "a"), _read(2, "c")]))
    assert not report.valid
    assert [item["value"] for item in report.anomalies["lost"]] == ["b"]
    assert report.verdict.startswith("INVALID: 1 lost")
    # c acked at 2 and nothing later read: unseen, not lost
    report = check_history(_history(writes, [_read(0, "a"), _read(1, "b")]))
    assert report.valid
    assert [item["value"] for item in report.anomalies["unseen"]] == ["c"]


def test_failed_writes_are_indefinite() -> None:
    failed = Write(
        value="x",
        producer="p1",
        idempotent=True,
        partition=0,
        sent=1.0,
        failed=3.0,
        error="timed out",
    )
    writes = [_write("a", 0, 0), failed]
    # read or not read, a failed write is no anomaly
    assert check_history(_history(writes, [_read(0, "a"), _read(1, "x")])).valid
    assert check_history(_history(writes, [_read(0, "a")])).valid


def test_duplicates_split_by_idempotence() -> None:
    writes = [_write("i", 0, 0), _write("n", 0, 1, idempotent=False, producer="plain")]
    reads = [_read(0, "i"), _read(1, "n"), _read(2, "n"), _read(3, "i")]
    report = check_history(_history(writes, reads))
    assert [d["value"] for d in report.anomalies["duplicates_idempotent"]] == ["i"]
    assert [d["value"] for d in report.anomalies["duplicates_non_idempotent"]] == ["n"]
    assert not report.valid
    # the non-idempotent duplicate alone keeps the run valid
    report = check_history(_history(writes, reads[:3]))
    assert report.valid, report.verdict


def test_inconsistent_offsets() -> None:
    writes = [_write("a", 0, 0), _write("b", 0, 1)]
    # two consumers see different values at offset 1
    reads = [_read(0, "a"), _read(1, "b"), _read(1, "c", consumer="d")]
    report = check_history(_history(writes, reads))
    kinds = report.anomaly_counts()
    assert kinds["inconsistent_offsets"] >= 1
    assert kinds["unexpected_values"] == 1  # nobody sent "c"
    # an acknowledged offset holding another value
    writes = [_write("a", 0, 0), _write("b", 0, 0)]
    report = check_history(_history(writes, [_read(0, "a"), _read(1, "b")]))
    mismatch = report.anomalies["inconsistent_offsets"]
    assert mismatch == [
        {"partition": 0, "offset": 0, "acked_value": "b", "values": ["a"], "producer": "p1"}
    ]


def test_nonmonotonic_and_skips_within_one_assignment() -> None:
    writes = [_write(f"v{i}", 0, i) for i in range(5)]
    reads = [
        _read(0, "v0", time=1),
        _read(1, "v1", time=2),
        _read(3, "v3", time=3),  # skips 2, which another consumer read
        _read(2, "v2", time=4),  # goes back
        _read(0, "v0", consumer="other", time=5),
        _read(1, "v1", consumer="other", time=6),
        _read(2, "v2", consumer="other", time=7),
        _read(4, "v4", consumer="other", time=8),
    ]
    report = check_history(_history(writes, reads))
    skips = report.anomalies["skips"]
    # "other" jumped from 2 to 4 with 3 read by "c": a skip too
    assert [(s["consumer"], s["previous"], s["offset"], s["skipped"]) for s in skips] == [
        ("c", 1, 3, [2]),
        ("other", 2, 4, [3]),
    ]
    nonmonotonic = report.anomalies["nonmonotonic_polls"]
    assert [(n["previous"], n["offset"]) for n in nonmonotonic] == [(3, 2)]


def test_a_new_assignment_may_go_back() -> None:
    writes = [_write(f"v{i}", 0, i) for i in range(3)]
    reads = [
        _read(0, "v0", assignment=1),
        _read(1, "v1", assignment=1),
        _read(1, "v1", assignment=2),  # re-read after a rebalance: fine
        _read(2, "v2", assignment=2),
    ]
    report = check_history(_history(writes, reads))
    assert report.valid, report.verdict


def test_fatal_producer_errors_and_down_nodes_invalidate() -> None:
    history = _history([_write("a", 0, 0)], [_read(0, "a")])
    history.errors.append(ClientError(time=1.0, client="p1", error="OUT_OF_ORDER", fatal=True))
    report = check_history(history, nodes_down=[2])
    assert not report.valid
    assert "1 producer_fatal" in report.verdict and "nodes down at the end: [2]" in report.verdict


def test_replica_divergence_and_lost_metadata_invalidate() -> None:
    history = _history([_write("a", 0, 0)], [_read(0, "a")])
    divergence = {"topic": "t", "partition": 0, "offset": 0, "brokers": [1, 2]}
    assert not check_history(history, replica_divergences=[divergence]).valid
    history.meta_ops.append({"op": "create", "name": "m1", "acked": True, "present_at_end": False})
    assert check_history(history).anomaly_counts()["lost_metadata"] == 1


def test_unavailability_after_fault_and_heal() -> None:
    # two partitions; writes every 0.5 s; partition 1 accepts nothing between 10 and 16
    writes = []
    for step in range(60):
        t = step * 0.5
        for partition in (0, 1):
            stalled = partition == 1 and 10 <= t < 16
            acked = 16.2 if stalled else t + 0.1
            writes.append(_write(f"w{step}-{partition}", partition, step, sent=t, acked=acked))
    history = History(topic="t", partitions=2, duration=30.0, writes=writes)
    history.faults.append(Fault(nemesis="isolate", detail="n1", start=10.0, heal=14.0, end=15.0))
    report = check_history(history)
    (entry,) = report.unavailability
    # the first partition-1 write acked after 10 is the one sent at 16 (acked at 16.1)
    assert entry.after_fault == 6.1
    assert entry.after_heal == 2.1
    assert entry.recovered
    # partition 1 acknowledges nothing inside the fault's window [10, 15]
    assert entry.longest_stall == 5.0
    row = report.per_nemesis["isolate"]
    assert row["faults"] == 1 and row["worst_after_fault_s"] == 6.1
    # acks between 10 and 15 (the fault's window): partition 0 only
    assert row["acked"] == 10


def test_unrecovered_partition_is_reported() -> None:
    writes = [_write("a", 0, 0, sent=1.0, acked=1.1), _write("b", 0, None, sent=6.0)]
    history = History(topic="t", partitions=1, duration=20.0, writes=writes)
    history.faults.append(Fault(nemesis="kill", detail="n2", start=5.0, heal=8.0))
    (entry,) = check_history(history).unavailability
    assert not entry.recovered
    assert entry.after_fault == 15.0


def test_timeline_html_has_the_fault_windows(tmp_path: Path) -> None:
    writes = [_write(f"v{i}", 0, i, sent=i * 0.5, acked=i * 0.5 + 0.1) for i in range(40)]
    history = History(topic="t", partitions=1, duration=20.0, writes=writes)
    history.faults.append(Fault(nemesis="pause", detail="SIGSTOP node 2", start=5, heal=9, end=11))
    history.skipped["disk-full"] = "no tmpfs: not root"
    report = check_history(history, seed=3)
    page = render_html(history, report)
    assert "<svg" in page and "pause: SIGSTOP node 2" in page
    assert "disk-full: no tmpfs: not root" in page
    assert page.count("<polyline") == 2
    assert report.verdict in page


def test_history_survives_its_json_round_trip() -> None:
    history = _history([_write("a", 0, 0), _write("b", 0, None)], [_read(0, "a")])
    history.faults.append(Fault(nemesis="kill", detail="n1", start=1.0, heal=2.0, nodes=[1]))
    history.errors.append(ClientError(time=1.0, client="p1", error="x", fatal=True))
    history.meta_ops.append({"op": "create_topic", "name": "m", "acked": True})
    again = history_from_json_object(json.loads(json.dumps(history.to_json_object())))
    assert again == history
    assert check_history(again).verdict == check_history(history).verdict


def test_a_node_crash_fails_the_run_and_the_orderly_halt_does_not(tmp_path: Path) -> None:
    log = tmp_path / "node.log"
    log.write_text("===== start 1 =====\nTraceback\n===== start 2 =====\nrunning\n")
    assert not halted_in_order(-7, log)  # SIGBUS
    assert not halted_in_order(1, log)  # exit 1 without the halt line: a traceback
    log.write_text(
        log.read_text() + "CRITICAL trafka.storage: Shutdown broker because all log dirs\n"
    )
    assert halted_in_order(1, log)
    report = check_history(
        History("chaos", 1), node_crashes=[{"node": 2, "exit_code": -7, "stderr": str(log)}]
    )
    assert not report.valid and "1 node_crashes" in report.verdict
