"""Retention: retention.ms, retention.bytes, log start offset; never the active segment."""

from __future__ import annotations

from pathlib import Path

from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch

NOW = 1_700_000_000_000


def filled(tmp_path: Path, config: LogConfig, timestamps: list[int]) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "events-0", config, now_ms=NOW)
    for timestamp in timestamps:
        data = build_batch([NewRecord(b"x" * 80, timestamp=timestamp)])
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_time_retention_deletes_segments_whose_newest_record_is_too_old(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=10_000)
    log = filled(tmp_path, config, [NOW + i * 1000 for i in range(12)])
    segments = log.segments()
    assert len(segments) >= 4
    cutoff = segments[1].max_timestamp + 10_000
    assert log.apply_retention(cutoff) == 1  # only segment 0 is older than retention.ms at cutoff
    assert log.log_start_offset == segments[1].base_offset
    assert log.apply_retention(NOW + 10**9) == len(segments) - 2  # the rest but the active one
    assert log.segments()[-1].base_offset == segments[-1].base_offset
    log.close()


def test_size_retention_keeps_the_log_under_retention_bytes(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_bytes=700)
    log = filled(tmp_path, config, [NOW] * 20)
    assert log.size_bytes > 700
    deleted = log.apply_retention(NOW)
    assert deleted > 0
    assert log.size_bytes <= 700 + log.segments()[0].size
    assert log.size_bytes - log.segments()[0].size <= 700
    log.close()


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=0)
    log = filled(tmp_path, config, [NOW] * 12)
    log.update_high_watermark(0)
    assert log.apply_retention(NOW + 10**9) == 0
    log.update_high_watermark(log.segments()[2].base_offset)
    assert log.apply_retention(NOW + 10**9) == 2
    log.close()


def test_log_start_offset_breach_deletes_whole_segments_below_it(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=-1)
    log = filled(tmp_path, config, [NOW] * 12)
    segments = log.segments()
    log.delete_records_before(segments[2].base_offset + 1)
    assert log.apply_retention(NOW) == 2
    assert log.segments()[0].base_offset == segments[2].base_offset
    assert log.log_start_offset == segments[2].base_offset + 1
    log.close()


def test_compact_only_topics_ignore_time_and_size_retention(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=0, cleanup_policy=frozenset({"compact"}))
    log = PartitionLog.open(tmp_path / "c-0", config, now_ms=NOW)
    for i in range(12):
        data = build_batch([NewRecord(b"x" * 80, key=b"k%d" % i, timestamp=NOW)])
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    assert log.apply_retention(NOW + 10**9) == 0
    log.close()


def test_deleted_segments_linger_for_file_delete_delay_ms(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=0, file_delete_delay_ms=5000)
    log = filled(tmp_path, config, [NOW] * 12)
    region = log.read(0, max_bytes=100).regions[0]
    log.apply_retention(NOW + 1)
    directory = tmp_path / "events-0"
    lingering = sorted(p.name for p in directory.glob("*.deleted"))
    assert "00000000000000000000.log.deleted" in lingering
    assert region.read()  # a fetch that was answered just before still gets its bytes
    log.apply_retention(NOW + 5001)
    assert list(directory.glob("*.deleted")) == []
    log.close()
