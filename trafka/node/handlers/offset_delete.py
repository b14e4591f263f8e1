"""OffsetDelete v0: delete a group's committed offsets for some partitions (KIP-496).

Allowed for an Empty group, or for topics a consumer group does not subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise); GROUP_ID_NOT_FOUND for an unknown
group; NON_EMPTY_GROUP for a non-empty group whose protocol is not `consumer`. Tombstones
are appended to `__consumer_offsets`.
"""

from __future__ import annotations

from typing import Any

from trafka.group.messages import TopicPartition
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register


@register(api_key=ApiKey.OFFSET_DELETE, name="OffsetDelete", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    partitions = tuple(
        TopicPartition(str(t.name), int(p.partition_index))
        for t in request.topics
        for p in t.partitions
    )
    result = await ctx.services.groups.offset_delete(str(request.group_id), partitions)
    by_topic: dict[str, list[dict[str, int]]] = {}
    for p in result.partitions:
        by_topic.setdefault(p.topic, []).append(
            {"partition_index": p.partition, "error_code": int(p.error)}
        )
    return build(
        response_class(request),
        {
            "error_code": int(result.error),
            "throttle_time": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        },
    )
