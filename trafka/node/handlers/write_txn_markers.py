"""WriteTxnMarkers v1: a transaction coordinator asks this leader to write markers (KIP-98).

Inter-broker: for each marker and partition, the COMMIT/ABORT control batch is appended
through `PartitionLog.append_end_transaction_marker` and replicated (acks=all) before the
partition's answer. Per partition: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION as
for Produce, INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch,
TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the last marker's.

Authorization (Kafka's table): CLUSTER_ACTION on the cluster (brokers, and the admin of
`ktool transactions abort` as kafka-transactions.sh), else every partition of the request
CLUSTER_AUTHORIZATION_FAILED and nothing is written.

v0 is not served (kio carries v1 only; Kafka 4 removed v0).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation
from trafka.txn.coordinator import MarkerRequest, TopicPartition


@register(api_key=ApiKey.WRITE_TXN_MARKERS, name="WriteTxnMarkers", min_version=1, max_version=1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION)
    results = []
    elements = 0
    loop_slice = LoopSlice()
    for entry in request.markers:
        marker = MarkerRequest(
            transactional_id="",
            producer_id=int(entry.producer_id),
            producer_epoch=int(entry.producer_epoch),
            coordinator_epoch=int(entry.coordinator_epoch),
            committed=bool(entry.transaction_result),
            partitions=(),
        )
        topics = []
        for topic in entry.topics:
            partitions = []
            for index in topic.partition_indexes:
                tp = TopicPartition(str(topic.name), int(index))
                if not allowed:
                    code = int(ErrorCode.cluster_authorization_failed)
                else:
                    code = await ctx.services.transactions.write_marker_locally(marker, tp)
                partitions.append({"partition_index": tp.partition, "error_code": code})
                elements += 1
                await loop_slice.tick()
            topics.append({"name": topic.name, "partitions": partitions})
        results.append({"producer_id": entry.producer_id, "topics": topics})
    return await answer(request, {"markers": results}, elements)
