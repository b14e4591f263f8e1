"""ListPartitionReassignments v0: the partitions being moved (KIP-455).

Read from the tree: a partition is moving while its topic's assignment carries
`adding_replicas` / `removing_replicas` (written by the controller in reassignment phase A,
cleared at step 10) or while it is still listed in `/admin/reassign_partitions` (not started
yet: then `replicas` is the current AR and `adding`/`removing` the difference to the target).
Served by any node (the tree is the same everywhere).

Not implemented: NOT_CONTROLLER forwarding semantics (every node answers).

Authorization: DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.controller.tree_reads import read_reassignment, read_topics
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation


@register(
    api_key=ApiKey.LIST_PARTITION_REASSIGNMENTS,
    name="ListPartitionReassignments",
    min_version=0,
    max_version=0,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE):
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "error_message": None,
                "topics": [],
            },
        )
    store = ctx.services.store
    topics = read_topics(store)
    ongoing: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    for name, assignment in topics.items():
        data = assignment.data
        for partition in sorted(set(data.adding_replicas) | set(data.removing_replicas)):
            ongoing[(name, partition)] = (
                tuple(data.partitions.get(partition, ())),
                tuple(data.adding_replicas.get(partition, ())),
                tuple(data.removing_replicas.get(partition, ())),
            )
    plan = read_reassignment(store)
    for entry in plan.data.partitions if plan is not None else ():
        key = (entry.topic, entry.partition)
        if key in ongoing or entry.topic not in topics:
            continue
        current = tuple(topics[entry.topic].data.partitions.get(entry.partition, ()))
        target = tuple(entry.replicas)
        ongoing[key] = (
            current,
            tuple(r for r in target if r not in current),
            tuple(r for r in current if r not in target),
        )
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(str(t.name), int(p)) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, partition), (replicas, adding, removing) in sorted(ongoing.items()):
        if wanted is not None and (name, partition) not in wanted:
            continue
        by_topic.setdefault(name, []).append(
            {
                "partition_index": partition,
                "replicas": list(replicas),
                "adding_replicas": list(adding),
                "removing_replicas": list(removing),
            }
        )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
        },
    )
