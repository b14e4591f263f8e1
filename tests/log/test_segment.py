"""LogSegment: roll decisions, header scans, and recovery of arbitrary damage."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.log.segment import LogSegment, entry_info_at, file_name, parse_base_offset

NOW = 1_700_000_000_000


def test_file_names_are_20_digit_base_offsets() -> None:
    assert file_name(1234, ".log") == "00000000000000001234.log"
    assert parse_base_offset("00000000000000001234.timeindex") == 1234
    assert parse_base_offset("0000000000000000050.index") is None  # 19 digits (SEEDS §16-D11)
    assert parse_base_offset("leader-epoch-checkpoint") is None


def append(segment: LogSegment, base_offset: int, timestamp: int) -> None:
    data = build_batch([NewRecord(b"v", timestamp=timestamp)], base_offset=base_offset)
    segment.append([data], [entry_info_at(data, 0, 0)])


def test_should_roll_on_size_time_and_offset_range(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=60_000, segment_jitter_ms=10_000)
    segment = LogSegment.create(tmp_path, 100, config, now_ms=NOW)
    assert not segment.should_roll(messages_size=900, max_timestamp=NOW, max_offset=100, now_ms=NOW)
    append(segment, 100, NOW)
    assert segment.rolling_based_timestamp() == NOW
    assert segment.should_roll(messages_size=1000, max_timestamp=NOW, max_offset=101, now_ms=NOW)
    # segment.ms minus the (fixed) jitter, measured from the first batch's timestamp
    assert not segment.should_roll(
        messages_size=10, max_timestamp=NOW + 50_000, max_offset=101, now_ms=NOW
    )
    assert segment.should_roll(
        messages_size=10, max_timestamp=NOW + 50_001, max_offset=101, now_ms=NOW
    )
    assert segment.should_roll(
        messages_size=10, max_timestamp=NOW, max_offset=100 + (1 << 31), now_ms=NOW
    )
    segment.close()


def test_an_empty_segment_never_rolls_on_time(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, LogConfig(segment_ms=1), now_ms=NOW)
    assert not segment.should_roll(
        messages_size=10, max_timestamp=NOW + 10**6, max_offset=0, now_ms=NOW + 10**6
    )
    segment.close()


def valid_segment_bytes(count: int) -> bytes:
    data = b""
    offset = 0
    for i in range(count):
        batch = build_batch(
            [NewRecord(b"x" * (i * 7 % 50), timestamp=NOW + i) for _ in range(1 + i % 3)],
            base_offset=offset,
        )
        offset += 1 + i % 3
        data += batch
    return data


GOOD = valid_segment_bytes(12)


@settings(max_examples=100)
@given(tail=st.binary(max_size=300), cut=st.integers(min_value=0, max_value=len(GOOD)))
def test_recovery_keeps_exactly_the_valid_prefix_of_any_damage(tail: bytes, cut: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory)
        (path / file_name(0, ".log")).write_bytes(GOOD[:cut] + tail)
        segment = LogSegment(path, 0, LogConfig(index_interval_bytes=64), created_ms=NOW)
        result = segment.recover()
        kept = segment.size
        assert GOOD[:kept] == (GOOD[:cut] + tail)[:kept]
        # every complete batch of the undamaged prefix survives
        complete = 0
        while complete < cut:
            size = entry_info_at(GOOD, complete, complete).size
            if complete + size > cut:
                break
            complete += size
        assert kept >= complete
        assert result.truncated_bytes == cut + len(tail) - kept
        assert [e.position for e in result.entries] == sorted(e.position for e in result.entries)
        segment.close_abruptly()
