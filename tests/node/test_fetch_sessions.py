"""The fetch session cache (KIP-227) as pure logic: contexts, epochs, answers, eviction."""

from __future__ import annotations

import random
import uuid

from kio.schema.errors import ErrorCode

from trafka.net.fetch_encoding import FetchPartition
from trafka.node.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_EPOCH,
    ContextKind,
    FetchContext,
    FetchSessionCache,
    PartitionKey,
    PartitionRequest,
    next_epoch,
)

NOW = 1_000_000


def _data(*keys: PartitionKey, offset: int = 0) -> list[tuple[PartitionKey, PartitionRequest]]:
    return [(key, PartitionRequest(offset, 1024)) for key in keys]


def _answer(hw: int = 10, *, records: bool = False, error: int = 0) -> FetchPartition:
    return FetchPartition(
        partition_index=0,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=hw,
        log_start_offset=0,
        records=(b"batch",) if records else (),
    )


def _cache(slots: int = 10, **kwargs: int) -> FetchSessionCache:
    return FetchSessionCache(slots, rng=random.Random(7), **kwargs)


def _open(
    cache: FetchSessionCache,
    keys: list[PartitionKey],
    *,
    privileged: bool = False,
    now: int = NOW,
    hw: int = 10,
) -> int:
    """A full fetch asking for a session; returns the session id (0: none)."""
    context = cache.new_context(
        0,
        INITIAL_EPOCH,
        privileged=privileged,
        uses_topic_ids=False,
        fetch_data=_data(*keys),
        forgotten=(),
        now_ms=now,
    )
    assert context.kind is ContextKind.FULL
    completion = cache.complete(context, [_answer(hw) for _ in keys], now)
    assert completion.selected == list(range(len(keys)))
    return completion.session_id


def _incremental(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    data: list[tuple[PartitionKey, PartitionRequest]] | None = None,
    forgotten: tuple[PartitionKey, ...] = (),
    *,
    now: int = NOW,
    uses_topic_ids: bool = False,
) -> FetchContext:
    return cache.new_context(
        session_id,
        epoch,
        privileged=False,
        uses_topic_ids=uses_topic_ids,
        fetch_data=data or [],
        forgotten=forgotten,
        now_ms=now,
    )


def test_epochs_follow_kafka() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_and_sessionless_does_not() -> None:
    cache = _cache()
    keys: list[PartitionKey] = [("t", p) for p in range(3)]
    session_id = _open(cache, keys)
    assert session_id > 0 and len(cache) == 1 and cache.total_partitions == 3
    context = cache.new_context(
        0,
        FINAL_EPOCH,
        privileged=False,
        uses_topic_ids=False,
        fetch_data=_data(*keys),
        forgotten=(),
        now_ms=NOW,
    )
    assert context.kind is ContextKind.SESSIONLESS
    assert cache.complete(context, [_answer()] * 3, NOW).session_id == 0
    assert len(cache) == 1


def test_incremental_reads_the_session_and_answers_only_changes() -> None:
    cache = _cache()
    keys: list[PartitionKey] = [("t", p) for p in range(4)]
    session_id = _open(cache, keys)
    context = _incremental(cache, session_id, 1)
    assert context.kind is ContextKind.INCREMENTAL
    assert [key for key, _ in context.partitions] == keys  # the session's partitions
    answers = [_answer(10), _answer(11), _answer(10, records=True), _answer(10, error=6)]
    completion = cache.complete(context, answers, NOW)
    assert completion.error_code == 0 and completion.session_id == session_id
    assert completion.selected == [1, 2, 3]  # HW moved, records, error; not the unchanged
    # the partition with records went to the end of the session's order
    context = _incremental(cache, session_id, 2)
    assert [key for key, _ in context.partitions] == [keys[0], keys[1], keys[3], keys[2]]
    answers = [_answer(10), _answer(11), _answer(10), _answer(10)]
    # the errored partition is named again once the error is gone
    assert cache.complete(context, answers, NOW).selected == [2]


def test_incremental_adds_updates_and_forgets() -> None:
    cache = _cache()
    session_id = _open(cache, [("t", 0), ("t", 1)])
    context = _incremental(
        cache, session_id, 1, [(("t", 1), PartitionRequest(55, 9)), *_data(("u", 0))], (("t", 0),)
    )
    assert dict(context.partitions) == {
        ("t", 1): PartitionRequest(55, 9),
        ("u", 0): PartitionRequest(0, 1024),
    }
    completion = cache.complete(context, [_answer(10), _answer(3)], NOW)
    assert completion.selected == [1]  # the added partition is new: always named once
    assert cache.total_partitions == 2
    # forgetting everything closes the session: a sessionless answer
    context = _incremental(cache, session_id, 2, None, (("t", 1), ("u", 0)))
    assert context.kind is ContextKind.SESSIONLESS
    assert cache.complete(context, [], NOW).session_id == 0
    assert len(cache) == 0 and cache.total_partitions == 0


def test_session_errors() -> None:
    cache = _cache()
    session_id = _open(cache, [("t", 0)])
    unknown = _incremental(cache, session_id + 1, 1)
    assert unknown.error_code == ErrorCode.fetch_session_id_not_found
    assert cache.complete(unknown, [], NOW).error_code == ErrorCode.fetch_session_id_not_found
    wrong_epoch = _incremental(cache, session_id, 5)
    assert wrong_epoch.kind is ContextKind.SESSION_ERROR
    assert wrong_epoch.error_code == ErrorCode.invalid_fetch_session_epoch
    with_ids = _incremental(cache, session_id, 1, uses_topic_ids=True)
    assert with_ids.error_code == ErrorCode.fetch_session_topic_id_error
    assert cache.get(session_id) is not None  # errors leave the session alone
    assert _incremental(cache, session_id, 1).kind is ContextKind.INCREMENTAL


def test_a_duplicate_request_gets_invalid_epoch_at_completion() -> None:
    cache = _cache()
    session_id = _open(cache, [("t", 0)])
    first = _incremental(cache, session_id, 1)
    second = _incremental(cache, session_id, 2)  # pipelined: the next epoch
    late = cache.complete(first, [_answer()], NOW)
    assert late.error_code == ErrorCode.invalid_fetch_session_epoch and late.selected == []
    assert cache.complete(second, [_answer()], NOW).error_code == 0


def test_full_fetch_naming_a_session_closes_it() -> None:
    cache = _cache()
    session_id = _open(cache, [("t", 0)])
    context = cache.new_context(
        session_id,
        FINAL_EPOCH,
        privileged=False,
        uses_topic_ids=False,
        fetch_data=_data(("t", 0)),
        forgotten=(),
        now_ms=NOW,
    )
    assert context.kind is ContextKind.SESSIONLESS
    assert cache.get(session_id) is None and cache.total_partitions == 0


def test_topic_id_sessions_key_by_id() -> None:
    cache = _cache()
    topic_id = uuid.uuid4()
    context = cache.new_context(
        0,
        0,
        privileged=False,
        uses_topic_ids=True,
        fetch_data=_data((topic_id, 0)),
        forgotten=(),
        now_ms=NOW,
    )
    session_id = cache.complete(context, [_answer()], NOW).session_id
    assert _incremental(cache, session_id, 1).error_code == ErrorCode.fetch_session_topic_id_error
    context = _incremental(cache, session_id, 1, forgotten=((topic_id, 0),), uses_topic_ids=True)
    assert context.kind is ContextKind.SESSIONLESS


def test_no_slots_means_no_sessions() -> None:
    cache = _cache(slots=0)
    assert _open(cache, [("t", 0)]) == 0 and len(cache) == 0


def test_slot_limit_and_eviction_order() -> None:
    cache = _cache(slots=2)
    small = _open(cache, [("a", 0)])
    big = _open(cache, [("b", p) for p in range(3)])
    # full, both young: a consumer session of any size cannot evict a young one
    assert _open(cache, [("c", p) for p in range(10)]) == 0
    # a follower (privileged) evicts the least valuable consumer session: the smallest
    follower = _open(cache, [("f", 0)], privileged=True)
    assert follower > 0 and cache.get(small) is None and cache.get(big) is not None
    # once old enough, a bigger consumer session evicts a smaller one, never a follower's
    # (the follower's session stays in use: not stale)
    later = NOW + EVICTION_MS + 1
    assert _incremental(cache, big, 1, now=later).kind is ContextKind.INCREMENTAL
    context = cache.new_context(
        follower,
        1,
        privileged=True,
        uses_topic_ids=False,
        fetch_data=[],
        forgotten=(),
        now_ms=later,
    )
    assert context.kind is ContextKind.INCREMENTAL
    assert _open(cache, [("d", 0)], now=later) == 0  # smaller than both: refused
    bigger = _open(cache, [("e", p) for p in range(5)], now=later)
    assert bigger > 0 and cache.get(big) is None and cache.get(follower) is not None
    assert cache.stats.evictions == 2


def test_stale_sessions_are_evicted_first() -> None:
    cache = _cache(slots=2)
    old = _open(cache, [("a", p) for p in range(50)], privileged=True)
    kept = _open(cache, [("b", 0)], now=NOW + EVICTION_MS)
    # `old` was last used more than EVICTION_MS ago: any newcomer evicts it, even a tiny one
    newcomer = _open(cache, [("c", 0)], now=NOW + EVICTION_MS + 1)
    assert newcomer > 0 and cache.get(old) is None and cache.get(kept) is not None


def test_least_recently_used_is_the_stale_one() -> None:
    cache = _cache(slots=2)
    first = _open(cache, [("a", 0)])
    second = _open(cache, [("b", 0)], now=NOW + 1)
    # first is used again later than second: second is now the least recently used
    assert _incremental(cache, first, 1, now=NOW + 2).kind is ContextKind.INCREMENTAL
    third = _open(cache, [("c", 0)], now=NOW + EVICTION_MS + 2)
    assert third > 0 and cache.get(second) is None and cache.get(first) is not None


def test_cached_partitions_are_bounded() -> None:
    cache = _cache(slots=100, max_cached_partitions=10)
    session_id = _open(cache, [("t", p) for p in range(8)])
    assert session_id > 0
    assert _open(cache, [("u", p) for p in range(3)]) == 0  # does not fit: sessionless
    # growing the session past the bound closes it, as an eviction would
    context = _incremental(cache, session_id, 1, _data(*[("v", p) for p in range(3)]))
    assert context.error_code == ErrorCode.fetch_session_id_not_found
    assert cache.get(session_id) is None and cache.total_partitions == 0


def test_many_sessions_keep_the_heaps_bounded() -> None:
    cache = _cache(slots=50)
    ids = [_open(cache, [("t", n)], now=NOW + n) for n in range(50)]
    epochs = dict.fromkeys(ids, 1)
    rng = random.Random(3)
    for step in range(5000):  # sizes change all the time: heap entries go stale
        session_id = rng.choice(ids)
        context = _incremental(
            cache,
            session_id,
            epochs[session_id],
            _data(("x", step)),
            now=NOW + EVICTION_MS + 100 + step,
        )
        assert context.kind is ContextKind.INCREMENTAL
        epochs[session_id] += 1
    assert len(cache._by_all) <= 2 * len(cache) + 17
    assert len(cache._by_privileged) <= 2 * len(cache) + 17
    assert cache.total_partitions == sum(
        len(s.partitions) for s in (cache.get(i) for i in ids) if s is not None
    )


def test_random_hostile_requests_keep_the_invariants() -> None:
    """Random full, incremental, forgetting and bogus requests from consumers and followers:
    never more sessions than slots, the partition count always right, never an exception."""
    rng = random.Random(11)
    cache = _cache(slots=8, max_cached_partitions=60)
    known: list[int] = []
    now = NOW
    for _ in range(3000):
        now += rng.choice((0, 1, 1000, EVICTION_MS // 3))
        keys: list[PartitionKey] = [
            (rng.choice(("a", "b", "c")), rng.randrange(8)) for _ in range(rng.randrange(12))
        ]
        session_id = rng.choice([0, rng.randrange(-5, 2**31), *known])
        epoch = rng.choice((-1, 0, 1, 2, rng.randrange(-3, 50)))
        existing = cache.get(session_id)
        if existing is not None and rng.random() < 0.7:
            epoch = existing.epoch  # mostly well-behaved
        context = cache.new_context(
            session_id,
            epoch,
            privileged=rng.random() < 0.2,
            uses_topic_ids=rng.random() < 0.05,
            fetch_data=_data(*keys),
            forgotten=[(rng.choice(("a", "b")), rng.randrange(8)) for _ in range(2)],
            now_ms=now,
        )
        answers = [
            _answer(rng.randrange(3), records=rng.random() < 0.3) for _ in context.partitions
        ]
        completion = cache.complete(context, answers, now)
        assert all(0 <= i < len(context.partitions) for i in completion.selected)
        if completion.session_id:
            known.append(completion.session_id)
        assert len(cache) <= 8
        live = [cache.get(i) for i in set(known)]
        assert cache.total_partitions == sum(len(s.partitions) for s in live if s is not None)
        assert cache.total_partitions <= 60
