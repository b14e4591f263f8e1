"""OffsetDelete v0: delete a group's committed offsets for some partitions (KIP-496).

Allowed for an Empty group, or for topics a consumer group does not subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise); GROUP_ID_NOT_FOUND for an unknown
group; NON_EMPTY_GROUP for a non-empty group whose protocol is not `consumer`. Tombstones
are appended to `__consumer_offsets`.

Authorization: DELETE on the GROUP (else GROUP_AUTHORIZATION_FAILED) and READ on each topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import PartitionError, TopicPartition
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.OFFSET_DELETE, name="OffsetDelete", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    partitions = tuple(
        TopicPartition(str(t.name), int(p.partition_index))
        for t in request.topics
        for p in t.partitions
    )
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, str(request.group_id)):
        return build(
            response_class(request),
            {"error_code": int(ErrorCode.group_authorization_failed), "throttle_time": 0},
        )
    readable = ctx.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, (p.topic for p in partitions)
    )
    refused = [p for p in partitions if p.topic not in readable]
    partitions = tuple(p for p in partitions if p.topic in readable)
    result = await ctx.services.groups.offset_delete(str(request.group_id), partitions)
    denied = tuple(
        PartitionError(t.topic, t.partition, ErrorCode.topic_authorization_failed) for t in refused
    )
    by_topic: dict[str, list[dict[str, int]]] = {}
    for error in (*result.partitions, *denied):
        by_topic.setdefault(error.topic, []).append(
            {"partition_index": error.partition, "error_code": int(error.error)}
        )
    return build(
        response_class(request),
        {
            "error_code": int(result.error),
            "throttle_time": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        },
    )
