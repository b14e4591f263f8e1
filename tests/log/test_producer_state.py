"""Producer state: sequence rules, duplicates, epochs, Kafka's snapshot format."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from trafka.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from trafka.log.producer_state import ProducerStateManager, decode_snapshot, encode_snapshot
from trafka.log.segment import EntryInfo


def info(
    first_offset: int, count: int, seq: int, *, pid: int = 9, epoch: int = 0, ts: int = 100
) -> EntryInfo:
    return EntryInfo(
        0, 100, first_offset, first_offset + count - 1, 2, ts, 0, pid, epoch, seq, False, False
    )


def append(manager: ProducerStateManager, entry: EntryInfo) -> None:
    updates, duplicate = manager.check_batches([entry])
    assert duplicate is None
    manager.commit(updates, entry.next_offset)


def test_sequences_duplicates_and_epochs(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, info(0, 3, 0))
    append(manager, info(3, 2, 3))
    _, duplicate = manager.check_batches([info(99, 3, 0)])
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 2)
    with pytest.raises(OutOfOrderSequenceError):
        manager.check_batches([info(5, 1, 6)])
    with pytest.raises(OutOfOrderSequenceError):
        manager.check_batches([info(5, 1, 3, epoch=1)])
    append(manager, info(5, 1, 0, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        manager.check_batches([info(6, 1, 1, epoch=0)])
    # only the last five batches are remembered
    for n in range(6):
        append(manager, info(6 + n, 1, 1 + n, epoch=1))
    assert manager.check_batches([info(50, 1, 2, epoch=1)])[1] is not None
    with pytest.raises(OutOfOrderSequenceError):  # seq 1 has left the window of five
        manager.check_batches([info(50, 1, 1, epoch=1)])


def test_new_producer_may_start_anywhere_but_an_unknown_one_needs_epoch_change() -> None:
    manager = ProducerStateManager(Path("/nonexistent"))
    append(manager, info(0, 1, 42))  # Kafka 3.x accepts it (state may have expired)
    append(manager, info(1, 1, 43))


def test_snapshot_is_kafkas_v1_layout(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, info(10, 4, 7, pid=123, epoch=2, ts=555))
    path = manager.take_snapshot(14)
    assert path.name == "00000000000000000014.snapshot"
    data = path.read_bytes()
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 123, 2, 10, 13, 3, 555, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    (entry,) = decode_snapshot(data)
    assert entry.batches[-1].first_sequence == 7 and entry.batches[-1].first_offset == 10
    restored = ProducerStateManager(tmp_path)
    assert restored.load_latest_snapshot(100) == 14
    _, duplicate = restored.check_batches([info(99, 4, 7, pid=123, epoch=2)])
    assert duplicate is not None and duplicate.last_offset == 13


def test_corrupt_and_future_snapshots_are_skipped(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, info(0, 1, 0))
    manager.take_snapshot(1)
    manager.take_snapshot(50)
    (tmp_path / "00000000000000000020.snapshot").write_bytes(encode_snapshot([])[:-1] + b"\x01")
    restored = ProducerStateManager(tmp_path)
    assert restored.load_latest_snapshot(30) == 1
    assert restored.snapshot_offsets() == [1]


def test_expiry_forgets_idle_producers(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    append(manager, info(0, 1, 0, ts=100))
    assert manager.remove_expired(1099) == 0
    assert manager.remove_expired(1100) == 1
    assert manager.producers == {}
