"""The leader-epoch cache: assignment, KIP-101 lookups, truncation, persistence."""

from __future__ import annotations

from pathlib import Path

from trafka.log.leader_epoch import LeaderEpochCache


def test_assign_only_new_epochs_and_persist(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 50)
    cache.assign(1, 120)
    cache.assign(-1, 200)
    assert cache.entries() == [(0, 0), (1, 120)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 120\n"
    assert LeaderEpochCache(tmp_path).entries() == [(0, 0), (1, 120)]


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in ((1, 0), (3, 10), (4, 25)):
        cache.assign(epoch, start)
    assert cache.end_offset_for_epoch(4, 40) == (4, 40)
    assert cache.end_offset_for_epoch(3, 40) == (3, 25)
    assert cache.end_offset_for_epoch(2, 40) == (1, 10)
    assert cache.end_offset_for_epoch(0, 40) == (0, 0)
    assert cache.end_offset_for_epoch(7, 40) == (-1, -1)
    assert cache.end_offset_for_epoch(-1, 40) == (-1, -1)
    assert cache.epoch_for_offset(12) == 3


def test_truncation_from_both_ends(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in ((1, 0), (3, 10), (4, 25)):
        cache.assign(epoch, start)
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12)]
    assert LeaderEpochCache(tmp_path).entries() == [(3, 12)]


def test_a_new_epoch_below_existing_entries_replaces_them() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(5, 8)
    assert cache.entries() == [(1, 0), (5, 8)]
