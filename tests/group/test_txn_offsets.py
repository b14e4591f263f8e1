"""TxnOffsetCommit in the pure group coordinator: pending until the marker (KIP-98/447)."""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from trafka.group.config import GroupConfig
from trafka.group.coordinator import GroupCoordinator
from trafka.group.messages import CommitPartition, OffsetCommitRequest, TopicPartition
from trafka.group.records import OffsetCommitRecord

TP = TopicPartition("t", 0)


def request(offset: int, *, generation: int = -1, member: str = "") -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        retention_time_ms=-1,
        partitions=(CommitPartition("t", 0, offset, 1, "m"),),
    )


def fetched(coordinator: GroupCoordinator) -> int:
    return coordinator.offset_fetch("g", (TP,)).partitions[0].offset


def test_pending_until_commit_marker() -> None:
    coordinator = GroupCoordinator(GroupConfig(), random.Random(1))
    errors, effects = coordinator.txn_offset_commit(request(10), 77, 0)
    assert [e.error for e in errors] == [ErrorCode.none]
    (record,) = effects.records
    assert isinstance(record, OffsetCommitRecord) and record.value is not None
    assert record.value.offset == 10
    assert fetched(coordinator) == -1  # invisible while the transaction is open
    coordinator.complete_txn_offsets(55, committed=True)  # another producer's marker
    assert fetched(coordinator) == -1
    coordinator.complete_txn_offsets(77, committed=True)
    assert fetched(coordinator) == 10


def test_abort_marker_drops_them() -> None:
    coordinator = GroupCoordinator(GroupConfig(), random.Random(1))
    coordinator.txn_offset_commit(request(10), 77, 0)
    coordinator.complete_txn_offsets(77, committed=True)
    coordinator.txn_offset_commit(request(20), 77, 1)
    coordinator.complete_txn_offsets(77, committed=False)
    assert fetched(coordinator) == 10


def test_unknown_member_and_stale_generation_are_fenced() -> None:
    coordinator = GroupCoordinator(GroupConfig(), random.Random(1))
    errors, _ = coordinator.txn_offset_commit(request(1, generation=3, member="m-1"), 7, 0)
    assert errors[0].error == ErrorCode.illegal_generation
    coordinator.txn_offset_commit(request(1), 7, 0)  # creates the (empty) group
    errors, _ = coordinator.txn_offset_commit(request(1, member="zombie"), 7, 0)
    assert errors[0].error == ErrorCode.unknown_member_id
    errors, _ = coordinator.txn_offset_commit(request(1, generation=5), 7, 0)
    assert errors[0].error == ErrorCode.illegal_generation


def test_restored_pending_offsets_wait_for_the_marker() -> None:
    coordinator = GroupCoordinator(GroupConfig(), random.Random(1))
    coordinator.restore_txn_offsets(9, [OffsetCommitRecord("g", "t", 0, None)], 0)  # skipped
    _, effects = GroupCoordinator(GroupConfig(), random.Random(1)).txn_offset_commit(
        request(5), 9, 0
    )
    commits = [r for r in effects.records if isinstance(r, OffsetCommitRecord)]
    coordinator.restore_txn_offsets(9, commits, 0)
    assert fetched(coordinator) == -1
    coordinator.complete_txn_offsets(9, committed=True)
    assert fetched(coordinator) == 5


def test_require_stable_reports_pending_offsets() -> None:
    coordinator = GroupCoordinator(GroupConfig(), random.Random(1))
    coordinator.txn_offset_commit(request(10), 77, 0)
    stable = coordinator.offset_fetch("g", (TP,), require_stable=True).partitions[0]
    assert (stable.offset, stable.error) == (-1, ErrorCode.unstable_offset_commit)
    assert coordinator.offset_fetch("g", (TP,)).partitions[0].error == ErrorCode.none
    coordinator.complete_txn_offsets(77, committed=True)
    stable = coordinator.offset_fetch("g", (TP,), require_stable=True).partitions[0]
    assert (stable.offset, stable.error) == (10, ErrorCode.none)
