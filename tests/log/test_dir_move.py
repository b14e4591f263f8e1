"""AlterReplicaLogDirs' two-step copy (trafka.log.dir_move): the bulk while the log serves,
then the closed remainder. Whatever the log does between the two steps (appends, rolls,
truncation and re-appends), the moved log holds exactly the source's records."""

from __future__ import annotations

from pathlib import Path

from trafka.log.log_manager import LogManager
from trafka.log.records import NewRecord, build_batch

from .test_log_manager import NOW, manager


def _append(logs: LogManager, topic: str, value: bytes, count: int = 1) -> None:
    log = logs.get(topic, 0)
    assert log is not None
    for _ in range(count):
        log.append_as_leader(build_batch([NewRecord(value)]), leader_epoch=0, now_ms=NOW)


def _log_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in (".log",)}


def test_appends_between_the_steps_reach_the_moved_log(tmp_path: Path) -> None:
    from .test_log_manager import append

    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "moving", 0, count=50)
    source = logs.dir_of("moving", 0)
    assert source is not None
    destination = dirs[1] if source == dirs[0] else dirs[0]
    move = logs.start_move("moving", 0, destination)
    assert move is not None
    assert move.copy_bulk() > 0
    _append(logs, "moving", b"after-bulk", count=30)  # the log kept serving
    log = logs.get("moving", 0)
    assert log is not None
    expected = _log_files(log.directory)
    logs.finish_move(move, now_ms=NOW)
    moved = logs.get("moving", 0)
    assert moved is not None and moved.directory == destination / "moving-0"
    assert moved.log_end_offset == 80
    assert _log_files(moved.directory) == expected
    logs.close()


def test_a_truncation_between_the_steps_is_not_mistaken_for_appends(tmp_path: Path) -> None:
    from .test_log_manager import append

    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "moving", 0, count=20)
    source = logs.dir_of("moving", 0)
    assert source is not None
    destination = dirs[1] if source == dirs[0] else dirs[0]
    move = logs.start_move("moving", 0, destination)
    assert move is not None
    move.copy_bulk()
    log = logs.get("moving", 0)
    assert log is not None
    assert log.truncate_to(5)
    _append(logs, "moving", b"a-different-and-longer-value", count=30)  # grows past the copy
    expected = _log_files(log.directory)
    logs.finish_move(move, now_ms=NOW)
    moved = logs.get("moving", 0)
    assert moved is not None and moved.log_end_offset == 35
    assert _log_files(moved.directory) == expected
    logs.close()


def test_a_partition_deleted_during_the_copy_is_not_resurrected(tmp_path: Path) -> None:
    import pytest

    from .test_log_manager import append

    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = manager(dirs)
    append(logs, "moving", 0, count=3)
    source = logs.dir_of("moving", 0)
    assert source is not None
    destination = dirs[1] if source == dirs[0] else dirs[0]
    move = logs.start_move("moving", 0, destination)
    assert move is not None
    logs.delete("moving", 0)
    move.copy_bulk()  # the dir is gone: nothing to copy, and no error
    with pytest.raises(ValueError, match="deleted or moved"):
        logs.finish_move(move, now_ms=NOW)
    assert not any(p.name.startswith("moving-0") for p in destination.iterdir())
    assert not logs.offline_dirs
    logs.close()
