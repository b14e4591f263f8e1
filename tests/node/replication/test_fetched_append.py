"""A follower that starts after DeleteRecords put the leader's log start inside a batch.

Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`: the new (empty) follower log starts
at the leader's log start offset, 40, but the first batch it fetches spans offsets 0-99. The
log restarts at the batch's base offset and takes it; its log start then follows the
leader's. (Before, the follower raised UnexpectedAppendOffsetError and the node stopped.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.log.config import LogConfig
from trafka.log.errors import UnexpectedAppendOffsetError
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch
from trafka.node.replication.replica_fetcher import append_fetched, follow_log_start

NOW = 1_700_000_000_000


def _open(path: Path) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(), now_ms=NOW)


def _leader_with_deleted_prefix(tmp_path: Path) -> PartitionLog:
    leader = _open(tmp_path / "leader" / "t-0")
    records = build_batch([NewRecord(b"v%d" % i, timestamp=NOW) for i in range(100)])
    leader.append_as_leader(records, leader_epoch=0, now_ms=NOW)
    leader.update_high_watermark(100)
    assert leader.delete_records_before(40) == 40
    return leader


def test_empty_follower_restarts_at_the_batch_that_holds_the_leader_log_start(
    tmp_path: Path,
) -> None:
    leader = _leader_with_deleted_prefix(tmp_path)
    fetched = leader.read(40, max_bytes=1 << 20).to_bytes()
    assert int.from_bytes(fetched[:8], "big") == 0  # the whole batch, from offset 0

    follower = _open(tmp_path / "follower" / "t-0")
    follower.truncate_fully_and_start_at(40)  # OFFSET_OUT_OF_RANGE below the leader's start
    append_fetched(follower, fetched)
    assert follower.log_end_offset == 100
    follower.update_high_watermark(100)
    follow_log_start(follower, leader.log_start_offset)
    assert follower.log_start_offset == 40
    leader.close()
    follower.close()


def test_other_offset_mismatches_still_fail(tmp_path: Path) -> None:
    leader = _leader_with_deleted_prefix(tmp_path)
    fetched = leader.read(40, max_bytes=1 << 20).to_bytes()
    follower = _open(tmp_path / "follower" / "t-0")
    follower.append_as_leader(
        build_batch([NewRecord(b"x", timestamp=NOW) for _ in range(50)]), leader_epoch=0, now_ms=NOW
    )  # not empty: a real divergence, which the epoch handshake must resolve
    with pytest.raises(UnexpectedAppendOffsetError):
        append_fetched(follower, fetched)
    leader.close()
    follower.close()


def test_log_start_never_passes_the_follower_high_watermark(tmp_path: Path) -> None:
    follower = _open(tmp_path / "follower" / "t-0")
    follower.append_as_leader(
        build_batch([NewRecord(b"x", timestamp=NOW) for _ in range(10)]), leader_epoch=0, now_ms=NOW
    )
    follower.update_high_watermark(5)
    follow_log_start(follower, 8)  # the leader is ahead of what this follower has confirmed
    assert follower.log_start_offset == 0
    follow_log_start(follower, 5)
    assert follower.log_start_offset == 5
    follower.close()
