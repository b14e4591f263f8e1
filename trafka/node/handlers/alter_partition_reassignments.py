"""AlterPartitionReassignments v0-1: start or cancel partition reassignments (KIP-455).

* v0: flexible from the start; v1 adds `allow_replication_factor_change` (always allowed
  here).

Served by the controller only (others: NOT_CONTROLLER). New targets are merged into
`/admin/reassign_partitions` (Kafka's ZK-era plan, which the controller watches and resumes
after failover, CTL-31..35); null replicas cancel the partition's reassignment through a
`CancelReassignment` event (back to its original replicas). Per partition: unknown topic or
partition -> UNKNOWN_TOPIC_OR_PARTITION; empty, duplicate or unregistered brokers ->
INVALID_REPLICA_ASSIGNMENT; cancelling a partition that is not moving ->
NO_REASSIGNMENT_IN_PROGRESS.

Replication throttles (KIP-73) are not part of this request, as in Kafka: the client sets
the topics' `leader/follower.replication.throttled.replicas` and the brokers'
`leader/follower.replication.throttled.rate` with IncrementalAlterConfigs before it starts
the reassignment (`ktool reassign execute --throttle`, `trafka.node.replication.throttle`,
docs/cluster.md), and removes them when it completes (`ktool reassign verify`).

Authorization: ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.controller.events import CancelReassignment
from trafka.node.controller.tree_reads import read_brokers, read_reassignment, read_topics
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.metadata_store import MetadataStore
from trafka.node.replication.ids import TopicPartition
from trafka.security.authorizer import AclOperation


def _moving(store: MetadataStore, tp: TopicPartition) -> bool:
    plan = read_reassignment(store)
    if plan is not None and any(
        p.topic == tp.topic and p.partition == tp.partition for p in plan.data.partitions
    ):
        return True
    topic = read_topics(store).get(tp.topic)
    return topic is not None and bool(
        topic.data.adding_replicas.get(tp.partition)
        or topic.data.removing_replicas.get(tp.partition)
    )


@register(
    api_key=ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    name="AlterPartitionReassignments",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER):
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "error_message": None,
                "responses": [],
            },
        )
    services = ctx.services
    service = services.controller
    results: dict[tuple[str, int], tuple[int, str | None]] = {}
    if service is None or not service.is_active:
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.not_controller),
                "error_message": None,
                "responses": [],
            },
        )
    store = services.store
    live = {int(b.broker_id) for b in read_brokers(store)}
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    cancels: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(str(topic.name), int(p.partition_index))
            key = (tp.topic, tp.partition)
            if services.topics.partition(tp.topic, tp.partition) is None:
                results[key] = (int(ErrorCode.unknown_topic_or_partition), None)
            elif p.replicas is None:
                if _moving(store, tp):
                    cancels.append(tp)
                    results[key] = (0, None)
                else:
                    results[key] = (int(ErrorCode.no_reassignment_in_progress), None)
            else:
                replicas = tuple(int(r) for r in p.replicas)
                if not replicas or len(set(replicas)) != len(replicas):
                    results[key] = (
                        int(ErrorCode.invalid_replica_assignment),
                        "Empty or duplicate replicas",
                    )
                elif any(r not in live for r in replicas):
                    results[key] = (
                        int(ErrorCode.invalid_replica_assignment),
                        f"Unknown broker(s) in {list(replicas)}",
                    )
                else:
                    targets[tp] = replicas
                    results[key] = (0, None)
    if targets:
        current = read_reassignment(store)
        merged = {
            TopicPartition(p.topic, p.partition): tuple(p.replicas)
            for p in (current.data.partitions if current is not None else ())
        }
        merged.update(targets)
        plan = znodes.ReassignPartitions(
            tuple(
                znodes.PartitionReassignment(tp.topic, tp.partition, merged[tp])
                for tp in sorted(merged)
            )
        )
        await store.put(znodes.REASSIGN_PARTITIONS, plan.to_json())
        service.wake()
    if cancels:
        await service.run_event(CancelReassignment(tuple(cancels)))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, partition), (code, message) in results.items():
        by_topic.setdefault(name, []).append(
            {"partition_index": partition, "error_code": code, "error_message": message}
        )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "responses": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
        },
    )
