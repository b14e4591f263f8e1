"""OffsetCommit v2-10: store a group's consumed positions in `__consumer_offsets` (GRP-21).

* v2: generation_id, member_id, retention_time (-1 = `offsets.retention.minutes`).
* v3: throttle_time. v4: no change. v5: retention_time removed (KIP-211).
* v6: committed_leader_epoch (KIP-320). v7: group_instance_id (KIP-345).
* v8: flexible (KIP-482).
* v9: same fields; for a KIP-848 consumer group `generation_id_or_member_epoch` is the member
  epoch: a smaller one answers STALE_MEMBER_EPOCH, a larger FENCED_MEMBER_EPOCH, an unknown
  member UNKNOWN_MEMBER_ID; a consumer group member committing with v8 or older gets
  UNSUPPORTED_VERSION (Kafka's rule). Classic groups behave as in v8.
* v10: topics by `topic_id` instead of name (KIP-848); an id no topic has answers
  UNKNOWN_TOPIC_ID. Offsets are stored by name, as in every version (Kafka's records).

Rules (GRP-12, `trafka.group.coordinator`): generation -1 and an Empty group is a "simple"
commit; otherwise member and generation must match (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION), CompletingRebalance answers REBALANCE_IN_PROGRESS; metadata longer
than 4096 bytes gets OFFSET_METADATA_TOO_LARGE; unknown topic partitions get
UNKNOWN_TOPIC_OR_PARTITION. The answer is sent after the records are appended.

Not implemented: v0-1 (kio carries v2+; Kafka 4 removed them, KIP-896).

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED on every partition)
and READ on each topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import CommitPartition, OffsetCommitRequest, PartitionError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, ms, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

TOPIC_IDS_VERSION = 10


def topic_names(ctx: RequestContext, topics: Sequence[Any]) -> dict[int, str | None]:
    """Each request topic's name (by `id()` of the topic struct): its `name` (v9-), or the
    name of its `topic_id` (v10+; None when no topic has that id). One pass over the topics
    to index them by id, whatever the request holds."""
    if ctx.api_version < TOPIC_IDS_VERSION:
        return {id(topic): str(topic.name) for topic in topics}
    by_id = {
        state.topic_id: name
        for name, state in ctx.services.topics.topics.items()
        if state.topic_id.int != 0
    }
    return {id(topic): by_id.get(topic.topic_id) for topic in topics}


@register(api_key=ApiKey.OFFSET_COMMIT, name="OffsetCommit", min_version=2, max_version=10)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    known: list[CommitPartition] = []
    unknown: list[PartitionError] = []
    unknown_ids: list[dict[str, Any]] = []
    group_allowed = ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id))
    names = topic_names(ctx, request.topics)
    readable = ctx.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, (n for n in names.values() if n is not None)
    )
    for topic in request.topics:
        name = names[id(topic)]
        if name is None:
            unknown_ids.append(
                {
                    "topic_id": topic.topic_id,
                    "partitions": [
                        {
                            "partition_index": int(p.partition_index),
                            "error_code": int(ErrorCode.unknown_topic_id),
                        }
                        for p in topic.partitions
                    ],
                }
            )
            continue
        for p in topic.partitions:
            index = int(p.partition_index)
            if not group_allowed or name not in readable:
                refused = (
                    ErrorCode.topic_authorization_failed
                    if group_allowed
                    else ErrorCode.group_authorization_failed
                )
                unknown.append(PartitionError(name, index, refused))
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
    retention_time_ms = ms(request.retention_time) if has_field(request, "retention_time") else -1
    results: tuple[PartitionError, ...] = ()
    if known:
        results = await ctx.services.groups.offset_commit(
            OffsetCommitRequest(
                group_id=str(request.group_id),
                generation_id=int(request.generation_id_or_member_epoch),
                member_id=str(request.member_id),
                group_instance_id=getattr(request, "group_instance_id", None),
                retention_time_ms=retention_time_ms,
                partitions=tuple(known),
                api_version=ctx.api_version,
            )
        )
    by_topic: dict[str, list[dict[str, int]]] = {}
    for result in (*results, *unknown):
        by_topic.setdefault(result.topic, []).append(
            {"partition_index": result.partition, "error_code": int(result.error)}
        )
    answered = [
        {"name": name, "topic_id": topic_id_of(ctx, name), "partitions": partitions}
        for name, partitions in by_topic.items()
    ]
    return build(response_class(request), {"throttle_time": 0, "topics": answered + unknown_ids})


def topic_id_of(ctx: RequestContext, name: str) -> uuid.UUID:
    state = ctx.services.topics.get(name)
    return state.topic_id if state is not None else uuid.UUID(int=0)
