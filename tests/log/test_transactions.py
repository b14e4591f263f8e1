"""The log side of transactions: markers, LSO, `.txnindex`, aborted transactions, recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from trafka.log.config import LogConfig
from trafka.log.control import ControlRecordType, decode_end_transaction_marker
from trafka.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    TransactionCoordinatorFencedError,
)
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch, iter_batches
from trafka.log.txn_index import AbortedTxn, TransactionIndex, decode_entries

NOW = 1_700_000_000_000


def open_log(directory: Path, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(directory, LogConfig(), now_ms=NOW, **kwargs)  # type: ignore[arg-type]


def txn_batch(pid: int, sequence: int, count: int = 2, *, epoch: int = 0) -> bytes:
    return build_batch(
        [NewRecord(b"v%d" % i, timestamp=NOW) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def plain(count: int = 1) -> bytes:
    return build_batch([NewRecord(b"p", timestamp=NOW) for _ in range(count)])


def end(
    log: PartitionLog, pid: int, committed: bool, *, epoch: int = 0, coordinator: int = 0
) -> int:
    info = log.append_end_transaction_marker(
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator,
        committed=committed,
        leader_epoch=0,
        now_ms=NOW,
    )
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def test_clients_may_not_write_control_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    forged = build_batch(
        [NewRecord(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00", timestamp=NOW)],
        producer_id=1,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(forged, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0


def test_commit_marker_is_a_control_batch_and_moves_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)  # offsets 0-1
    log.append_as_leader(plain(), leader_epoch=0, now_ms=NOW)  # 2
    log.update_high_watermark(3)
    assert log.last_stable_offset == 0
    assert end(log, 7, True, coordinator=3) == 3
    assert log.last_stable_offset == 4
    batches = list(iter_batches(log.read(3, max_bytes=1 << 20).to_bytes()))
    assert batches[0].header.is_control and batches[0].header.is_transactional
    marker = decode_end_transaction_marker(batches[0].records[0])
    assert (marker.type, marker.coordinator_epoch) == (ControlRecordType.COMMIT, 3)
    assert log.collect_aborted_transactions(0, 4) == []
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()


def test_abort_is_indexed_in_kafkas_format(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)  # 0-1
    log.append_as_leader(txn_batch(8, 0), leader_epoch=0, now_ms=NOW)  # 2-3
    log.append_as_leader(txn_batch(7, 2), leader_epoch=0, now_ms=NOW)  # 4-5
    end(log, 7, False)  # 6: producer 8 still open from 2
    assert log.last_stable_offset == 2
    end(log, 8, False)  # 7
    assert log.last_stable_offset == 8
    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 7, 0, 6, 2) + struct.pack(
        ">hqqqq", 0, 8, 2, 7, 8
    )
    assert log.collect_aborted_transactions(0, 8) == [
        AbortedTxn(7, 0, 6, 2),
        AbortedTxn(8, 2, 7, 8),
    ]
    assert log.collect_aborted_transactions(7, 8) == [AbortedTxn(8, 2, 7, 8)]
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(7, 0, 6, 2)]
    # An abort of a producer with no data here still gets an entry (Kafka does the same).
    end(log, 9, False)
    assert log.collect_aborted_transactions(8, 9)[-1] == AbortedTxn(9, 8, 8, 9)


def test_markers_are_fenced_by_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(7, 0, epoch=2), leader_epoch=0, now_ms=NOW)
    with pytest.raises(InvalidProducerEpochError):
        end(log, 7, False, epoch=1)
    end(log, 7, False, epoch=3, coordinator=5)  # a fence epoch is fine
    with pytest.raises(TransactionCoordinatorFencedError):
        end(log, 7, True, epoch=3, coordinator=4)
    # After the fence, the old epoch's data is refused.
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(7, 2, epoch=2), leader_epoch=0, now_ms=NOW)


def test_follower_builds_the_same_index_and_lso(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a" / "t-0")
    leader.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)
    leader.append_as_leader(txn_batch(8, 0), leader_epoch=0, now_ms=NOW)
    end(leader, 7, False)
    follower = open_log(tmp_path / "b" / "t-0")
    follower.append_as_follower(leader.read(0, max_bytes=1 << 20).to_bytes(), now_ms=NOW)
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.collect_aborted_transactions(0, 10) == leader.collect_aborted_transactions(
        0, 10
    )
    assert follower.last_stable_offset == leader.last_stable_offset == 2


def test_recovery_rebuilds_the_index_across_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)  # 0-1, open across a roll
    log.roll(NOW)
    log.append_as_leader(txn_batch(8, 0), leader_epoch=0, now_ms=NOW)  # 2-3
    end(log, 8, False)  # 4
    log.roll(NOW)
    end(log, 7, False)  # 5
    before = log.collect_aborted_transactions(0, 6)
    assert before == [AbortedTxn(8, 2, 4, 0), AbortedTxn(7, 0, 5, 6)]
    log.close()
    for path in directory.glob("*.txnindex"):
        path.unlink()
    reopened = open_log(directory, recovery_point=0)  # unclean: every segment re-scanned
    assert reopened.collect_aborted_transactions(0, 6) == before
    assert sorted(p.name for p in directory.glob("*.txnindex")) == [
        "00000000000000000002.txnindex",
        "00000000000000000005.txnindex",
    ]
    reopened.close()


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)
    end(log, 7, False)
    log.close()
    (directory / "00000000000000000000.txnindex").write_bytes(b"\x00\x07garbage")
    reopened = open_log(directory, had_clean_shutdown=True)
    assert reopened.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    reopened.close()


def test_truncation_drops_index_entries_and_reopens_the_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)
    end(log, 7, False)  # 2
    log.truncate_to(2)
    assert log.collect_aborted_transactions(0, 3) == []
    log.update_high_watermark(2)
    assert log.last_stable_offset == 0  # the transaction is open again


def test_open_transaction_survives_a_clean_restart(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append_as_leader(plain(3), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(txn_batch(7, 0), leader_epoch=0, now_ms=NOW)  # 3-4
    log.close()  # snapshot at the log end holds the open transaction
    reopened = open_log(directory, had_clean_shutdown=True)
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == 3
    assert reopened.remove_expired_producers(NOW + 10**12) == 0  # an open txn never expires
    end(reopened, 7, True)
    assert reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()


def test_index_file_helpers(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(Exception, match="not after"):
        index.append(AbortedTxn(1, 0, 5, 6))
    assert decode_entries(index.path.read_bytes()) == [AbortedTxn(1, 0, 5, 6)]
    index.truncate_to(5)
    assert not index.path.exists() and index.entries == []


def test_compaction_removes_aborted_records_and_keeps_the_index(tmp_path: Path) -> None:
    """The cleaner drops an aborted transaction's records (they never shadow the committed
    value of a key), keeps markers, and moves `.txnindex` entries with their markers."""
    from trafka.log.cleaner import clean_log

    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=600)
    log = PartitionLog.open(tmp_path / "t-0", config, now_ms=NOW)

    def keyed(pid: int, sequence: int, key: bytes, value: bytes) -> bytes:
        return build_batch(
            [NewRecord(value, key=key, timestamp=NOW)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )

    log.append_as_leader(keyed(7, 0, b"k", b"committed"), leader_epoch=0, now_ms=NOW)  # 0
    end(log, 7, True)  # 1
    log.append_as_leader(keyed(8, 0, b"k", b"aborted"), leader_epoch=0, now_ms=NOW)  # 2
    end(log, 8, False)  # 3
    log.roll(NOW)
    active = build_batch([NewRecord(b"x", key=b"other", timestamp=NOW)])
    log.append_as_leader(active, leader_epoch=0, now_ms=NOW)  # 4: active segment
    log.update_high_watermark(log.log_end_offset)
    result = clean_log(log, now_ms=NOW, first_dirty_offset=0, force=True)
    assert result is not None and result.records_removed == 1
    kept = []
    for decoded in iter_batches(log.read(0, max_bytes=1 << 20).to_bytes()):
        kept += [(r.offset, r.value, decoded.header.is_control) for r in decoded.records]
    assert [(offset, value) for offset, value, control in kept if not control] == [
        (0, b"committed")
    ]
    assert [offset for offset, _, control in kept if control] == [1, 3]
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(8, 2, 3, 4)]
    log.close()
    reopened = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    assert reopened.collect_aborted_transactions(0, 5) == [AbortedTxn(8, 2, 3, 4)]
    reopened.close()


def test_compaction_removes_markers_after_delete_retention(tmp_path: Path) -> None:
    """Kafka's second pass: a marker whose transaction has no batch left gets a delete
    horizon (delete.retention.ms), and the first pass after it removes the marker and its
    `.txnindex` entry; markers that still guard batches stay."""
    from trafka.log.cleaner import clean_log

    retention = 1_000
    config = LogConfig(
        cleanup_policy=frozenset({"compact"}), segment_bytes=4096, delete_retention_ms=retention
    )
    log = PartitionLog.open(tmp_path / "t-0", config, now_ms=NOW)

    def keyed(pid: int, sequence: int, key: bytes, value: bytes) -> None:
        batch = build_batch(
            [NewRecord(value, key=key, timestamp=NOW)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
        log.append_as_leader(batch, leader_epoch=0, now_ms=NOW)

    keyed(7, 0, b"a", b"old")  # 0: compacted away by offset 4
    end(log, 7, True)  # 1: guards nothing once 0 is gone
    keyed(8, 0, b"b", b"aborted")  # 2: removed with its aborted transaction
    end(log, 8, False)  # 3: guards nothing once 2 is gone
    keyed(7, 1, b"a", b"new")  # 4
    end(log, 7, True)  # 5: guards 4
    keyed(8, 1, b"c", b"committed")  # 6
    end(log, 8, True)  # 7: guards 6
    log.roll(NOW)
    log.append_as_leader(
        build_batch([NewRecord(b"x", key=b"z", timestamp=NOW)]), leader_epoch=0, now_ms=NOW
    )  # 8: the active segment
    log.update_high_watermark(log.log_end_offset)

    def control_offsets() -> list[int]:
        data = log.read(0, max_bytes=1 << 20).to_bytes()
        return [b.header.base_offset for b in iter_batches(data) if b.header.is_control]

    first = clean_log(log, now_ms=NOW, first_dirty_offset=0, force=True)
    assert first is not None and first.records_removed == 2 and first.markers_removed == 0
    assert first.next_tombstone_horizon_ms is None  # 1 and 3 still guarded batches 0 and 2
    assert control_offsets() == [1, 3, 5, 7]
    assert log.collect_aborted_transactions(0, 9) == [AbortedTxn(8, 2, 3, 4)]

    second = clean_log(log, now_ms=NOW + 10, first_dirty_offset=0, force=True)
    assert second is not None and second.markers_removed == 0
    assert second.next_tombstone_horizon_ms == NOW + 10 + retention  # 1 and 3: horizons
    assert control_offsets() == [1, 3, 5, 7]

    early = clean_log(log, now_ms=NOW + 10 + retention - 1, first_dirty_offset=0, force=True)
    assert early is None or early.markers_removed == 0
    assert control_offsets() == [1, 3, 5, 7]

    last = clean_log(log, now_ms=NOW + 10 + retention, first_dirty_offset=0, force=True)
    assert last is not None and last.markers_removed == 2
    assert last.next_tombstone_horizon_ms is None
    assert control_offsets() == [5, 7]
    assert log.collect_aborted_transactions(0, 9) == []
    values = [
        (r.offset, r.value)
        for b in iter_batches(log.read(0, max_bytes=1 << 20).to_bytes())
        if not b.header.is_control
        for r in b.records
    ]
    assert values == [(4, b"new"), (6, b"committed")]  # the cleaned segment
    assert log.last_stable_offset == log.log_end_offset == 9
    log.close()
    reopened = open_log(tmp_path / "t-0")  # recovery: no transaction open, nothing aborted
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == 9
    assert reopened.collect_aborted_transactions(0, 9) == []
    reopened.close()
