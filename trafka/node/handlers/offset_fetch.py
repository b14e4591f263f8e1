"""OffsetFetch v1-9: a group's committed offsets (GRP-21, GRP-22).

* v1: group_id, topics; errors per partition. v2: topics null = every committed offset of
  the group, and a top-level error_code (KIP-88). v3: throttle_time. v4: no change.
* v5: committed_leader_epoch (KIP-320). v6: flexible (KIP-482).
* v7: require_stable (KIP-447): a partition whose transactional offsets (TxnOffsetCommit)
  wait for their transaction's marker answers UNSTABLE_OFFSET_COMMIT; the consumer retries.
* v8: several groups in one request (KIP-709), each with its own error_code.
* v9: member_id and member_epoch per group (KIP-848): a consumer group member's fetch is
  checked like its commits (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); epoch -1 = no check.

A partition without a committed offset answers offset -1, leader epoch -1, metadata "".
A group this node does not coordinate answers NOT_COORDINATOR (per partition in v1).
Not implemented: v10 (topic ids), v0 (ZooKeeper-stored offsets).

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
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


def _requested(topics: Sequence[Any] | None) -> tuple[TopicPartition, ...] | None:
    if topics is None:
        return None
    return tuple(
        TopicPartition(str(t.name), int(index)) for t in topics for index in t.partition_indexes
    )


def _topics(
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
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


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


@register(api_key=ApiKey.OFFSET_FETCH, name="OffsetFetch", min_version=1, max_version=9)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(request)
    require_stable = bool(getattr(request, "require_stable", False))
    if has_field(request, "groups"):
        groups = []
        for group in request.groups:
            requested = _requested(group.topics)
            member = None
            member_id = getattr(group, "member_id", None)
            if member_id is not None and int(getattr(group, "member_epoch", -1)) >= 0:
                member = (str(member_id), int(group.member_epoch))
            result = await _fetch(ctx, str(group.group_id), requested, require_stable, member)
            groups.append(
                {
                    "group_id": str(group.group_id),
                    "topics": _topics(result, requested, error_per_partition=False),
                    "error_code": int(result.error),
                }
            )
        return build(cls, {"throttle_time": 0, "groups": groups})
    requested = _requested(request.topics)
    result = await _fetch(ctx, str(request.group_id), requested, require_stable)
    return build(
        cls,
        {
            "throttle_time": 0,
            "error_code": int(result.error),
            "topics": _topics(result, requested, error_per_partition=ctx.api_version < 2),
        },
    )
