"""ListOffsets v0-7: offsets by timestamp, earliest, latest and max timestamp.

* v0: `max_num_offsets`, answered with `old_style_offsets` (a one-element list; Kafka
  returns segment base offsets, we return the one offset a client needs).
* v1: one offset + timestamp per partition (KIP-79). v2: isolation_level (KIP-98).
* v3: no change. v4: current_leader_epoch and leader_epoch (KIP-320). v5: no change.
* v6: flexible (KIP-482). v7: MAX_TIMESTAMP (-3, KIP-734).

Special timestamps: -1 latest (high watermark, or last stable offset with READ_COMMITTED),
-2 earliest (log start offset), -3 the offset of the record with the largest timestamp;
otherwise the first offset whose timestamp is >= the asked one, or offset -1 when none
(Kafka's answer). Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH.

Replicas (KIP-392 and Kafka's ReplicaManager.fetchOffset): only the leader answers a
consumer (replica_id -1), also when consumers fetch from a follower; a request with Kafka's
debugging replica id -2 is answered by a follower too, and, being no client request, with
the log end offset for "latest" (no isolation level), as Kafka does.

Not implemented: -4 earliest-local and -5 latest-tiered (v8+, tiered storage).

Authorization: DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

DEBUGGING_REPLICA_ID = -2


@register(api_key=ApiKey.LIST_OFFSETS, name="ListOffsets", min_version=0, max_version=7)
async def handle(ctx: RequestContext, request: Any) -> Any:
    replica_manager = ctx.services.replicas
    isolation_level = int(getattr(request, "isolation_level", 0))
    debugging = int(getattr(request, "replica_id", -1)) == DEBUGGING_REPLICA_ID
    topics: list[dict[str, Any]] = []
    described = ctx.authorized_names(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (str(t.name) for t in request.topics)
    )
    loop_slice = LoopSlice()
    for topic in request.topics:
        partitions: list[dict[str, Any]] = []
        for p in topic.partitions:
            await loop_slice.tick()
            if str(topic.name) not in described:
                refused = int(ErrorCode.topic_authorization_failed)
                partitions.append(
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": refused,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
                continue
            result = replica_manager.list_offset(
                str(topic.name),
                int(p.partition_index),
                int(p.timestamp),
                isolation_level=isolation_level,
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                debugging=debugging,
            )
            partitions.append(
                {
                    "partition_index": int(p.partition_index),
                    "error_code": result.error_code,
                    "timestamp": result.timestamp,
                    "offset": result.offset,
                    "leader_epoch": result.leader_epoch,
                    "old_style_offsets": [result.offset] if result.offset >= 0 else [],
                }
            )
        topics.append({"name": str(topic.name), "partitions": partitions})
    return await answer(
        request, {"throttle_time": 0, "topics": topics}, sum(len(t["partitions"]) for t in topics)
    )
