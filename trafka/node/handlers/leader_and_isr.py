"""LeaderAndIsr v3-4: the controller tells this broker to lead or follow partitions.

* v3: adding/removing replicas (KIP-455; carried, not used: the controller's reassignment
  drives the ISR itself).
* v4: flexible (KIP-482).

The request's controller epoch is checked first: older than the newest this broker has
seen -> STALE_CONTROLLER_EPOCH for the whole request (ZK-10, KR-04). Partition states whose
leader epoch is not newer than the one held are ignored and answered with
STALE_CONTROLLER_EPOCH per partition (Kafka's ZK-era becomeLeaderOrFollower, EXT-06).
Topics this node has not seen yet are read from the tree first (the topic id and configs
live there), after a sync with the quorum: the controller wrote them just before, and this
node's replica of the tree may not have applied that yet. The work is
`ReplicaManager.apply_leader_and_isr`.

Not implemented: v0-2 and v5+ (topic ids; our controller sends v4), broker epoch checks.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.replication.replica_manager import PartitionStateUpdate

log = logging.getLogger("trafka.node.handlers.leader_and_isr")

SYNC_TIMEOUT_S = 10.0


@register(api_key=ApiKey.LEADER_AND_ISR, name="LeaderAndIsr", min_version=3, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    replica_manager = services.replicas
    every = [
        (str(topic.topic_name), p) for topic in request.topic_states for p in topic.partition_states
    ]
    if replica_manager.fence.admit(int(request.controller_epoch)) is not ErrorCode.none:
        return build(
            response_class(request),
            {
                "error_code": int(ErrorCode.stale_controller_epoch),
                "partition_errors": [
                    {
                        "topic_name": name,
                        "partition_index": int(p.partition_index),
                        "error_code": int(ErrorCode.stale_controller_epoch),
                    }
                    for name, p in every
                ],
            },
        )
    unknown = sorted({name for name, _ in every if services.topics.get(name) is None})
    if unknown:
        # The controller wrote these topics before sending this request, but this node's
        # replica of the tree may not have applied the write yet (a new topic): without a
        # barrier the read misses it, the partitions are skipped, and the controller never
        # resends them, so this node neither leads nor follows them.
        with trio.move_on_after(SYNC_TIMEOUT_S):
            await services.store.sync()
        for name in unknown:
            await services.topics.refresh_topic(name)
            if services.topics.get(name) is None:
                log.warning("LeaderAndIsr names %s, not in the tree: its partitions skipped", name)
    updates = [
        PartitionStateUpdate(
            topic=name,
            partition=int(p.partition_index),
            controller_epoch=int(p.controller_epoch),
            leader=int(p.leader),
            leader_epoch=int(p.leader_epoch),
            isr=tuple(int(b) for b in p.isr),
            zk_version=int(p.zk_version),
            replicas=tuple(int(b) for b in p.replicas),
        )
        for name, p in every
        if services.topics.get(name) is not None
    ]
    missing = replica_manager.logs_to_create(updates)
    if missing:  # off the loop: creating a log waits for the disk
        await trio.to_thread.run_sync(replica_manager.create_logs, missing)
    errors = replica_manager.apply_leader_and_isr(updates)
    return build(
        response_class(request),
        {
            "error_code": 0,
            "partition_errors": [
                {
                    "topic_name": name,
                    "partition_index": int(p.partition_index),
                    "error_code": errors.get(
                        (name, int(p.partition_index)), int(ErrorCode.unknown_topic_or_partition)
                    ),
                }
                for name, p in every
            ],
        },
    )
