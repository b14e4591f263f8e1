"""TxnOffsetCommit v0-3: commit a group's offsets inside a transaction (KIP-98, KIP-447).

Sent by a transactional producer to the group coordinator after AddOffsetsToTxn
(`send_offsets_to_transaction`). The offsets are written to `__consumer_offsets` in the
producer's transactional batch and stay pending (OffsetFetch does not show them) until the
transaction's COMMIT marker reaches the partition; an ABORT drops them
(`trafka.group.coordinator.txn_offset_commit`, `trafka.node.group_service`).

* v0: transactional_id, group_id, producer_id, producer_epoch, topics. v1: no change.
  v2: committed_leader_epoch; PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588).
* v3: flexible; generation_id, member_id, group_instance_id (KIP-447: a zombie consumer
  of an older generation is fenced with ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID).

Authorization (Kafka's table): WRITE on the TRANSACTIONAL_ID, then READ on the GROUP (else
every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED), then
READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).

Unknown topic partitions get UNKNOWN_TOPIC_OR_PARTITION; a stale producer epoch (the log's
producer state refuses the batch) PRODUCER_FENCED.

Not implemented: v4-5 (KIP-890 part 2; not advertised), checking that the group's
partition was added to the transaction (KIP-890 part 1 verification).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import CommitPartition, OffsetCommitRequest, PartitionError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.txn_service import client_error
from trafka.security.authorizer import AclOperation, ResourceType

_FENCED_SINCE = 2


def _request_refusal(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """Kafka's checks of the whole request: the transactional id, then the group."""
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, str(request.transactional_id)
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id)):
        return ErrorCode.group_authorization_failed
    return None


@register(api_key=ApiKey.TXN_OFFSET_COMMIT, name="TxnOffsetCommit", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    known: list[CommitPartition] = []
    unknown: list[PartitionError] = []
    request_refusal = _request_refusal(ctx, request)
    readable = ctx.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, (str(topic.name) for topic in request.topics)
    )
    for topic in request.topics:
        for p in topic.partitions:
            name, index = str(topic.name), int(p.partition_index)
            if request_refusal is not None:
                unknown.append(PartitionError(name, index, request_refusal))
                continue
            if name not in readable:
                unknown.append(PartitionError(name, index, ErrorCode.topic_authorization_failed))
                continue
            if topics.partition(name, index) is None:
                unknown.append(PartitionError(name, index, ErrorCode.unknown_topic_or_partition))
                continue
            known.append(
                CommitPartition(
                    topic=name,
                    partition=index,
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata,
                )
            )
    results: tuple[PartitionError, ...] = ()
    if known:
        results = await ctx.services.groups.txn_offset_commit(
            OffsetCommitRequest(
                group_id=str(request.group_id),
                generation_id=int(getattr(request, "generation_id", -1)),
                member_id=str(getattr(request, "member_id", "")),
                group_instance_id=getattr(request, "group_instance_id", None),
                retention_time_ms=-1,
                partitions=tuple(known),
            ),
            int(request.producer_id),
            int(request.producer_epoch),
        )
    by_topic: dict[str, list[dict[str, int]]] = {}
    for result in (*results, *unknown):
        by_topic.setdefault(result.topic, []).append(
            {
                "partition_index": result.partition,
                "error_code": client_error(result.error, ctx.api_version, _FENCED_SINCE),
            }
        )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "topics": [
                {"name": name, "partitions": partitions} for name, partitions in by_topic.items()
            ],
        },
    )
