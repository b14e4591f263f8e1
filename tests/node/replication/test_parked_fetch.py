"""Parked fetches on the leader (issue 19, G1): a woken Fetch asks `fetchable` (offsets only,
Kafka's DelayedFetch.tryComplete) before reading again, and only a Fetch's first read records
the follower's offset (`record_follower_fetch`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.node.replication.leaders import leading
from trafka.log.records import NewRecord, build_batch
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager

NOW = 1_700_000_000_000
TOPIC = "parked"


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


async def _leader(tmp_path: Path, store: MetadataStore) -> ReplicaManager:
    """Node 1 leads `parked-0` (epoch 1), replicas and ISR (1, 2)."""
    return await leading(tmp_path, store, TOPIC)


def _append(manager: ReplicaManager, count: int = 1) -> None:
    for _ in range(count):
        result = manager.append_records(
            TOPIC, 0, build_batch([NewRecord(b"x" * 10, timestamp=NOW)]), required_acks=1
        )
        assert getattr(result, "error_code", 0) == 0


def _follower_read(manager: ReplicaManager, offset: int, *, record: bool = True) -> int:
    result = manager.read(
        TOPIC,
        0,
        offset,
        max_bytes=1 << 20,
        isolation_level=0,
        replica_id=2,
        record_follower_fetch=record,
    )
    assert result.error_code == 0
    return result.size


async def test_a_follower_at_the_log_end_has_nothing_until_an_append(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 2)
    assert not manager.fetchable(TOPIC, 0, 2, isolation_level=0, replica_id=2)
    assert manager.fetchable(TOPIC, 0, 1, isolation_level=0, replica_id=2)
    _append(manager)
    assert manager.fetchable(TOPIC, 0, 2, isolation_level=0, replica_id=2)


async def test_a_consumer_waits_for_the_high_watermark_not_the_log_end(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 3)  # ISR (1, 2): the HW stays at 0 until the follower fetches
    assert not manager.fetchable(TOPIC, 0, 0, isolation_level=0)
    assert not manager.fetchable(TOPIC, 0, 0, isolation_level=1)
    _follower_read(manager, 3)  # the follower has everything: HW 3
    assert manager.fetchable(TOPIC, 0, 0, isolation_level=0)
    assert manager.fetchable(TOPIC, 0, 2, isolation_level=1)
    assert not manager.fetchable(TOPIC, 0, 3, isolation_level=0)


async def test_anything_unusual_is_left_to_the_real_read(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 2)
    # another leader epoch, an offset past the log end, a partition this node does not lead
    assert manager.fetchable(TOPIC, 0, 2, isolation_level=0, replica_id=2, current_leader_epoch=2)
    assert manager.fetchable(TOPIC, 0, 5, isolation_level=0, replica_id=2)
    assert manager.fetchable(TOPIC, 1, 0, isolation_level=0)
    assert manager.fetchable("unknown", 0, 0, isolation_level=0)
    # the same epoch is not unusual
    assert not manager.fetchable(
        TOPIC, 0, 2, isolation_level=0, replica_id=2, current_leader_epoch=1
    )


async def test_only_the_first_read_of_a_fetch_records_the_follower(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 2)
    log = manager.get_or_create_log(TOPIC, 0)
    assert int(log.high_watermark) == 0
    # a parked Fetch read again (from its original offset 2) records nothing: the HW
    # does not move on a re-read
    assert _follower_read(manager, 2, record=False) == 0
    assert int(log.high_watermark) == 0
    # the Fetch's first read records the follower's offset: the HW follows
    assert _follower_read(manager, 2) == 0
    assert int(log.high_watermark) == 2


async def test_a_parked_fetch_wakes_only_for_its_own_partitions(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    mine = manager.watch([(TOPIC, 0), ("other", 0)])
    elsewhere = manager.watch([("other", 0), ("other", 1)])
    _append(manager)  # an append to parked-0 wakes its watchers only, naming it
    assert mine.event.is_set()
    assert not elsewhere.event.is_set()
    assert manager.rearm(mine, [(TOPIC, 0), ("other", 0)]) == [(TOPIC, 0)]
    assert not mine.event.is_set()
    # the follower's fetch moves the HW of parked-0: its HW watchers (consumers, acks=all
    # produces) wake; a follower's parked fetch waits for records, not for the HW
    follower = manager.watch([(TOPIC, 0)], log_end=True)
    _follower_read(manager, 1)
    assert mine.event.is_set()  # rearmed: registered again under parked-0
    assert not follower.event.is_set()
    assert not elsewhere.event.is_set()
    _append(manager)
    assert follower.event.is_set()
    manager.unwatch(follower, [(TOPIC, 0)])
    # a leadership change wakes every watcher (their partitions may have changed hands)
    manager.apply_leader_and_isr([PartitionStateUpdate(TOPIC, 0, 1, 1, 2, (1, 2), 0, (1, 2))])
    assert elsewhere.event.is_set()
    assert manager.rearm(elsewhere, [("other", 0), ("other", 1)]) is None


async def test_an_unwatched_event_is_not_woken_again(tmp_path: Path, store: MetadataStore) -> None:
    manager = await _leader(tmp_path, store)
    keys = [(TOPIC, 0)]
    for _ in range(3):
        old = manager.watch(keys)
        manager.unwatch(old, keys)
    _append(manager)
    assert not old.event.is_set()  # forgotten: a parked fetch that left is not kept alive


async def test_poll_gives_the_offsets_of_an_empty_answer(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 2)
    assert manager.poll(TOPIC, 0, 1, isolation_level=0, replica_id=2) is None  # records
    _follower_read(manager, 2)  # HW 2
    assert manager.poll(TOPIC, 0, 2, isolation_level=0, replica_id=2) == (2, 2, 0)
    assert manager.poll(TOPIC, 0, 2, isolation_level=1) == (2, 2, 0)
    assert manager.poll(TOPIC, 0, 1, isolation_level=0) is None


async def test_a_caught_up_followers_read_is_recorded_and_checked(
    tmp_path: Path, store: MetadataStore
) -> None:
    manager = await _leader(tmp_path, store)
    _append(manager, 2)
    log = manager.get_or_create_log(TOPIC, 0)
    # at the log end (the common case, answered without the general path's lookups): the
    # follower's offset is recorded (the HW follows) and the answer is empty
    result = manager.read(TOPIC, 0, 2, max_bytes=1 << 20, isolation_level=0, replica_id=2)
    assert (result.error_code, result.size, result.high_watermark) == (0, 0, 2)
    assert int(log.high_watermark) == 2
    # still checked like any read: a newer leader epoch than the leader's is refused
    stale = manager.read(
        TOPIC, 0, 2, max_bytes=1 << 20, isolation_level=0, replica_id=2, current_leader_epoch=7
    )
    assert stale.error_code == ErrorCode.unknown_leader_epoch
