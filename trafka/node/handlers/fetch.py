"""Fetch v4-12: read record batches, long-polling until `min_bytes` or `max_wait_ms`.

* v4: isolation_level, last_stable_offset, aborted_transactions (KIP-98). v5:
  log_start_offset (KIP-107). v6: no change. v7: incremental fetch sessions (KIP-227).
  v8: no change. v9: current_leader_epoch (KIP-320). v10: no change (ZStandard). v11:
  rack_id, preferred_read_replica (KIP-392; we never redirect). v12: flexible (KIP-482),
  last_fetched_epoch, diverging_epoch.

Long poll: if the first read finds fewer than `min_bytes`, the request parks until an append
or a HW move wakes it (the replica manager's append event) or `max_wait_ms` expires. A
wake-up reads again only if one of the request's partitions has something to return
(`ReplicaManager.fetchable` compares offsets, Kafka's DelayedFetch.tryComplete), and at the
deadline; a follower's fetch offsets are recorded by the first read only.
`max_bytes` bounds the response and `partition_max_bytes` each partition; the first batch
of the first non-empty partition is returned even when larger (KIP-74), so a consumer never
gets stuck. READ_COMMITTED reads stop at the last stable offset (= high watermark without
transactions) and carry the aborted transactions overlapping the records (from the
segments' `.txnindex`), so the consumer skips their batches. Errors per partition:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
OFFSET_OUT_OF_RANGE (fetch_offset below the log start or above the log end),
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320).

Fetch sessions (KIP-227): we keep none. A full fetch (session_id 0) is answered as a full
sessionless response (session_id 0), which every client accepts and keeps sending full
requests; a request naming a session (session_id != 0) gets FETCH_SESSION_ID_NOT_FOUND, the
error Kafka gives for an evicted session, after which clients start over with a full fetch.

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

Not implemented: incremental fetch sessions themselves, topic ids in requests (v13+ is not
advertised), preferred read replicas.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net import fetch_encoding
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, ms, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice
from trafka.node.handlers.registry import register
from trafka.node.replication.replica_manager import ReadResult
from trafka.security.authorizer import AclOperation, ResourceType

FINAL_EPOCH = -1
MAX_WAIT_CAP_MS = 60_000
"""Bound on how long a fetch may park (clients ask for 500 ms .. a few seconds)."""


def _size(result: ReadResult) -> int:
    return result.size


@register(api_key=ApiKey.FETCH, name="Fetch", min_version=4, max_version=12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    session_id = int(getattr(request, "session_id", 0))
    if session_id != 0:
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.fetch_session_id_not_found),
                "session_id": 0,
                "responses": [],
            },
        )
    max_wait_ms = min(max(0, ms(request.max_wait)), MAX_WAIT_CAP_MS)
    min_bytes = int(request.min_bytes)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    isolation_level = int(getattr(request, "isolation_level", 0))
    replica_id = int(getattr(request, "replica_id", -1))
    wanted = [
        (
            _topic_name(ctx, topic),
            int(p.partition),
            int(p.fetch_offset),
            int(p.partition_max_bytes),
            int(getattr(p, "current_leader_epoch", -1)),
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    readable = None
    if replica_id < 0:
        readable = ctx.authorized_names(
            AclOperation.READ, ResourceType.TOPIC, (w[0] for w in wanted)
        )
    deadline = trio.current_time() + max_wait_ms / 1000
    waiter = services.replicas.append_waiter()
    reads = await _read_all(ctx, wanted, max_bytes, isolation_level, replica_id, readable)
    # The first read pass is the request's only side effect (a follower's fetch offset
    # moves the HW); what follows is waiting, which must not hold back the connection.
    ctx.turn.release()
    while True:
        total = sum(_size(r) for r in reads)
        has_error = any(r.error_code != 0 for r in reads)
        if total >= min_bytes or has_error or not wanted or trio.current_time() >= deadline:
            break
        with trio.move_on_at(deadline):
            await waiter.wait()
        waiter = services.replicas.append_waiter()
        # Woken by an append or a HW move anywhere (the first pass's own follower fetch can
        # be the cause): read again only if one of our partitions has something, or at the
        # deadline (the answer then carries the current high watermarks).
        if trio.current_time() < deadline and not await _any_fetchable(
            ctx, wanted, isolation_level, replica_id
        ):
            continue
        reads = await _read_all(
            ctx, wanted, max_bytes, isolation_level, replica_id, readable, first_pass=False
        )
    if replica_id >= 0:
        services.replicas.record_leader_throttled_bytes(
            (topic, partition, result.size)
            for (topic, partition, *_), result in zip(wanted, reads, strict=True)
        )
    topics: list[fetch_encoding.FetchTopic] = []
    index = 0
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            result = reads[index]
            index += 1
            partitions.append(
                fetch_encoding.FetchPartition(
                    partition_index=int(p.partition),
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
                    records=result.records,
                )
            )
        topics.append(
            fetch_encoding.FetchTopic(
                name=str(getattr(topic, "topic", "") or ""),
                partitions=tuple(partitions),
                topic_id=getattr(topic, "topic_id", None) or uuid.UUID(int=0),
            )
        )
    return fetch_encoding.encode_fetch_response(
        ctx.api_version, fetch_encoding.FetchResponseData(topics=tuple(topics))
    )


def _topic_name(ctx: RequestContext, topic: Any) -> str:
    name = getattr(topic, "topic", None)
    if name is not None:
        return str(name)
    topic_id = getattr(topic, "topic_id", None)
    state = ctx.services.topics.by_id(topic_id) if topic_id is not None else None
    return state.name if state is not None else ""


async def _any_fetchable(
    ctx: RequestContext,
    wanted: list[tuple[str, int, int, int, int]],
    isolation_level: int,
    replica_id: int,
) -> bool:
    fetchable = ctx.services.replicas.fetchable
    loop_slice = LoopSlice()  # thousands of partitions: the loop is not held
    for topic, partition, fetch_offset, _, leader_epoch in wanted:
        await loop_slice.tick()
        if fetchable(
            topic,
            partition,
            fetch_offset,
            isolation_level=isolation_level,
            current_leader_epoch=leader_epoch,
            replica_id=replica_id,
        ):
            return True
    return False


async def _read_all(
    ctx: RequestContext,
    wanted: list[tuple[str, int, int, int, int]],
    max_bytes: int,
    isolation_level: int,
    replica_id: int = -1,
    readable: set[str] | None = None,
    *,
    first_pass: bool = True,
) -> list[ReadResult]:
    """Read every wanted partition; only the request's first pass records a follower's
    fetch offsets (its LEO, the HW, the ISR)."""
    replica_manager = ctx.services.replicas
    remaining = max_bytes
    results = []
    first_data = True
    loop_slice = LoopSlice()  # thousands of partitions: the loop is not held
    for topic, partition, fetch_offset, partition_max_bytes, leader_epoch in wanted:
        await loop_slice.tick()
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
            record_follower_fetch=first_pass,
        )
        if result.size > 0:
            first_data = False
            remaining = max(0, remaining - result.size)
        results.append(result)
    return results
