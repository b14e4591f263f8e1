"""StopReplica v1-3: stop leading or following partitions; with delete, remove their logs.

* v1: broker epoch (KIP-380); v2: flexible; v3: per-partition leader epoch and delete flag
  (KIP-570).

An older controller epoch gets STALE_CONTROLLER_EPOCH. Deleted partitions are answered one
by one so the controller's deletion state machine can move each replica to
ReplicaDeletionSuccessful (CTL-23, CTL-29). The metadata cache is not touched: a replica
removed by a reassignment leaves its topic in place, and a deleted topic leaves the cache
through UpdateMetadata's leader -2.

Not implemented: v0 (ungrouped), v3's per-partition leader-epoch fencing (the controller's
epoch fence is used instead).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register


def _partitions(request: Any) -> list[tuple[str, int, bool]]:
    if hasattr(request, "topic_states"):
        return [
            (str(t.topic_name), int(p.partition_index), bool(p.delete_partition))
            for t in request.topic_states
            for p in t.partition_states
        ]
    delete = bool(request.delete_partitions)
    return [(str(t.name), int(p), delete) for t in request.topics for p in t.partition_indexes]


@register(api_key=ApiKey.STOP_REPLICA, name="StopReplica", min_version=1, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    partitions = _partitions(request)
    if services.replicas.fence.admit(int(request.controller_epoch)) is not ErrorCode.none:
        code = int(ErrorCode.stale_controller_epoch)
        return build(
            response_class(request),
            {
                "error_code": code,
                "partition_errors": [
                    {"topic_name": t, "partition_index": p, "error_code": code}
                    for t, p, _ in partitions
                ],
            },
        )
    errors = []
    for topic, partition, delete in partitions:
        code = 0
        try:
            services.replicas.stop_replicas([(topic, partition)], delete=delete)
        except Exception:
            code = int(ErrorCode.kafka_storage_error)
        errors.append({"topic_name": topic, "partition_index": partition, "error_code": code})
    return build(response_class(request), {"error_code": 0, "partition_errors": errors})
