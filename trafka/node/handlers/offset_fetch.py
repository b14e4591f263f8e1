"""OffsetFetch v1-10: a group's committed offsets (GRP-21, GRP-22).

* v1: group_id, topics; errors per partition. v2: topics null = every committed offset of
  the group, and a top-level error_code (KIP-88). v3: throttle_time. v4: no change.
* v5: committed_leader_epoch (KIP-320). v6: flexible (KIP-482).
* v7: require_stable (KIP-447): a partition whose transactional offsets (TxnOffsetCommit)
  wait for their transaction's marker answers UNSTABLE_OFFSET_COMMIT; the consumer retries.
* v8: several groups in one request (KIP-709), each with its own error_code.
* v9: member_id and member_epoch per group (KIP-848): a consumer group member's fetch is
  checked like its commits (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); epoch -1 = no check.
* v10: topics by `topic_id` (KIP-848); an id no topic has answers UNKNOWN_TOPIC_ID per
  partition; with all topics (null), committed offsets of topics that no longer exist are
  left out (they have no id to answer with).

A partition without a committed offset answers offset -1, leader epoch -1, metadata "".
A group this node does not coordinate answers NOT_COORDINATOR (per partition in v1).
Not implemented: v0 (ZooKeeper-stored offsets).

Authorization: DESCRIBE on the GROUP (else GROUP_AUTHORIZATION_FAILED) and on each topic
(a named partition: TOPIC_AUTHORIZATION_FAILED; all topics: unauthorized ones left out), as
Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import FetchedOffset, OffsetFetchResult, TopicPartition
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.offset_commit import TOPIC_IDS_VERSION, topic_id_of, topic_names
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


def _requested(
    ctx: RequestContext, topics: Sequence[Any] | None
) -> tuple[tuple[TopicPartition, ...] | None, list[dict[str, Any]]]:
    """The requested partitions by name, and (v10) the answers for unknown topic ids."""
    if topics is None:
        return None, []
    names = topic_names(ctx, topics)
    unknown = [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {
                    "partition_index": int(index),
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": int(ErrorCode.unknown_topic_id),
                }
                for index in t.partition_indexes
            ],
        }
        for t in topics
        if names[id(t)] is None
    ]
    requested = tuple(
        TopicPartition(name, int(index))
        for t in topics
        if (name := names[id(t)]) is not None
        for index in t.partition_indexes
    )
    return requested, unknown


def _topics(
    ctx: RequestContext,
    result: OffsetFetchResult,
    requested: tuple[TopicPartition, ...] | None,
    *,
    error_per_partition: bool,
) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if result.error != ErrorCode.none and error_per_partition:
        for p in requested or ():
            by_topic.setdefault(p.topic, []).append(
                {
                    "partition_index": p.partition,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": int(result.error),
                }
            )
    for fetched in result.partitions:
        by_topic.setdefault(fetched.topic, []).append(
            {
                "partition_index": fetched.partition,
                "committed_offset": fetched.offset,
                "committed_leader_epoch": fetched.leader_epoch,
                "metadata": fetched.metadata,
                "error_code": int(fetched.error),
            }
        )
    with_ids = [(name, topic_id_of(ctx, name), partitions) for name, partitions in by_topic.items()]
    return [
        {"name": name, "topic_id": topic_id, "partitions": partitions}
        for name, topic_id, partitions in with_ids
        if ctx.api_version < TOPIC_IDS_VERSION or topic_id.int != 0
    ]


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    requested: tuple[TopicPartition, ...] | None,
    require_stable: bool = False,
    member: tuple[str, int] | None = None,
) -> OffsetFetchResult:
    """The group's offsets as the sender may see them: DESCRIBE on the group, and per topic
    DESCRIBE (a named partition: TOPIC_AUTHORIZATION_FAILED; all topics: left out)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return OffsetFetchResult(ErrorCode.group_authorization_failed)
    result = await ctx.services.groups.offset_fetch(group_id, requested, require_stable, member)
    visible = ctx.authorized_names(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (p.topic for p in result.partitions)
    )
    partitions = tuple(
        p
        if p.topic in visible
        else FetchedOffset(p.topic, p.partition, -1, -1, "", ErrorCode.topic_authorization_failed)
        for p in result.partitions
        if p.topic in visible or requested is not None
    )
    return OffsetFetchResult(result.error, partitions)


@register(api_key=ApiKey.OFFSET_FETCH, name="OffsetFetch", min_version=1, max_version=10)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(request)
    require_stable = bool(getattr(request, "require_stable", False))
    if has_field(request, "groups"):
        groups = []
        for group in request.groups:
            requested, unknown_ids = _requested(ctx, group.topics)
            member = None
            member_id = getattr(group, "member_id", None)
            if member_id is not None and int(getattr(group, "member_epoch", -1)) >= 0:
                member = (str(member_id), int(group.member_epoch))
            result = await _fetch(ctx, str(group.group_id), requested, require_stable, member)
            groups.append(
                {
                    "group_id": str(group.group_id),
                    "topics": _topics(ctx, result, requested, error_per_partition=False)
                    + unknown_ids,
                    "error_code": int(result.error),
                }
            )
        return build(cls, {"throttle_time": 0, "groups": groups})
    requested, _ = _requested(ctx, request.topics)
    result = await _fetch(ctx, str(request.group_id), requested, require_stable)
    return build(
        cls,
        {
            "throttle_time": 0,
            "error_code": int(result.error),
            "topics": _topics(ctx, result, requested, error_per_partition=ctx.api_version < 2),
        },
    )
