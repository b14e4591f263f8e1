"""DeleteRecords v0-2: move a partition's log start offset forward (KIP-107).

* v0: topics, partitions, offset (-1 = the high watermark), timeout.
* v1: no change. v2: flexible (KIP-482).

Per partition: the new low watermark (log start offset) or UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (beyond the high watermark).

Not implemented: waiting for followers' log start offsets (single node: immediate).

Authorization: DELETE on each topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.DELETE_RECORDS, name="DeleteRecords", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    replica_manager = ctx.services.replicas
    topics = []
    deletable = ctx.authorized_names(
        AclOperation.DELETE, ResourceType.TOPIC, (str(t.name) for t in request.topics)
    )
    loop_slice = LoopSlice()
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            await loop_slice.tick()
            if str(topic.name) not in deletable:
                error = int(ErrorCode.topic_authorization_failed)
                partitions.append(
                    {
                        "partition_index": int(p.partition_index),
                        "low_watermark": -1,
                        "error_code": error,
                    }
                )
                continue
            error_code, low_watermark = await trio.to_thread.run_sync(
                replica_manager.delete_records_before,
                str(topic.name),
                int(p.partition_index),
                int(p.offset),
            )
            partitions.append(
                {
                    "partition_index": int(p.partition_index),
                    "low_watermark": low_watermark,
                    "error_code": error_code,
                }
            )
        topics.append({"name": str(topic.name), "partitions": partitions})
    return await answer(
        request, {"throttle_time": 0, "topics": topics}, sum(len(t["partitions"]) for t in topics)
    )
