"""AddPartitionsToTxn v0-5: add partitions to a producer's transaction (KIP-98, KIP-890).

* v0: transactional_id, producer_id, producer_epoch, topics. v1: no change. v2:
  PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588). v3: flexible (KIP-482).
* v4: batched, one entry per transaction, with `verify_only` (KIP-890 part 1: a partition
  leader asks whether a transactional batch's partition is in the transaction; nothing is
  added) and a top-level error code. v5: TRANSACTION_ABORTABLE may be returned (we do not
  return it: a partition missing from the transaction is INVALID_TXN_STATE, as Kafka 3.6-3.9).

Authorization (Kafka's table): v4+ is inter-broker only and needs CLUSTER_ACTION (else a
top-level CLUSTER_AUTHORIZATION_FAILED and no results). Per transaction: WRITE on the
TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for each of its partitions),
then WRITE on each topic (internal topics never pass, as Kafka).

Per partition: a topic the principal may not WRITE is TOPIC_AUTHORIZATION_FAILED, a topic or
partition that does not exist UNKNOWN_TOPIC_OR_PARTITION, and the other partitions of the
transaction OPERATION_NOT_ATTEMPTED (Kafka's handler does the same); otherwise every
partition gets the coordinator's answer (`trafka.txn.coordinator`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.topics import INTERNAL_TOPICS
from trafka.node.txn_service import client_error
from trafka.security.authorizer import AclOperation, ResourceType
from trafka.txn.coordinator import TopicPartition

_FENCED_SINCE = 2
_BATCHED_SINCE = 4


def _refused(
    ctx: RequestContext, transactional_id: str, partitions: tuple[TopicPartition, ...]
) -> dict[TopicPartition, int]:
    """Kafka's checks before the coordinator is asked: the transactional id, then per
    partition WRITE on its topic and its existence; empty when every partition passed."""
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return {tp: int(ErrorCode.transactional_id_authorization_failed) for tp in partitions}
    writable = ctx.authorized_names(
        AclOperation.WRITE,
        ResourceType.TOPIC,
        (tp.topic for tp in partitions if tp.topic not in INTERNAL_TOPICS),
    )
    errors: dict[TopicPartition, int] = {}
    for tp in partitions:
        state = ctx.services.topics.get(tp.topic)
        if tp.topic not in writable:
            errors[tp] = int(ErrorCode.topic_authorization_failed)
        elif state is None or tp.partition not in state.partitions:
            errors[tp] = int(ErrorCode.unknown_topic_or_partition)
    if not errors:
        return {}
    return {tp: errors.get(tp, int(ErrorCode.operation_not_attempted)) for tp in partitions}


async def _transaction(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Any,
    verify_only: bool,
) -> list[dict[str, Any]]:
    """The per-topic results of one transaction's entry."""
    partitions = tuple(
        TopicPartition(str(topic.name), int(p)) for topic in topics for p in topic.partitions
    )
    service = ctx.services.transactions
    errors = _refused(ctx, transactional_id, partitions)
    if errors:
        pass  # nothing is asked of the coordinator
    elif verify_only:
        top, per = await service.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
        errors = {tp: int(per.get(tp, top)) for tp in partitions}
    else:
        error = await service.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
        code = client_error(error, ctx.api_version, _FENCED_SINCE)
        errors = {tp: code for tp in partitions}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": errors[tp]}
        )
    return [{"name": name, "results_by_partition": rows} for name, rows in by_topic.items()]


@register(
    api_key=ApiKey.ADD_PARTITIONS_TO_TXN, name="AddPartitionsToTxn", min_version=0, max_version=5
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(request)
    if ctx.api_version < _BATCHED_SINCE:
        results = await _transaction(
            ctx,
            str(request.v3_and_below_transactional_id),
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            request.v3_and_below_topics,
            verify_only=False,
        )
        return build(cls, {"throttle_time": 0, "results_by_topic_v3_and_below": results})
    if not ctx.authorize(AclOperation.CLUSTER_ACTION):
        # v4+ comes only from brokers (KIP-890): Kafka's error response, no results.
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "results_by_transaction": [],
            },
        )
    transactions = []
    for entry in request.transactions:
        results = await _transaction(
            ctx,
            str(entry.transactional_id),
            int(entry.producer_id),
            int(entry.producer_epoch),
            entry.topics,
            verify_only=bool(entry.verify_only),
        )
        transactions.append({"transactional_id": entry.transactional_id, "topic_results": results})
    return build(cls, {"throttle_time": 0, "error_code": 0, "results_by_transaction": transactions})
