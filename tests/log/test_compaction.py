"""Compaction: latest value per key, offsets preserved, tombstones, lag, crash-safe swap."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from trafka.log.cleaner import clean_log
from trafka.log.config import LogConfig
from trafka.log.errors import InvalidRecordError
from trafka.log.partition_log import SWAP_MARKER, PartitionLog
from trafka.log.records import NewRecord, build_batch, iter_batches

NOW = 1_700_000_000_000
COMPACT = LogConfig(
    cleanup_policy=frozenset({"compact"}), segment_bytes=600, delete_retention_ms=1000
)


def put(log: PartitionLog, key: bytes, value: bytes | None, timestamp: int = NOW) -> int:
    data = build_batch([NewRecord(value, key=key, timestamp=timestamp)])
    return log.append_as_leader(data, leader_epoch=0, now_ms=timestamp).first_offset


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    result = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        data = log.read(position, max_bytes=1 << 20).to_bytes()
        for decoded in iter_batches(data):
            result += [(r.offset, r.key, r.value) for r in decoded.records if r.offset >= position]
            position = decoded.next_offset
    return result


def open_log(tmp_path: Path, config: LogConfig = COMPACT) -> PartitionLog:
    return PartitionLog.open(tmp_path / "users-0", config, now_ms=NOW)


def test_keeps_the_latest_value_per_key_with_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected: dict[bytes, tuple[int, bytes]] = {}
    appended: list[tuple[int, bytes, bytes]] = []
    for round_ in range(6):
        for user in range(5):
            key, value = b"user%d" % user, b"email-%d-%d" % (user, round_)
            expected[key] = (put(log, key, value), value)
            appended.append((expected[key][0], key, value))
    log.update_high_watermark(log.log_end_offset)
    active_base = log.segments()[-1].base_offset
    result = clean_log(log, now_ms=NOW, first_dirty_offset=0)
    assert result is not None and result.records_removed > 0
    kept = records(log)
    # below the active segment exactly the latest record per key (of that range) remains
    latest_below: dict[bytes, tuple[int, bytes, bytes]] = {}
    for offset, key, value in appended:
        if offset < active_base:
            latest_below[key] = (offset, key, value)
    cleaned = [record for record in kept if record[0] < active_base]
    assert cleaned == sorted(latest_below.values())
    assert [r for r in kept if r[0] >= active_base] == [r for r in appended if r[0] >= active_base]
    # every key's latest value is still readable at its original offset
    by_offset = {offset: (key, value) for offset, key, value in kept}
    for key, (offset, value) in expected.items():
        assert by_offset[offset] == (key, value)
    assert [o for o, _, _ in kept] == sorted(o for o, _, _ in kept)
    assert log.log_end_offset == 30
    log.close()
    reopened = open_log(tmp_path)
    assert records(reopened) == kept
    reopened.close()


def test_active_segment_and_data_above_the_high_watermark_are_never_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(40):
        put(log, b"k", b"v%d" % i)
    # HW 0: nothing is cleanable
    assert clean_log(log, now_ms=NOW, first_dirty_offset=0) is None
    log.update_high_watermark(log.log_end_offset)
    assert clean_log(log, now_ms=NOW, first_dirty_offset=0) is not None
    active_base = log.segments()[-1].base_offset
    active = [r for r in records(log) if r[0] >= active_base]
    assert len(active) == 40 - active_base  # untouched
    log.close()


def test_tombstones_are_kept_until_the_delete_horizon_then_removed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    put(log, b"gone", b"v1")
    for i in range(10):
        put(log, b"other%d" % i, b"x" * 30)
    tombstone_offset = put(log, b"gone", None)
    for i in range(20):
        put(log, b"filler%d" % i, b"y" * 30)
    log.update_high_watermark(log.log_end_offset)
    first = clean_log(log, now_ms=NOW, first_dirty_offset=0)
    assert first is not None and first.next_tombstone_horizon_ms == NOW + 1000
    kept = {offset: value for offset, key, value in records(log) if key == b"gone"}
    assert kept == {tombstone_offset: None}
    early = clean_log(
        log, now_ms=NOW + 999, first_dirty_offset=first.first_dirty_offset, force=True
    )
    assert early is None or early.tombstones_removed == 0
    assert any(key == b"gone" for _, key, _ in records(log))
    late = clean_log(
        log, now_ms=NOW + 1000, first_dirty_offset=first.first_dirty_offset, force=True
    )
    assert late is not None and late.tombstones_removed == 1
    assert not any(key == b"gone" for _, key, _ in records(log))
    log.close()


def test_dirty_ratio_and_compaction_lag(tmp_path: Path) -> None:
    config = LogConfig(
        cleanup_policy=frozenset({"compact"}),
        segment_bytes=600,
        min_cleanable_dirty_ratio=0.5,
        min_compaction_lag_ms=10_000,
    )
    log = open_log(tmp_path, config)
    for i in range(30):
        put(log, b"k%d" % (i % 3), b"v", timestamp=NOW + i)
    log.update_high_watermark(log.log_end_offset)
    assert clean_log(log, now_ms=NOW + 5_000, first_dirty_offset=0) is None  # too young
    done = clean_log(log, now_ms=NOW + 20_000, first_dirty_offset=0)
    assert done is not None
    # right after a pass the dirty part is empty, so the ratio is below 0.5
    assert clean_log(log, now_ms=NOW + 20_000, first_dirty_offset=done.first_dirty_offset) is None
    log.close()


def test_compacted_topics_reject_records_without_keys(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    try:
        log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0, now_ms=NOW)
    except InvalidRecordError:
        pass
    else:
        raise AssertionError("a keyless record was accepted by a compacted topic")
    log.close()


def test_appends_proceed_while_the_cleaner_runs_in_a_thread(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=4000))
    for i in range(400):
        put(log, b"k%d" % (i % 7), b"v%d" % i)
    log.update_high_watermark(log.log_end_offset)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            clean_log(log, now_ms=NOW, first_dirty_offset=0)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    cleaner = threading.Thread(target=run)
    cleaner.start()
    appended = [put(log, b"k%d" % (i % 7), b"new%d" % i) for i in range(200)]
    cleaner.join()
    assert not errors
    assert appended == list(range(400, 600))
    kept = records(log)
    assert [o for o, _, _ in kept][-200:] == appended
    log.close()


def test_interrupted_swap_is_completed_or_discarded_on_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(30):
        put(log, b"k%d" % (i % 2), b"v%d" % i)
    log.update_high_watermark(log.log_end_offset)
    before = records(log)
    log.close()
    directory = tmp_path / "users-0"
    # a stray .swap without the marker is discarded: the old segments stay
    (directory / "00000000000000000000.log.swap").write_bytes(b"junk")
    reopened = open_log(tmp_path)
    assert records(reopened) == before
    assert not (directory / "00000000000000000000.log.swap").exists()
    assert not (directory / SWAP_MARKER).exists()
    reopened.close()


def test_log_manager_maintenance_compacts_and_later_removes_tombstones(tmp_path: Path) -> None:
    from trafka.log.log_manager import LogManager

    manager = LogManager(
        [tmp_path / "data"], default_config=COMPACT, now_ms=NOW, node_id=1, cluster_id="c"
    )
    log = manager.get_or_create("users", 0)
    put(log, b"a", b"1")
    put(log, b"a", None)
    for i in range(30):
        put(log, b"f%d" % (i % 4), b"z" * 20)
    log.update_high_watermark(log.log_end_offset)
    assert manager.maintenance(NOW).logs_cleaned == 1
    assert any(key == b"a" for _, key, _ in records(log))  # tombstone kept until the horizon
    assert manager.maintenance(NOW + 500).logs_cleaned == 0
    assert manager.maintenance(NOW + 1000).logs_cleaned == 1
    assert not any(key == b"a" for _, key, _ in records(log))
    manager.close()
    checkpoint = (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().splitlines()
    assert checkpoint[:2] == ["0", "1"] and checkpoint[2].startswith("users 0 ")


def test_a_truncation_during_cleaning_abandons_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trafka.log import cleaner

    log = open_log(tmp_path)
    for i in range(40):
        put(log, b"k%d" % (i % 3), b"v%d" % i)
    log.update_high_watermark(log.log_end_offset)
    segments = log.segments()
    target = segments[1].base_offset + 1
    original = cleaner._build_offset_map

    def truncating(*args: Any, **kwargs: Any) -> Any:
        log.truncate_to(target)  # a follower truncation racing the cleaner thread
        return original(*args, **kwargs)

    monkeypatch.setattr(cleaner, "_build_offset_map", truncating)
    assert clean_log(log, now_ms=NOW, first_dirty_offset=0) is None
    assert log.log_end_offset <= target
    assert [offset for offset, _, _ in records(log)] == list(range(log.log_end_offset))
    log.close()
