"""OffsetForLeaderEpoch v2-4: the end offset of a leader epoch (KIP-101, KIP-279).

* v2: current_leader_epoch for fencing (KIP-320); leader_epoch in the response.
* v3: replica_id (consumers send -2... clients send -1; followers their id).
* v4: flexible (KIP-482).

Per partition: the largest epoch <= the asked one and its end offset, from the log's
leader-epoch cache; UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH. Consumers use it after a leader change to
detect log truncation (KIP-320); followers use it to truncate (issue 5).

Not implemented: v0-1 (not carried by kio; no current client sends them).

Authorization: a consumer needs DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED); a
follower was admitted with CLUSTER_ACTION by the node's dispatch.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(
    api_key=ApiKey.OFFSET_FOR_LEADER_EPOCH,
    name="OffsetForLeaderEpoch",
    min_version=2,
    max_version=4,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    replica_manager = ctx.services.replicas
    topics = []
    described: set[str] | None = None
    if int(getattr(request, "replica_id", -1)) < 0:  # a follower was admitted by dispatch
        described = ctx.authorized_names(
            AclOperation.DESCRIBE, ResourceType.TOPIC, (str(t.topic) for t in request.topics)
        )
    loop_slice = LoopSlice()
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            await loop_slice.tick()
            if described is not None and str(topic.topic) not in described:
                error_code, epoch, end_offset = int(ErrorCode.topic_authorization_failed), -1, -1
            else:
                error_code, epoch, end_offset = replica_manager.end_offset_for_epoch(
                    str(topic.topic),
                    int(p.partition),
                    int(p.leader_epoch),
                    current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                )
            partitions.append(
                {
                    "error_code": error_code,
                    "partition": int(p.partition),
                    "leader_epoch": epoch,
                    "end_offset": end_offset,
                }
            )
        topics.append({"topic": str(topic.topic), "partitions": partitions})
    return await answer(
        request, {"throttle_time": 0, "topics": topics}, sum(len(t["partitions"]) for t in topics)
    )
