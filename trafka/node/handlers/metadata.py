"""Metadata v0-11: brokers, cluster id, controller id, topics and partitions.

* v0: all topics when the list is empty. v1: null list = all topics, empty = none;
  controller_id, rack, is_internal. v2: cluster_id. v3: throttle_time_ms.
* v4: allow_auto_topic_creation (older versions always allow it, as Kafka does).
* v5: offline_replicas. v7: leader_epoch (KIP-320). v8: authorized operations (KIP-430;
  we answer -2147483648 = "not requested"/unknown). v9: flexible. v10: topic ids (KIP-516).
  v11: cluster authorized operations removed.

Auto-creation (SEEDS PROTO-23): an unknown topic is created with `num.partitions` and
`default.replication.factor` when the request allows it and `auto.create.topics.enable` is
true; otherwise UNKNOWN_TOPIC_OR_PARTITION. An illegal name gives INVALID_TOPIC_EXCEPTION.
Internal topics are never auto-created here (the group coordinator creates
`__consumer_offsets`).

Not implemented: ACL-based authorized operations (always "unknown").
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.topics import INTERNAL_TOPICS, TopicError, TopicState

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)


def topic_metadata(ctx: RequestContext, topic: TopicState) -> dict[str, Any]:
    live = set(ctx.services.metadata.live_broker_ids())
    partitions = []
    for index in sorted(topic.partitions):
        state = topic.partitions[index]
        leader_alive = state.leader in live
        partitions.append(
            {
                "error_code": 0 if leader_alive else int(ErrorCode.leader_not_available),
                "partition_index": index,
                "leader_id": state.leader if leader_alive else -1,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr),
                "offline_replicas": [r for r in state.replicas if r not in live],
            }
        )
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
    }


def _error_topic(name: str | None, error: ErrorCode, topic_id: uuid.UUID | None = None) -> Any:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": topic_id or uuid.UUID(int=0),
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
    }


@register(api_key=ApiKey.METADATA, name="Metadata", min_version=0, max_version=11)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    topics_manager = services.topics
    version = ctx.api_version
    requested = request.topics
    allow_auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
    answer: list[Any] = []
    if requested is None or (version == 0 and not requested):
        answer = [topic_metadata(ctx, t) for _, t in sorted(topics_manager.topics.items())]
    else:
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id is not None and topic_id.int != 0:
                by_id = topics_manager.by_id(topic_id)
                if by_id is None:
                    answer.append(_error_topic(None, ErrorCode.unknown_topic_id, topic_id))
                else:
                    answer.append(topic_metadata(ctx, by_id))
                continue
            if name is None:
                answer.append(_error_topic(None, ErrorCode.invalid_request))
                continue
            state = topics_manager.get(name)
            if state is None and allow_auto_create and name not in INTERNAL_TOPICS:
                try:
                    state = await services.topic_admin.auto_create_topic(name)
                except TopicError as error:
                    answer.append(_error_topic(name, error.error_code))
                    continue
            if state is None:
                answer.append(_error_topic(name, ErrorCode.unknown_topic_or_partition))
            else:
                answer.append(topic_metadata(ctx, state))
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in services.metadata.live_brokers()
            ],
            "cluster_id": services.cluster_id,
            "controller_id": services.metadata.controller_id(),
            "topics": answer,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
        },
    )
