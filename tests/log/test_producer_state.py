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


def test_rolling_restart_incident_gets_kafkas_answers() -> None:
    """The broker side of the 5-node chaos run's idempotent duplicate (docs/reliability.md,
    "librdkafka's epoch-bump duplicates"), replayed on the producer state a follower builds
    from replicated batches and then leads with:

    * a batch written by the old leader and replicated, whose answer the producer lost, is
      a duplicate at the new leader when re-sent with its epoch and sequence (its original
      offsets, nothing appended);
    * after a refused batch (seq 618: NOT_LEADER_OR_FOLLOWER), the next one (619) is
      OUT_OF_ORDER_SEQUENCE_NUMBER, as in Kafka;
    * the bumped epoch starting at sequence 0 is accepted, and the old epoch is then fenced.

    Only a cross-epoch re-send can duplicate, and no broker can recognise one."""
    follower = ProducerStateManager(Path("/nonexistent"))
    for n, offset in enumerate((2757, 2761, 2764)):
        follower.apply_unchecked(info(offset, 1, 615 + n, pid=1, epoch=1))
    # the follower is now the leader: the lost answer's batch (617) is re-sent as is
    _, duplicate = follower.check_batches([info(2800, 1, 617, pid=1, epoch=1)])
    assert duplicate is not None and duplicate.first_offset == 2764
    # 618 was refused (not written), 619 arrives: a gap, Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(OutOfOrderSequenceError):
        follower.check_batches([info(2800, 1, 619, pid=1, epoch=1)])
    # librdkafka bumps the epoch (KIP-360) and starts over at sequence 0: accepted
    append(follower, info(2800, 1, 0, pid=1, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        follower.check_batches([info(2801, 1, 618, pid=1, epoch=1)])
    # a new epoch must start at 0 once the producer is known
    with pytest.raises(OutOfOrderSequenceError):
        follower.check_batches([info(2801, 1, 5, pid=1, epoch=3)])
