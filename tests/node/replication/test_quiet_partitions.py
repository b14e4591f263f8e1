"""A follower's incremental Fetch on its leader reads only what may have changed (issue 19):
the partitions it names, those with an append, HW move or DeleteRecords since its last
reads, those it was behind on; every `quiet_walk_ms`, and after a leadership change, all of
them. The others answer from its fetch session exactly what a read would.

Driven through the Fetch handler itself, with a real replica manager and session cache."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64

from tests.node.replication.leaders import leading
from trafka.log.records import NewRecord, build_batch
from trafka.net import codec
from trafka.net.server import RequestTurn
from trafka.node.fetch_sessions import FetchSessionCache
from trafka.node.handlers import fetch
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.replication.replica_manager import PartitionStateUpdate, ReplicaManager

NOW = 1_700_000_000_000
TOPIC = "quiet"
LAG_MS = 500  # quiet_walk_ms = 100


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


class _Leader:
    """Node 1 leads quiet-0..2 (ISR 1, 2); `fetch` sends the Fetch handler follower 2's
    request and counts the partitions the leader read for it."""

    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager
        self.sessions = FetchSessionCache(10, rng=random.Random(1))
        self.session_id = 0
        self.epoch = 0
        self.reads: set[int] = set()
        """The partitions read for the last request."""
        inner = manager.read_caught_up

        def counting(topic: str, partition: int, *args: int) -> Any:
            self.reads.add(partition)
            return inner(topic, partition, *args)

        manager.read_caught_up = counting  # type: ignore[method-assign]

    async def fetch(self, offsets: dict[int, int]) -> dict[int, Any]:
        """Follower 2's next request naming `offsets` (partition -> fetch offset); the
        answered partitions."""
        self.reads.clear()
        request = fetch12.FetchRequest(
            replica_id=BrokerId(2),
            max_wait=timedelta(0),  # type: ignore[arg-type]
            min_bytes=i32(1),
            session_id=i32(self.session_id),
            session_epoch=i32(self.epoch),
            topics=(
                fetch12.FetchTopic(
                    topic=TopicName(TOPIC),
                    partitions=tuple(
                        fetch12.FetchPartition(
                            partition=i32(p),
                            current_leader_epoch=i32(1),
                            fetch_offset=i64(o),
                            partition_max_bytes=i32(1 << 20),
                        )
                        for p, o in offsets.items()
                    ),
                ),
            )
            if offsets
            else (),
            forgotten_topics_data=(),
        )
        ctx = SimpleNamespace(
            services=SimpleNamespace(
                fetch_sessions=self.sessions, replicas=self.manager, topics=None
            ),
            api_version=12,
            turn=RequestTurn.first(),
        )
        encoded = await fetch.handle(ctx, request)  # type: ignore[arg-type]
        body = b"".join(bytes(chunk) for chunk in encoded.chunks)
        response = codec.decode_response(1, 12, body, 0)
        assert response.error_code == 0
        self.session_id = int(response.session_id)
        self.epoch += 1
        return {int(p.partition_index): p for t in response.responses for p in t.partitions}


async def _leader(tmp_path: Path, store: MetadataStore) -> _Leader:
    return _Leader(await leading(tmp_path, store, TOPIC, 3, replica_lag_time_max_ms=LAG_MS))


def _append(manager: ReplicaManager, partition: int) -> None:
    result = manager.append_records(
        TOPIC, partition, build_batch([NewRecord(b"x" * 10, timestamp=NOW)]), required_acks=1
    )
    assert getattr(result, "error_code", 0) == 0


async def test_quiet_partitions_are_answered_from_the_session_until_they_change(
    tmp_path: Path, store: MetadataStore
) -> None:
    leader = await _leader(tmp_path, store)
    assert leader.manager.quiet_walk_ms == 100
    first = await leader.fetch({0: 0, 1: 0, 2: 0})  # full: a new session
    assert sorted(first) == [0, 1, 2] and leader.session_id != 0
    assert leader.reads == {0, 1, 2}
    assert await leader.fetch({}) == {}  # the first incremental reads everything once
    assert leader.reads == {0, 1, 2}
    assert await leader.fetch({}) == {}
    assert leader.reads == set()  # all quiet

    _append(leader.manager, 1)  # quiet-1 changes: read, and its records answered
    answered = await leader.fetch({})
    assert leader.reads == {1}
    assert list(answered) == [1] and answered[1].records
    assert answered[1].high_watermark == 0

    answered = await leader.fetch({1: 1})  # named: read; the follower's LEO moves the HW
    assert leader.reads == {1}
    assert list(answered) == [1] and answered[1].high_watermark == 1
    assert await leader.fetch({}) == {}
    assert leader.reads == {1}  # its HW moved during the last read: read once more
    assert await leader.fetch({}) == {}
    assert leader.reads == set()

    _append(leader.manager, 2)  # a follower behind stays read until it catches up
    assert list(await leader.fetch({})) == [2]
    assert leader.reads == {2}
    await leader.fetch({})
    assert leader.reads == {2}  # still behind (the follower did not take the records)
    await leader.fetch({2: 1})
    await leader.fetch({})
    assert leader.reads == {2}  # its HW moved at the previous request
    assert await leader.fetch({}) == {}
    assert leader.reads == set()


async def test_everything_is_read_again_after_a_while_and_after_a_leadership_change(
    tmp_path: Path, store: MetadataStore
) -> None:
    leader = await _leader(tmp_path, store)
    await leader.fetch({0: 0, 1: 0, 2: 0})
    await leader.fetch({})
    await leader.fetch({})
    assert leader.reads == set()
    await trio.sleep(0.15)  # quiet_walk_ms: the follower's caught-up time is refreshed
    await leader.fetch({})
    assert leader.reads == {0, 1, 2}
    await leader.fetch({})
    assert leader.reads == set()
    leader.manager.apply_leader_and_isr(
        [PartitionStateUpdate(TOPIC, p, 1, 1, 2, (1, 2), 1, (1, 2)) for p in range(3)]
    )
    answered = await leader.fetch({})  # epoch 2 now: the follower's epoch 1 is fenced
    assert leader.reads == {0, 1, 2}
    assert {p.error_code for p in answered.values()} == {74}  # FENCED_LEADER_EPOCH


async def test_delete_records_is_answered_at_once(tmp_path: Path, store: MetadataStore) -> None:
    leader = await _leader(tmp_path, store)
    _append(leader.manager, 0)
    _append(leader.manager, 0)
    await leader.fetch({0: 0, 1: 0, 2: 0})
    await leader.fetch({0: 2})  # caught up; HW 2
    await leader.fetch({})
    await leader.fetch({})
    assert leader.reads == set()
    assert leader.manager.delete_records_before(TOPIC, 0, 1) == (0, 1)
    answered = await leader.fetch({})
    assert leader.reads == {0}
    assert answered[0].log_start_offset == 1
