"""DescribeProducers v0: the active producers of partitions this node leads (KIP-664).

Per partition, from the log's producer state: producer id and epoch, last sequence, last
timestamp, the coordinator epoch of its last marker and the first offset of its open
transaction (-1 if none) — what `kafka-transactions.sh describe-producers` and
`find-hanging` read. NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION otherwise.

Authorization (Kafka's table): READ on the topic, else TOPIC_AUTHORIZATION_FAILED for each
of its partitions (before the existence check, so an unauthorized principal learns nothing).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


def _partition(
    ctx: RequestContext, topic: str, partition: int, readable: set[str]
) -> dict[str, Any]:
    if topic not in readable:
        return {
            "partition_index": partition,
            "error_code": int(ErrorCode.topic_authorization_failed),
            "active_producers": [],
        }
    state = ctx.services.topics.partition(topic, partition)
    if state is None:
        return {
            "partition_index": partition,
            "error_code": int(ErrorCode.unknown_topic_or_partition),
            "active_producers": [],
        }
    if state.leader != ctx.services.node_id:
        return {
            "partition_index": partition,
            "error_code": int(ErrorCode.not_leader_or_follower),
            "active_producers": [],
        }
    log = ctx.services.replicas.get_or_create_log(topic, partition)
    producers = []
    with log.lock:
        for entry in log.producer_state.producers.values():
            producers.append(
                {
                    "producer_id": entry.producer_id,
                    "producer_epoch": entry.producer_epoch,
                    "last_sequence": entry.last_sequence,
                    "last_timestamp": entry.last_timestamp,
                    "coordinator_epoch": entry.coordinator_epoch,
                    "current_txn_start_offset": entry.current_txn_first_offset,
                }
            )
    return {"partition_index": partition, "error_code": 0, "active_producers": producers}


@register(api_key=ApiKey.DESCRIBE_PRODUCERS, name="DescribeProducers", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    readable = ctx.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, (str(topic.name) for topic in request.topics)
    )
    topics = []
    loop_slice = LoopSlice()
    elements = 0
    for topic in request.topics:
        partitions = []
        for p in topic.partition_indexes:
            await loop_slice.tick()
            partitions.append(_partition(ctx, str(topic.name), int(p), readable))
        elements += len(partitions)
        topics.append({"name": topic.name, "partitions": partitions})
    return await answer(request, {"throttle_time": 0, "topics": topics}, elements)
