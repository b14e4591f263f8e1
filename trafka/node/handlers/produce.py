"""Produce v3-9 (v0-2 advertised, rejected: KAFKA-18659): append record batches.

* v3: transactional_id; record batch v2 only (KIP-98). v4: no change (error codes).
* v5: log_start_offset in the response (KIP-107). v6, v7: no change (v7: ZStandard, KIP-110).
* v8: record_errors + error_message (KIP-467). v9: flexible (KIP-482).

Per partition: first Kafka's produce rules (`trafka.node.produce_rules`: internal topics get
INVALID_TOPIC_EXCEPTION, more than one batch or magic < 2 INVALID_RECORD, control batches
INVALID_RECORD, transactional batches INVALID_TXN_STATE), then UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER (this broker does not lead it), CORRUPT_MESSAGE (bad framing or CRC),
INVALID_RECORD (well-framed but breaking a rule; record-level rules as Kafka's LogValidator,
keyless records on a compacted topic named in `record_errors`, KIP-467),
MESSAGE_TOO_LARGE (`max.message.bytes`), OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH
(idempotent producers; the sequence checks live in the log's producer state, a duplicate
batch gets its original offsets). acks other than 0, 1, -1: INVALID_REQUIRED_ACKS for every
partition. acks=0: the handler returns None and the net layer sends nothing (Kafka closes
the connection only on errors; so do we, by answering nothing either way).

acks=-1 waits, in the replica manager's purgatory, until the high watermark passes the batch
or `timeout_ms` expires (REQUEST_TIMED_OUT); on one node that is immediate.

Authorization (Kafka's table): WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED for its
partitions, nothing appended); with a transactional id also WRITE on that
TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere). An idempotent
producer's IDEMPOTENT_WRITE was checked at InitProducerId (KIP-679, Kafka 3.0).

Transactional batches (KIP-98): the first one of a transaction in a partition is verified
with the transaction coordinator (KIP-890 part 1, `trafka.node.txn_verification`), only
after the authorization and the produce rules passed, as Kafka: an unauthorized or
malformed request never makes this broker call the coordinator. A partition not added to
the transaction gets INVALID_TXN_STATE, so no client can leave a hanging transaction; a
control batch from a client is INVALID_RECORD.

throttle_time_ms: 0 here; the broker sets it for a client over its quota (`trafka.node.quota`).
"""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import ms
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.node.produce_rules import check_produce_partition
from trafka.node.replication.replica_manager import AppendResult, PendingAppend
from trafka.node.txn_verification import verify_transactional_batch
from trafka.security.authorizer import AclOperation, ResourceType


@register(
    api_key=ApiKey.PRODUCE, name="Produce", min_version=3, max_version=9, advertised_min_version=0
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = int(request.acks)
    timeout_ms = max(0, ms(request.timeout))
    replica_manager = ctx.services.replicas
    results: dict[tuple[str, int], AppendResult] = {}
    pending: dict[tuple[str, int], PendingAppend] = {}
    entries = [
        (str(topic.name), int(p.index), p.records)
        for topic in request.topic_data
        for p in topic.partition_data
    ]
    writable = ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, (e[0] for e in entries))
    transactional_id = request.transactional_id
    if transactional_id is not None and not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, str(transactional_id)
    ):
        writable = set()
        refused = ErrorCode.transactional_id_authorization_failed
    else:
        refused = ErrorCode.topic_authorization_failed
    # Kafka's order: authorization, then the produce rules, and only then KIP-890's
    # verification with the transaction coordinator (an unauthorized or malformed request
    # never makes this broker call the coordinator).
    ready: list[tuple[str, int, bytes]] = []
    loop_slice = LoopSlice()
    for topic, partition, records in entries:
        await loop_slice.tick()  # thousands of partitions: the loop is not held (ordering is
        # the connection's turn, released below, not the loop)
        if acks not in (0, 1, -1):
            results[(topic, partition)] = AppendResult(int(ErrorCode.invalid_required_acks))
            continue
        if topic not in writable:
            results[(topic, partition)] = AppendResult(int(refused))
            continue
        refusal = check_produce_partition(topic, records or b"", transactional_id=transactional_id)
        if refusal is not None:
            results[(topic, partition)] = AppendResult(
                int(refusal.error_code), error_message=refusal.message
            )
            continue
        ready.append((topic, partition, records or b""))
    if transactional_id is not None:
        # KIP-890 part 1, before any append of this request (see txn_verification).
        verified: list[tuple[str, int, bytes]] = []
        for topic, partition, records in ready:
            code = await verify_transactional_batch(
                transactions=ctx.services.transactions,
                topics=ctx.services.topics,
                replicas=replica_manager,
                node_id=ctx.services.node_id,
                transactional_id=transactional_id,
                topic=topic,
                partition=partition,
                records=records,
            )
            if code:
                results[(topic, partition)] = AppendResult(code)
            else:
                verified.append((topic, partition, records))
        ready = verified
    for topic, partition, records in ready:
        await loop_slice.tick()  # thousands of partitions: other connections are served too
        # Synchronous, in request order: this and every earlier request's appends are in the
        # logs before the next request on the connection may start (per-partition order).
        step = replica_manager.append_records(
            topic,
            partition,
            records,
            required_acks=acks,
            transactional=transactional_id is not None,
        )
        if isinstance(step, PendingAppend):
            pending[(topic, partition)] = step
        else:
            results[(topic, partition)] = step
    ctx.turn.release()

    async def complete(key: tuple[str, int], step: PendingAppend) -> None:
        results[key] = await replica_manager.complete_append(step, timeout_ms)

    if len(pending) == 1:
        await complete(*next(iter(pending.items())))
    elif pending:
        async with trio.open_nursery() as nursery:
            for key, step in pending.items():
                nursery.start_soon(complete, key, step)
    if acks == 0:
        return None
    responses: list[dict[str, Any]] = []
    for topic_data in request.topic_data:
        name = str(topic_data.name)
        partition_responses = []
        for p in topic_data.partition_data:
            result = results[(name, int(p.index))]
            partition_responses.append(
                {
                    "index": int(p.index),
                    "error_code": result.error_code,
                    "base_offset": result.base_offset,
                    "log_append_time": result.log_append_time_ms,
                    "log_start_offset": result.log_start_offset,
                    "record_errors": [
                        {"batch_index": index, "batch_index_error_message": message}
                        for index, message in result.record_errors
                    ],
                    "error_message": result.error_message,
                }
            )
        responses.append({"name": name, "partition_responses": partition_responses})
    return await answer(request, {"responses": responses, "throttle_time": 0}, len(entries))
