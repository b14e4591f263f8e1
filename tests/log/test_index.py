"""Offset and time indexes: Kafka's byte layout, lookups, preallocation, truncation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from trafka.log.index import CorruptIndexError, IndexFullError, OffsetIndex, TimeIndex


def test_offset_index_bytes_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000050.index", 50, 300)
    index.open_for_append()
    assert index.path.stat().st_size == 296  # rounded down to whole entries (SEEDS LOG-14)
    index.append(55, 1000)
    index.append(70, 4200)
    assert index.lookup(49) == (50, 0)
    assert index.lookup(55) == (55, 1000)
    assert index.lookup(69) == (55, 1000)
    assert index.lookup(1000) == (70, 4200)
    assert index.lookup_position(4199) == 1000
    index.trim()
    assert index.path.read_bytes() == struct.pack(">iiii", 5, 1000, 20, 4200)
    loaded = OffsetIndex(index.path, 50, 300)
    loaded.load()
    loaded.sanity_check(log_size=5000)
    assert loaded.entries() == [(55, 1000), (70, 4200)]


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 16)
    index.open_for_append()
    index.append(1, 10)
    with pytest.raises(Exception, match="not above"):
        index.append(1, 20)
    index.append(2, 20)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 30)


def test_untrimmed_zero_tail_is_ignored_and_disorder_detected(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", 3, 100) + bytes(80))
    index = OffsetIndex(path, 0, 1024)
    index.load()
    assert index.entries() == [(3, 100)]
    path.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))
    index.load()
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=1000)


def test_offset_index_truncate(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 1024)
    index.open_for_append()
    for offset in (5, 10, 15):
        index.append(offset, offset * 100)
    index.truncate_to(10)
    assert index.entries() == [(5, 500)]
    index.append(12, 1200)
    index.trim()
    assert index.path.read_bytes() == struct.pack(">iiii", 5, 500, 12, 1200)


def test_time_index_only_grows_and_looks_up_floor(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 1200)
    index.open_for_append()
    assert index.path.stat().st_size == 1200
    index.maybe_append(1000, 104)
    index.maybe_append(900, 105)  # an older timestamp gets no entry (SEEDS LOG-18)
    index.maybe_append(2000, 110)
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1500) == (1000, 104)
    assert index.lookup(5000) == (2000, 110)
    index.truncate_to(110)
    assert index.entries() == [(1000, 104)]
    index.trim()
    assert index.path.read_bytes() == struct.pack(">qi", 1000, 4)
    loaded = TimeIndex(index.path, 100, 1200)
    loaded.load()
    loaded.sanity_check(next_offset=200)
    with pytest.raises(CorruptIndexError):
        loaded.sanity_check(next_offset=104)


def _open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def test_writable_indexes_hold_no_descriptor_between_writes(tmp_path: Path) -> None:
    """10,000 partitions per node must not need 20,000 index descriptors (issue 19, S2):
    each write opens and closes the file; what is appended still reaches it."""
    before = _open_descriptors()
    indexes = []
    for n in range(20):
        offsets = OffsetIndex(tmp_path / f"{n}.index", 0, 800)
        times = TimeIndex(tmp_path / f"{n}.timeindex", 0, 1200)
        offsets.open_for_append()
        times.open_for_append()
        offsets.append(5, 500)
        times.maybe_append(1000, 5)
        offsets.sync()
        indexes.append((offsets, times))
    assert _open_descriptors() == before
    offsets, times = indexes[0]
    assert offsets.writable and times.writable
    assert offsets.path.read_bytes()[:8] == struct.pack(">ii", 5, 500)
    offsets.append(9, 900)
    offsets.flush()
    times.trim()
    assert offsets.path.read_bytes()[:16] == struct.pack(">iiii", 5, 500, 9, 900)
    assert times.path.read_bytes() == struct.pack(">qi", 1000, 5)
    assert not times.writable
    # a file deleted under a writable index: the pending entries have no reader; no error
    offsets.append(12, 1200)
    offsets.path.unlink()
    offsets.flush()
    offsets.trim()
    assert not offsets.path.exists()
    assert _open_descriptors() == before
