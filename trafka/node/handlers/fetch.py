"""Fetch v4-13: read record batches, long-polling until `min_bytes` or `max_wait_ms`.

* v4: isolation_level, last_stable_offset, aborted_transactions (KIP-98). v5:
  log_start_offset (KIP-107). v6: no change. v7: incremental fetch sessions (KIP-227).
  v8: no change. v9: current_leader_epoch (KIP-320). v10: no change (ZStandard). v11:
  rack_id, preferred_read_replica (KIP-392, below). v12: flexible (KIP-482),
  last_fetched_epoch, diverging_epoch. v13: topic ids instead of names (KIP-516).

Long poll: if the first read finds fewer than `min_bytes`, the request parks until an append
or a HW move of one of its partitions wakes it (`ReplicaManager.watch`, keyed by partition
as Kafka's purgatory) or `max_wait_ms` expires. A wake-up reads again only the partitions
that have something to return (`ReplicaManager.poll` compares offsets, Kafka's
DelayedFetch.tryComplete); the others' empty answers take their current offsets; a
follower's fetch offsets are recorded by the first read only.
`max_bytes` bounds the response and `partition_max_bytes` each partition; the first batch
of the first non-empty partition is returned even when larger (KIP-74), so a consumer never
gets stuck. READ_COMMITTED reads stop at the last stable offset (= high watermark without
transactions) and carry the aborted transactions overlapping the records (from the
segments' `.txnindex`), so the consumer skips their batches. Errors per partition:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
OFFSET_OUT_OF_RANGE (fetch_offset below the log start or above the log end),
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320).

Fetch sessions (KIP-227): `trafka.node.fetch_sessions` decides, from `session_id` and
`session_epoch`, whether the request is sessionless, full (a session is created when the
cache has room: `max.incremental.fetch.session.cache.slots`) or incremental (the session's
partitions are read, the answer names only those with news), or a session error
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR: a
top-level error and no partitions). Followers' sessions are privileged. Every partition read
is authorized again on every request, those the session remembers included.

Topic ids (v13+, KIP-516): topics are named by id in requests, responses, forgotten topics
and sessions; an id the node does not know gets UNKNOWN_TOPIC_ID for its partitions.

The response is encoded by `trafka.net.fetch_encoding` with the records as segment file
regions, which the server sends with `os.sendfile` (no copy through Python).

Followers (replica_id >= 0, issue 5) read up to the log end offset and report their fetch
offset to the leader's replica bookkeeping (HW, ISR expansion).

Replication throttles (KIP-73): a follower outside the ISR gets no data for a partition of
this leader's `leader.replication.throttled.replicas` while `leader.replication.throttled.rate`
is exceeded (the replica manager decides per partition; such partitions do not count towards
`min_bytes`, as in Kafka's DelayedFetch); the bytes finally sent for listed partitions are
recorded against the leader quota once per response.

Authorization (Kafka's table): a consumer needs READ on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions, no data); a follower was admitted with
CLUSTER_ACTION by the node's dispatch (`trafka.node.security.inter_broker`).

Fetch from follower (KIP-392): a consumer's Fetch v11+ carries client metadata (`rack_id`),
so, as in Kafka, a follower serves it up to the follower's high watermark (the last stable
offset for READ_COMMITTED) with the follower's leader epoch for the FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH checks, OFFSET_OUT_OF_RANGE outside [log start, log end] (the client
then returns to the leader) and an empty answer between its HW and its log end; older
versions get NOT_LEADER_OR_FOLLOWER from a follower. With `replica.selector.class` set, the
leader answers such a fetch with `preferred_read_replica` and no records when the selector
picks a follower (`_client_rack`; the choice itself is
`trafka.node.replication.replica_selector`), and answers at once (no long poll).

Not implemented: v14+ (v15 moves the replica id into `replica_state`, KIP-903; v16 adds
node endpoints, KIP-951).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net import fetch_encoding
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import ms
from trafka.node.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    ContextKind,
    FetchContext,
    PartitionKey,
    PartitionRequest,
    QuietPartitions,
    TopicKey,
)
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice
from trafka.node.handlers.registry import register
from trafka.node.replication.replica_manager import ReadResult
from trafka.security.authorizer import AclOperation, ResourceType

_ZERO_UUID = uuid.UUID(int=0)
MAX_WAIT_CAP_MS = 60_000
"""Bound on how long a fetch may park (clients ask for 500 ms .. a few seconds)."""


Wanted = tuple[str | None, int, int, int, int]
"""A partition of the request: topic name (None: an unknown topic id), partition, fetch
offset, partition max bytes, current leader epoch."""


def _size(result: ReadResult) -> int:
    return result.size


@register(api_key=ApiKey.FETCH, name="Fetch", min_version=4, max_version=13)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    max_wait_ms = min(max(0, ms(request.max_wait)), MAX_WAIT_CAP_MS)
    min_bytes = int(request.min_bytes)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    isolation_level = int(getattr(request, "isolation_level", 0))
    replica_id = int(getattr(request, "replica_id", -1))
    context = _session_context(ctx, request, replica_id)
    if context.kind is ContextKind.SESSION_ERROR:
        completion = services.fetch_sessions.complete(context, (), _now_ms())
        return fetch_encoding.encode_fetch_response(
            ctx.api_version,
            fetch_encoding.FetchResponseData(topics=(), error_code=completion.error_code),
        )
    names = _topic_names(ctx, context)
    wanted = [
        (
            names[topic],
            partition,
            request_data.fetch_offset,
            request_data.partition_max_bytes,
            request_data.current_leader_epoch,
        )
        for (topic, partition), request_data in context.partitions
    ]
    client_rack = _client_rack(ctx, request, replica_id)
    readable = None
    if replica_id < 0:
        readable = ctx.authorized_names(
            AclOperation.READ, ResourceType.TOPIC, (w[0] for w in wanted if w[0] is not None)
        )
    deadline = trio.current_time() + max_wait_ms / 1000
    replicas = services.replicas
    keys = [(topic, partition) for topic, partition, *_ in wanted if topic is not None]
    # a follower waits for appends, a consumer for the HW; registered before the first
    # read, so that no change in between is missed
    waiter = replicas.watch(keys, log_end=replica_id >= 0)
    positions: dict[tuple[str, int], list[int]] | None = None

    async def read_again(partitions: list[Wanted]) -> list[ReadResult]:
        return await _read_all(
            ctx,
            partitions,
            max_bytes,
            isolation_level,
            replica_id,
            readable,
            client_rack,
            first_pass=False,
        )

    try:
        reads = await _first_reads(
            ctx, context, wanted, max_bytes, isolation_level, replica_id, readable, client_rack
        )
        # The first read pass is the request's only side effect (a follower's fetch offset
        # moves the HW); what follows is waiting, which must not hold back the connection.
        ctx.turn.release()
        while True:
            total = sum(_size(r) for r in reads)
            has_error = any(r.error_code != 0 or r.preferred_read_replica >= 0 for r in reads)
            if total >= min_bytes or has_error or not wanted or trio.current_time() >= deadline:
                break
            with trio.move_on_at(deadline):
                await waiter.wait()
            fired = replicas.rearm(waiter, keys)
            # Woken by an append or a HW move of some of our partitions (the first pass's
            # own follower fetch can be the cause), or the deadline: read again only those
            # that have something (Kafka's DelayedFetch.tryComplete); the others' answers
            # carry their current offsets (all of them at the deadline).
            at_deadline = trio.current_time() >= deadline
            if total == 0:
                only = None
                if fired is not None and not at_deadline:
                    if positions is None:
                        positions = _positions(wanted)
                    only = sorted({i for key in fired for i in positions.get(key, ())})
                again = await _read_changed(
                    ctx,
                    wanted,
                    reads,
                    read_again,
                    isolation_level,
                    replica_id,
                    at_deadline=at_deadline,
                    only=only,
                )
                if again is not None:
                    reads = again
                continue
            if not at_deadline and not await _any_fetchable(
                ctx, wanted, isolation_level, replica_id
            ):
                continue
            reads = await read_again(wanted)
    finally:
        replicas.unwatch(waiter, keys)
    if replica_id >= 0:
        services.replicas.record_leader_throttled_bytes(
            (topic, partition, result.size)
            for (topic, partition, *_), result in zip(wanted, reads, strict=True)
            if topic is not None
        )
    # the session picks what to answer from the reads; answers are built for those only
    # (an incremental follower Fetch names thousands of partitions, answers a few)
    completion = services.fetch_sessions.complete(context, reads, _now_ms())
    answers = {
        index: _answer(context.partitions[index][0][1], reads[index], isolation_level)
        for index in completion.selected
    }
    return fetch_encoding.encode_fetch_response(
        ctx.api_version,
        fetch_encoding.FetchResponseData(
            topics=_group_by_topic(context, names, answers, completion.selected),
            error_code=completion.error_code,
            session_id=completion.session_id,
        ),
    )


def _answer(
    partition: int, result: ReadResult, isolation_level: int
) -> fetch_encoding.FetchPartition:
    return fetch_encoding.FetchPartition(
        partition_index=partition,
        error_code=result.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=(
            tuple(
                fetch_encoding.AbortedTransaction(producer_id, first_offset)
                for producer_id, first_offset in result.aborted_transactions
            )
            if isolation_level == 1
            else None
        ),
        preferred_read_replica=result.preferred_read_replica,
        records=result.records,
    )


def _client_rack(ctx: RequestContext, request: Any, replica_id: int) -> str | None:
    """KIP-392: a consumer's Fetch v11+ has client metadata (its rack, maybe empty): it
    may be served by a follower or redirected to one. None: leader only."""
    if replica_id >= 0 or ctx.api_version < 11:
        return None
    return str(getattr(request, "rack_id", "") or "")


def _now_ms() -> int:
    return int(trio.current_time() * 1000)


def _session_context(ctx: RequestContext, request: Any, replica_id: int) -> FetchContext:
    """The request's partitions and forgotten partitions, keyed by topic name (v4-12) or
    topic id (v13+), handed to the session cache."""
    uses_topic_ids = ctx.api_version >= 13
    fetch_data: list[tuple[PartitionKey, PartitionRequest]] = []
    for topic in request.topics:
        topic_key = _topic_key(topic, uses_topic_ids)
        for p in topic.partitions:
            fetch_data.append(
                (
                    (topic_key, int(p.partition)),
                    PartitionRequest(
                        int(p.fetch_offset),
                        int(p.partition_max_bytes),
                        int(getattr(p, "current_leader_epoch", -1)),
                        int(getattr(p, "log_start_offset", -1)),
                    ),
                )
            )
    forgotten = [
        (_topic_key(topic, uses_topic_ids), int(partition))
        for topic in getattr(request, "forgotten_topics_data", ())
        for partition in topic.partitions
    ]
    session_id, epoch = INVALID_SESSION_ID, FINAL_EPOCH  # v4-6: no sessions
    if ctx.api_version >= 7:
        session_id, epoch = int(request.session_id), int(request.session_epoch)
    return ctx.services.fetch_sessions.new_context(
        session_id,
        epoch,
        privileged=replica_id >= 0,
        uses_topic_ids=uses_topic_ids,
        fetch_data=fetch_data,
        forgotten=forgotten,
        now_ms=_now_ms(),
    )


def _topic_key(topic: Any, uses_topic_ids: bool) -> TopicKey:
    if uses_topic_ids:
        return getattr(topic, "topic_id", None) or _ZERO_UUID
    return str(getattr(topic, "topic", "") or "")


def _topic_names(ctx: RequestContext, context: FetchContext) -> dict[TopicKey, str | None]:
    """Topic key -> name; None for a topic id the node does not know (UNKNOWN_TOPIC_ID)."""
    keys = {topic for (topic, _), _ in context.partitions}
    if not context.uses_topic_ids:
        return {key: str(key) for key in keys}
    by_id = {state.topic_id: state.name for state in ctx.services.topics.topics.values()}
    return {
        key: by_id.get(key) if isinstance(key, uuid.UUID) and key != _ZERO_UUID else None
        for key in keys
    }


def _group_by_topic(
    context: FetchContext,
    names: dict[TopicKey, str | None],
    answers: dict[int, fetch_encoding.FetchPartition],
    selected: list[int],
) -> tuple[fetch_encoding.FetchTopic, ...]:
    """Consecutive selected partitions of one topic make one topic entry (Kafka's
    `FetchResponse.of`: a session's order may name a topic again later)."""
    topics: list[fetch_encoding.FetchTopic] = []
    current: TopicKey | None = None
    partitions: list[fetch_encoding.FetchPartition] = []
    for index in selected:
        topic = context.partitions[index][0][0]
        if topic != current and partitions:
            topics.append(_topic_entry(current, names, partitions))
            partitions = []
        current = topic
        partitions.append(answers[index])
    if partitions:
        topics.append(_topic_entry(current, names, partitions))
    return tuple(topics)


def _topic_entry(
    topic: TopicKey | None,
    names: dict[TopicKey, str | None],
    partitions: list[fetch_encoding.FetchPartition],
) -> fetch_encoding.FetchTopic:
    if isinstance(topic, uuid.UUID):
        return fetch_encoding.FetchTopic(
            name=names.get(topic) or "", partitions=tuple(partitions), topic_id=topic
        )
    return fetch_encoding.FetchTopic(name=str(topic or ""), partitions=tuple(partitions))


async def _any_fetchable(
    ctx: RequestContext,
    wanted: list[Wanted],
    isolation_level: int,
    replica_id: int,
) -> bool:
    fetchable = ctx.services.replicas.fetchable
    loop_slice = LoopSlice()  # thousands of partitions: the loop is not held
    for topic, partition, fetch_offset, _, leader_epoch in wanted:
        await loop_slice.tick()
        if topic is None or fetchable(
            topic,
            partition,
            fetch_offset,
            isolation_level=isolation_level,
            current_leader_epoch=leader_epoch,
            replica_id=replica_id,
        ):
            return True
    return False


def _positions(
    wanted: list[Wanted],
) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> its positions in the request (a partition may repeat)."""
    positions: dict[tuple[str, int], list[int]] = {}
    for index, (topic, partition, *_) in enumerate(wanted):
        if topic is not None:
            positions.setdefault((topic, partition), []).append(index)
    return positions


async def _first_reads(
    ctx: RequestContext,
    context: FetchContext,
    wanted: list[Wanted],
    max_bytes: int,
    isolation_level: int,
    replica_id: int,
    readable: set[str] | None,
    client_rack: str | None,
) -> list[ReadResult]:
    """The request's first read pass. A follower's incremental Fetch reads only the
    partitions it names, those that changed since its last reads and those that were not
    caught up; the others answer from its session what a read would
    (`fetch_sessions.QuietPartitions`), and are all read every `quiet_walk_ms`."""
    session = context.session
    if replica_id < 0 or context.kind is not ContextKind.INCREMENTAL or session is None:
        return await _read_all(
            ctx, wanted, max_bytes, isolation_level, replica_id, readable, client_rack
        )
    replicas = ctx.services.replicas
    now_ms = _now_ms()
    seq, leadership_epoch = replicas.change_seq, replicas.leadership_epoch
    quiet = session.quiet
    if (
        quiet is not None
        and quiet.leadership_epoch == leadership_epoch
        and now_ms - quiet.walked_all_ms < replicas.quiet_walk_ms
    ):
        reads = _quiet_answers(context, wanted, quiet, replicas.changed_since)
        to_read = [index for index, read in enumerate(reads) if read is None]
    else:
        quiet = session.quiet = QuietPartitions(set(), seq, leadership_epoch, now_ms)
        reads = [None] * len(wanted)
        to_read = list(range(len(wanted)))
    caught_up: list[int] = []
    fresh = await _read_all(
        ctx,
        [wanted[index] for index in to_read],
        max_bytes,
        isolation_level,
        replica_id,
        readable,
        client_rack,
        caught_up=caught_up,
    )
    for index in to_read:
        quiet.keys.discard(context.partitions[index][0])
    for position in caught_up:
        quiet.keys.add(context.partitions[to_read[position]][0])
    quiet.seq = seq
    for index, result in zip(to_read, fresh, strict=True):
        reads[index] = result
    return [read for read in reads if read is not None]


def _quiet_answers(
    context: FetchContext,
    wanted: list[Wanted],
    quiet: QuietPartitions,
    changed_since: Callable[[str, int, int], bool],
) -> list[ReadResult | None]:
    """Per partition: its answer from the session when it is quiet (caught up at the last
    read, not named, unchanged since), else None (to read)."""
    cached = context.session.partitions if context.session is not None else {}
    answers: list[ReadResult | None] = []
    for (key, _), (topic, partition, *_) in zip(context.partitions, wanted, strict=True):
        entry = cached.get(key)
        if (
            topic is None
            or entry is None
            or entry.high_watermark < 0
            or key not in quiet.keys
            or key in context.named
            or changed_since(topic, partition, quiet.seq)
        ):
            answers.append(None)
        else:
            answers.append(
                ReadResult(
                    0, entry.high_watermark, entry.last_stable_offset, entry.log_start_offset
                )
            )
    return answers


async def _read_changed(
    ctx: RequestContext,
    wanted: list[Wanted],
    previous: list[ReadResult],
    read_again: Callable[[list[Wanted]], Awaitable[list[ReadResult]]],
    isolation_level: int,
    replica_id: int,
    *,
    at_deadline: bool,
    only: list[int] | None = None,
) -> list[ReadResult] | None:
    """A woken parked Fetch whose reads were all empty: read again only the partitions
    `poll` says have something (records, or an error for the real read to name); the
    others keep their empty answer with their current offsets. `only`: the positions of
    the partitions whose watch fired (None: all). None when nothing has anything and the
    deadline is not reached (park again)."""
    poll = ctx.services.replicas.poll
    reads = list(previous)
    changed: list[int] = []
    loop_slice = LoopSlice()  # thousands of partitions: the loop is not held
    for index in range(len(wanted)) if only is None else only:
        topic, partition, fetch_offset, _, leader_epoch = wanted[index]
        await loop_slice.tick()
        if topic is None:
            continue  # answered UNKNOWN_TOPIC_ID by the first pass
        offsets = poll(
            topic,
            partition,
            fetch_offset,
            isolation_level=isolation_level,
            current_leader_epoch=leader_epoch,
            replica_id=replica_id,
        )
        if offsets is None:
            changed.append(index)
            continue
        old = previous[index]
        if (old.high_watermark, old.last_stable_offset, old.log_start_offset) != offsets:
            reads[index] = ReadResult(0, *offsets)
    if not changed:
        return reads if at_deadline else None
    fresh = await read_again([wanted[index] for index in changed])
    for index, result in zip(changed, fresh, strict=True):
        reads[index] = result
    return reads


async def _read_all(
    ctx: RequestContext,
    wanted: list[Wanted],
    max_bytes: int,
    isolation_level: int,
    replica_id: int = -1,
    readable: set[str] | None = None,
    client_rack: str | None = None,
    *,
    first_pass: bool = True,
    caught_up: list[int] | None = None,
) -> list[ReadResult]:
    """Read every wanted partition; only the request's first pass records a follower's
    fetch offsets (its LEO, the HW, the ISR). `caught_up` collects the positions of the
    partitions where the follower is at the log end."""
    replica_manager = ctx.services.replicas
    read_caught_up = replica_manager.read_caught_up if replica_id >= 0 and first_pass else None
    remaining = max_bytes
    results: list[ReadResult] = []
    first_data = True
    loop_slice = LoopSlice()  # thousands of partitions: the loop is not held
    for index, (topic, partition, fetch_offset, partition_max_bytes, leader_epoch) in enumerate(
        wanted
    ):
        await loop_slice.tick()
        if topic is None:  # a topic id this node does not know (v13+)
            results.append(ReadResult(int(ErrorCode.unknown_topic_id)))
            continue
        if read_caught_up is not None:
            result = read_caught_up(topic, partition, fetch_offset, leader_epoch, replica_id)
            if result is not None:
                if caught_up is not None:
                    caught_up.append(index)
                results.append(result)
                continue
        if readable is not None and topic not in readable:
            results.append(ReadResult(int(ErrorCode.topic_authorization_failed)))
            continue
        limit = max(0, min(partition_max_bytes, remaining))
        result = replica_manager.read(
            topic,
            partition,
            fetch_offset,
            max_bytes=limit,
            isolation_level=isolation_level,
            current_leader_epoch=leader_epoch,
            min_one_batch=first_data,
            replica_id=replica_id,
            client_rack=client_rack,
            record_follower_fetch=first_pass,
        )
        if result.size > 0:
            first_data = False
            remaining = max(0, remaining - result.size)
        results.append(result)
    return results
