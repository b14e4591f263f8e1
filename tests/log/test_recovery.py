"""Recovery on open: torn tails truncated, earlier batches intact, indexes rebuilt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trafka.log import batch as batch_format
from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200)


def fill(directory: Path, batches: int = 30) -> tuple[PartitionLog, list[bytes]]:
    log = PartitionLog.open(directory, CONFIG, now_ms=NOW)
    for i in range(batches):
        values = [b"value-%d-%d" % (i, j) * 3 for j in range(4)]
        data = build_batch(
            [NewRecord(v, key=b"k%d" % j, timestamp=NOW + i) for j, v in enumerate(values)]
        )
        log.append_as_leader(data, leader_epoch=i // 10, now_ms=NOW)
    stored = [
        log.read(offset, max_bytes=1, min_one_batch=True).to_bytes()
        for offset in range(0, batches * 4, 4)
    ]
    return log, stored


def contents(log: PartitionLog) -> list[bytes]:
    return [
        log.read(offset, max_bytes=1).to_bytes()
        for offset in range(log.log_start_offset, log.log_end_offset, 4)
    ]


def last_segment(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


@pytest.mark.parametrize(
    "damage",
    ["half_batch", "flipped_crc_byte", "trailing_zeros", "garbage", "flipped_record_byte"],
)
def test_torn_tail_is_truncated_keeping_every_complete_batch(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    log, stored = fill(directory)
    log.close()
    segment = last_segment(directory)
    data = bytearray(segment.read_bytes())
    last_batch_size = len(stored[-1])
    kept_batches = len(stored) - 1
    if damage == "half_batch":
        del data[-(last_batch_size // 2) :]
    elif damage == "flipped_crc_byte":
        data[len(data) - last_batch_size + batch_format.CRC_OFFSET] ^= 0x01
    elif damage == "flipped_record_byte":
        data[-3] ^= 0x80
    elif damage == "trailing_zeros":
        data += bytes(5000)
        kept_batches = len(stored)
    elif damage == "garbage":
        data += os.urandom(777)
        kept_batches = len(stored)
    segment.write_bytes(bytes(data))
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, recovery_point=0)
    assert reopened.log_end_offset == kept_batches * 4
    assert contents(reopened) == stored[:kept_batches]
    # the log is writable again right after the surviving batches
    info = reopened.append_as_leader(build_batch([NewRecord(b"x")]), leader_epoch=5, now_ms=NOW)
    assert info.first_offset == kept_batches * 4
    reopened.close()


def test_damage_in_an_older_segment_drops_everything_after_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, stored = fill(directory)
    log.close()
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 3
    second = segments[1]
    data = bytearray(second.read_bytes())
    data[100] ^= 0xFF
    second.write_bytes(bytes(data))
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, recovery_point=0)
    end = reopened.log_end_offset
    assert 0 < end < 120
    assert contents(reopened) == stored[: end // 4]
    assert len(reopened.segments()) == 2
    reopened.close()


def test_only_segments_past_the_recovery_point_are_rescanned(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _stored = fill(directory)
    log.close()
    first = sorted(directory.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF  # invisible below the recovery point: Kafka trusts flushed segments
    first.write_bytes(bytes(data))
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, recovery_point=120)
    assert reopened.log_end_offset == 120
    reopened.close()


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_deleted_index_files_are_rebuilt_byte_for_byte(tmp_path: Path, suffix: str) -> None:
    directory = tmp_path / "t-0"
    log, stored = fill(directory)
    log.close()
    originals = {p.name: p.read_bytes() for p in directory.glob("*" + suffix)}
    assert len(originals) >= 3 and any(originals.values())
    for path in directory.glob("*" + suffix):
        path.unlink()
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, had_clean_shutdown=True)
    assert contents(reopened) == stored
    assert reopened.offset_for_timestamp(NOW + 15) is not None
    reopened.close()
    rebuilt = {p.name: p.read_bytes() for p in directory.glob("*" + suffix)}
    assert rebuilt == originals


def test_corrupt_index_is_detected_and_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, stored = fill(directory)
    log.close()
    index = sorted(directory.glob("*.index"))[0]
    original = index.read_bytes()
    index.write_bytes(original[8:16] + original[:8] + original[16:])  # out of order
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, had_clean_shutdown=True)
    assert contents(reopened) == stored
    reopened.close()
    assert index.read_bytes() == original


def test_untrimmed_active_index_after_a_crash_is_recovered(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, stored = fill(directory)
    # no close(): the active index keeps its preallocated zero tail, as after SIGKILL
    log.flush()
    active_index = sorted(directory.glob("*.index"))[-1]
    assert active_index.stat().st_size == CONFIG.segment_index_bytes // 8 * 8
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW, recovery_point=log.recovery_point)
    assert contents(reopened) == stored
    reopened.close()


def test_leftover_files_are_cleaned_up(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = fill(directory, batches=3)
    log.close()
    (directory / "00000000000000000999.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (directory / "00000000000000000777.index").write_bytes(bytes(8))
    reopened = PartitionLog.open(directory, CONFIG, now_ms=NOW)
    names = {p.name for p in directory.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned")) for n in names)
    assert "00000000000000000777.index" not in names
    assert reopened.log_end_offset == 12
    reopened.close()
