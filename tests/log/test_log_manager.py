"""LogManager: several log dirs, placement, checkpoints, clean shutdown, deletion, offline dirs."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trafka.log.checkpoint import read_meta_properties, read_offset_checkpoint
from trafka.log.config import LogConfig
from trafka.log.errors import CorruptRecordError, LogDirFailedError
from trafka.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, delete_dir_name
from trafka.log.records import NewRecord, build_batch

NOW = 1_700_000_000_000


def manager(dirs: list[Path], **kwargs: object) -> LogManager:
    options: dict[str, object] = {"node_id": 1, "cluster_id": "c1", "default_config": LogConfig()}
    options.update(kwargs)
    return LogManager(dirs, now_ms=NOW, **options)  # type: ignore[arg-type]


def append(manager_: LogManager, topic: str, partition: int, count: int = 1) -> None:
    log = manager_.get_or_create(topic, partition)
    for _ in range(count):
        log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0, now_ms=NOW)


def test_places_partitions_in_the_least_loaded_dir_and_reloads(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    for partition in range(4):
        append(logs, "orders", partition, count=partition + 1)
    placed = [logs.dir_of("orders", p) for p in range(4)]
    sizes = logs.partition_sizes()
    assert [(d, t, p) for d, t, p, _ in sizes] == [(placed[p], "orders", p) for p in range(4)]
    assert all(size > 0 for *_, size in sizes)
    assert placed.count(dirs[0]) == 2 and placed.count(dirs[1]) == 2
    logs.get_or_create("orders", 0).update_high_watermark(1)
    logs.close()
    for log_dir in dirs:
        assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        meta = read_meta_properties(log_dir / "meta.properties")
        assert (meta["version"], meta["node.id"], meta["cluster.id"]) == ("1", "1", "c1")
        assert "directory.id" in meta
    assert read_offset_checkpoint(dirs[0] / "replication-offset-checkpoint")[("orders", 0)] == 1
    recovery_points = {}
    for log_dir in dirs:
        recovery_points.update(read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint"))
    assert recovery_points == {("orders", p): p + 1 for p in range(4)}
    again = manager(dirs)
    assert again.partitions() == [("orders", p) for p in range(4)]
    assert [again.get("orders", p).log_end_offset for p in range(4)] == [1, 2, 3, 4]  # type: ignore[union-attr]
    assert again.get("orders", 0).high_watermark == 1  # type: ignore[union-attr]
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    again.close()


def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_delete_does_not_wait_for_a_maintenance_step(tmp_path: Path) -> None:
    """A maintenance step on a worker thread holds the log's lock (a flush on a slow disk,
    the cleaner's swap): deleting the partition on the event loop must not wait for it; the
    files are closed and removed once the step is over."""
    logs = manager([tmp_path / "a"])
    append(logs, "busy", 0)
    doomed = logs.get("busy", 0)
    assert doomed is not None
    held, release = threading.Event(), threading.Event()

    def maintenance_step() -> None:
        with doomed.lock:
            held.set()
            release.wait(10)

    worker = threading.Thread(target=maintenance_step)
    worker.start()
    held.wait(5)
    started = time.monotonic()
    assert logs.delete("busy", 0)
    assert time.monotonic() - started < 0.5
    assert doomed.closed  # no append or read reaches it any more
    assert not (tmp_path / "a" / "busy-0").exists()
    append(logs, "busy", 0)  # the name is free at once: the topic may be created again
    assert list((tmp_path / "a").glob("busy-0.*-delete"))  # still there: the lock is held
    release.set()
    worker.join()
    _wait_until(lambda: list((tmp_path / "a").glob("busy-0.*-delete")) == [])
    assert (tmp_path / "a" / "busy-0").is_dir()
    logs.close()


def test_delete_renames_then_removes(tmp_path: Path) -> None:
    logs = manager([tmp_path / "a"])
    append(logs, "gone", 0)
    assert logs.delete("gone", 0)
    assert logs.get("gone", 0) is None
    assert not (tmp_path / "a" / "gone-0").exists()  # renamed at once; removed in the background
    _wait_until(lambda: list((tmp_path / "a").glob("gone-0*")) == [])
    # an interrupted deletion is finished on the next start
    (tmp_path / "a" / "gone-1.0123abcd-delete").mkdir()
    logs.close()
    again = manager([tmp_path / "a"])
    assert again.partitions() == []
    assert list((tmp_path / "a").glob("gone-1*")) == []
    again.close()


def test_a_bad_dir_is_reported_offline_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("a file, not a directory")
    good = tmp_path / "good"
    logs = manager([bad, good])
    assert list(logs.offline_dirs) == [bad]
    append(logs, "t", 0)
    assert logs.dir_of("t", 0) == good
    logs.close()
    with pytest.raises(LogDirFailedError):
        manager([bad])


def test_mismatched_cluster_id_takes_the_dir_offline(tmp_path: Path) -> None:
    logs = manager([tmp_path / "a"])
    logs.close()
    other = manager([tmp_path / "a", tmp_path / "b"], cluster_id="c2")
    assert list(other.offline_dirs) == [tmp_path / "a"]
    assert "cluster.id" in other.offline_dirs[tmp_path / "a"]
    other.close()


def test_a_locked_dir_cannot_be_used_twice(tmp_path: Path) -> None:
    first = manager([tmp_path / "a"])
    with pytest.raises(LogDirFailedError, match="locked"):
        manager([tmp_path / "a"])
    first.close()


def test_io_failure_marks_the_dir_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "t", 0)
    append(logs, "t", 1)
    failing_dir = logs.dir_of("t", 0)
    assert failing_dir is not None
    logs.mark_dir_offline(failing_dir, "disk unplugged")
    assert logs.get("t", 0) is None and logs.get("t", 1) is not None
    assert logs.offline_dirs == {failing_dir: "disk unplugged"}
    logs.close()


def test_maintenance_applies_retention_and_writes_checkpoints(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    logs = manager([tmp_path / "a"], default_config=config)
    log = logs.get_or_create("t", 0)
    for _ in range(10):
        log.append_as_leader(
            build_batch([NewRecord(b"x" * 50, timestamp=NOW)]), leader_epoch=0, now_ms=NOW
        )
    log.update_high_watermark(log.log_end_offset)
    report = logs.maintenance(NOW + 1001)
    assert report.segments_deleted > 0
    assert log.log_start_offset > 0
    start = read_offset_checkpoint(tmp_path / "a" / "log-start-offset-checkpoint")
    assert start == {("t", 0): log.log_start_offset}
    logs.close()


def test_crash_without_clean_shutdown_recovers_from_checkpoints(tmp_path: Path) -> None:
    logs = manager([tmp_path / "a"])
    append(logs, "t", 0, count=5)
    logs.write_checkpoints()
    log = logs.get("t", 0)
    assert log is not None
    segment = log.segments()[-1].path
    for key in list(logs.logs()):
        logs.logs()[key]._close_abruptly()  # simulate a crash: no close(), no marker
    os.close(logs._lock_fds.pop(tmp_path / "a"))
    with segment.open("ab") as handle:
        handle.write(b"\x00" * 64)
    again = manager([tmp_path / "a"])
    assert again.get("t", 0).log_end_offset == 5  # type: ignore[union-attr]
    again.close()


def test_partition_metadata_names_the_topic_id(tmp_path: Path) -> None:
    from trafka.log.checkpoint import read_partition_metadata

    logs = manager([tmp_path / "a"])
    log = logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    path = log.directory / "partition.metadata"
    assert path.read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    assert read_partition_metadata(path) == "AAAAAAAAAAAAAAAAAAAAAQ"
    logs.close()


def test_the_quorum_dir_is_skipped_silently_and_strangers_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "quorum").mkdir()
    (tmp_path / "stray").mkdir()
    loaded = manager([tmp_path])
    try:
        assert list(loaded.partitions()) == []
    finally:
        loaded.close()
    warned = [r.getMessage() for r in caplog.records if "not a partition directory" in r.message]
    assert len(warned) == 1 and "stray" in warned[0]


# ---- maintenance while logs are deleted under it (StopReplica(delete), stray-log removal) ----


def _three_logs(tmp_path: Path) -> tuple[LogManager, list[Path]]:
    """a-0 and c-0 in dir x, b-0 in dir y (maintenance visits them in that order)."""
    dirs = [tmp_path / "x", tmp_path / "y"]
    logs = manager(dirs)
    for topic in ("a", "b", "c"):
        append(logs, topic, 0, count=2)
        log = logs.get(topic, 0)
        assert log is not None
        log.update_high_watermark(2)
    assert [logs.dir_of(t, 0) for t in ("a", "b", "c")] == [dirs[0], dirs[1], dirs[0]]
    return logs, dirs


def _high_watermarks(dirs: list[Path]) -> dict[tuple[str, int], int]:
    found: dict[tuple[str, int], int] = {}
    for log_dir in dirs:
        found.update(read_offset_checkpoint(log_dir / "replication-offset-checkpoint"))
    return found


def test_a_log_deleted_between_listing_and_processing_is_skipped(tmp_path: Path) -> None:
    logs, dirs = _three_logs(tmp_path)
    first = logs.get("a", 0)
    assert first is not None
    real_retention = first.apply_retention

    def deleting_the_others(now_ms: int) -> int:  # another thread's StopReplica(delete)
        logs.delete("b", 0)
        logs.delete("c", 0)
        return real_retention(now_ms)

    first.apply_retention = deleting_the_others  # type: ignore[method-assign]
    logs.maintenance(NOW + 1)  # b-0 and c-0 are closed when their turn comes: no error
    assert logs.offline_dirs == {}
    assert _high_watermarks(dirs) == {("a", 0): 2}  # the pass wrote its checkpoints
    logs.close()


def test_a_log_failing_because_it_was_deleted_does_not_take_its_dir_offline(
    tmp_path: Path,
) -> None:
    logs, dirs = _three_logs(tmp_path)
    doomed = logs.get("a", 0)
    assert doomed is not None

    def deleted_midway(now_ms: int) -> int:  # its files vanish while it is worked on
        logs.delete("a", 0)
        raise FileNotFoundError(doomed.directory / "00000000000000000000.log")

    doomed.remove_expired_producers = deleted_midway  # type: ignore[method-assign]
    logs.maintenance(NOW + 1)
    assert logs.offline_dirs == {}
    assert _high_watermarks(dirs) == {("b", 0): 2, ("c", 0): 2}
    logs.close()


def test_an_io_error_on_a_live_log_still_takes_its_dir_offline(tmp_path: Path) -> None:
    logs, dirs = _three_logs(tmp_path)
    live = logs.get("a", 0)
    assert live is not None

    def disk_error(now_ms: int) -> bool:
        raise LogDirFailedError(f"{live.directory}: [Errno 5] Input/output error")

    live.flush_if_due = disk_error  # type: ignore[method-assign]
    logs.maintenance(NOW + 1)  # c-0, closed with its dir, is skipped without an error
    assert list(logs.offline_dirs) == [dirs[0]]
    assert "Input/output error" in logs.offline_dirs[dirs[0]]
    assert logs.get("a", 0) is None and logs.get("c", 0) is None
    assert read_offset_checkpoint(dirs[1] / "replication-offset-checkpoint") == {("b", 0): 2}
    logs.close()


def test_another_error_on_a_live_log_is_raised_after_the_checkpoints(tmp_path: Path) -> None:
    logs, dirs = _three_logs(tmp_path)
    live = logs.get("a", 0)
    assert live is not None

    def corrupt(now_ms: int) -> int:
        raise CorruptRecordError("bad batch")

    live.apply_retention = corrupt  # type: ignore[method-assign]
    with pytest.raises(CorruptRecordError, match="bad batch"):
        logs.maintenance(NOW + 1)
    assert logs.offline_dirs == {}
    assert _high_watermarks(dirs) == {("a", 0): 2, ("b", 0): 2, ("c", 0): 2}
    logs.close()


def test_a_249_character_topic_is_deleted_without_taking_the_dir_offline(tmp_path: Path) -> None:
    # Found by the fuzzer (issue 12): `<249 chars>-0.<uuid>-delete` exceeds 255 bytes; the
    # rename failed and the whole log dir went offline, then the node exited.
    name = "x" * 249
    logs = manager([tmp_path / "a"])
    append(logs, name, 0)
    assert logs.delete(name, 0)
    assert logs.get(name, 0) is None
    assert logs.offline_dirs == {}
    append(logs, "after", 0)  # the dir is still online
    assert delete_dir_name(name, 12345, "f" * 32).endswith("-12345." + "f" * 32 + "-delete")
    assert len(delete_dir_name(name, 12345).encode()) == 255
    logs.close()


# ---- moving a replica between dirs (AlterReplicaLogDirs) --------------------------------------
def test_move_to_dir_keeps_the_records_and_offsets_and_survives_a_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "moving", 0, count=5)
    source = logs.dir_of("moving", 0)
    assert source is not None
    destination = dirs[1] if source == dirs[0] else dirs[0]
    before = logs.get("moving", 0)
    assert before is not None
    before.update_high_watermark(4)
    logs.move_to_dir("moving", 0, destination, now_ms=NOW)
    after = logs.get("moving", 0)
    assert after is not None and after is not before and before.closed
    assert logs.dir_of("moving", 0) == destination
    assert after.directory == destination / "moving-0"
    assert (after.log_end_offset, after.high_watermark) == (5, 4)
    assert not (source / "moving-0").exists()
    assert [p.name for p in destination.iterdir() if p.name.startswith("moving")] == ["moving-0"]
    after.append_as_leader(build_batch([NewRecord(b"w")]), leader_epoch=0, now_ms=NOW)
    assert after.read(0, max_bytes=1 << 20).size > 0
    logs.move_to_dir("moving", 0, destination, now_ms=NOW)  # already there: nothing
    assert logs.get("moving", 0) is after
    logs.close()
    reopened = manager(dirs)
    assert reopened.dir_of("moving", 0) == destination
    moved = reopened.get("moving", 0)
    assert moved is not None and moved.log_end_offset == 6
    reopened.close()


def test_move_to_dir_refuses_unknown_dirs_and_partitions(tmp_path: Path) -> None:
    logs = manager([tmp_path / "a", tmp_path / "b"])
    append(logs, "moving", 0)
    with pytest.raises(ValueError, match="not a log dir"):
        logs.move_to_dir("moving", 0, tmp_path / "elsewhere", now_ms=NOW)
    with pytest.raises(ValueError, match="no log"):
        logs.move_to_dir("absent", 0, tmp_path / "b", now_ms=NOW)
    logs.close()


def test_an_unfinished_future_dir_is_removed_at_start(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "moving", 0, count=2)
    logs.close()
    leftover = dirs[1] / "moving-0.0123456789abcdef0123456789abcdef-future"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"partial")
    reopened = manager(dirs)
    assert not leftover.exists()
    moving = reopened.get("moving", 0)
    assert moving is not None and moving.log_end_offset == 2
    reopened.close()


# ---- logs created without waiting for the disk (LeaderAndIsr creating thousands) -----------


def counting_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every os.fsync from now on is recorded (and still done)."""
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_a_durable_creation_writes_partition_metadata_before_returning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = manager([tmp_path / "a"])
    fsyncs = counting_fsyncs(monkeypatch)
    log = logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    # the metadata file's tmp and the directory (whose fsync also covers the segment files)
    assert len(fsyncs) == 2
    assert not log.creation_owed
    assert (log.directory / "partition.metadata").exists()
    logs.close()


def test_a_creation_without_waiting_owes_its_fsyncs_to_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trafka.log.checkpoint import read_partition_metadata

    logs = manager([tmp_path / "a"])
    fsyncs = counting_fsyncs(monkeypatch)
    created = [
        logs.get_or_create("t", p, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", durable=False)
        for p in range(3)
    ]
    assert fsyncs == []
    assert all(log.creation_owed for log in created)
    assert not any((log.directory / "partition.metadata").exists() for log in created)
    logs.sync_created(created)
    logs._background.finish()  # what the background thread has not done yet, done here
    deadline = time.monotonic() + 10
    while any(log.creation_owed for log in created) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(log.creation_owed for log in created)
    assert len(fsyncs) == 6
    for log in created:
        assert read_partition_metadata(log.directory / "partition.metadata") == (
            "AAAAAAAAAAAAAAAAAAAAAQ"
        )
    logs.close()


def test_the_first_append_to_a_log_created_without_waiting_pays_its_fsyncs_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trafka.log.segment import LogSegment

    logs = manager([tmp_path / "a"])
    log = logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", durable=False)
    seen: list[bool] = []
    real_append = LogSegment.append

    def append_(segment: LogSegment, *args: object, **kwargs: object) -> None:
        seen.append((log.directory / "partition.metadata").exists() and not log.creation_owed)
        real_append(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "append", append_)
    log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0, now_ms=NOW)
    assert seen == [True]
    logs.close()


def test_a_clean_close_pays_what_a_log_created_without_waiting_owes(tmp_path: Path) -> None:
    from trafka.log.checkpoint import read_partition_metadata

    logs = manager([tmp_path / "a"])
    log = logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", durable=False)
    directory = log.directory
    logs.close()
    assert read_partition_metadata(directory / "partition.metadata") == "AAAAAAAAAAAAAAAAAAAAAQ"
    again = manager([tmp_path / "a"])
    assert again.partitions() == [("t", 0)]
    again.close()


def test_a_log_deleted_before_its_background_sync_is_not_written_again(tmp_path: Path) -> None:
    logs = manager([tmp_path / "a"])
    log = logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", durable=False)
    directory = log.directory
    assert logs.delete("t", 0)
    logs.sync_created([log])
    logs._background.finish()
    logs.close()
    assert not directory.exists()
    assert not list((tmp_path / "a").glob("t-0*"))


def test_a_log_created_without_waiting_and_never_synced_loads_again(tmp_path: Path) -> None:
    """A crash before the background sync: the directory may be there without its
    `partition.metadata` (or not at all; the controller's next LeaderAndIsr creates it)."""
    logs = manager([tmp_path / "a"])
    logs.get_or_create("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", durable=False)
    # no close and no sync: what a SIGKILL leaves (which also drops the dir's lock)
    for fd in logs._lock_fds.values():
        os.close(fd)
    again = manager([tmp_path / "a"])
    log = again.get("t", 0)
    assert log is not None and log.log_end_offset == 0 and not log.creation_owed
    assert not (log.directory / "partition.metadata").exists()
    log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0, now_ms=NOW)
    again.close()
