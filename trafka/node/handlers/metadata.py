"""Metadata v0-12: brokers, cluster id, controller id, topics and partitions.

* v0: all topics when the list is empty. v1: null list = all topics, empty = none;
  controller_id, rack, is_internal. v2: cluster_id. v3: throttle_time_ms.
* v4: allow_auto_topic_creation (older versions always allow it, as Kafka does).
* v5: offline_replicas. v7: leader_epoch (KIP-320). v8: authorized operations (KIP-430:
  the bit set when asked for, else -2147483648). v9: flexible. v10: topic ids (KIP-516).
  v11: cluster authorized operations removed. v12: topics named by id only, nullable topic
  names (KIP-516; librdkafka's KIP-848 consumer needs it to resolve assigned topic ids).

Auto-creation (SEEDS PROTO-23): an unknown topic is created with `num.partitions` and
`default.replication.factor` when the request allows it and `auto.create.topics.enable` is
true; otherwise UNKNOWN_TOPIC_OR_PARTITION. An illegal name gives INVALID_TOPIC_EXCEPTION.
Internal topics are never auto-created here (the group coordinator creates
`__consumer_offsets`).

Authorization (Kafka's table): a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (by name or id);
auto-creation needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED).

Many topics (issue 12, item 4): a large request is decoded in slices by the net layer
(`trafka.net.large_requests`), the topic loop yields every few thousand topics, and the
answer's topics are written in slices, so a 200,000-topic request does not hold the event
loop. They are written from the handler's dicts by `trafka.net.metadata_encoding` (the
same bytes as kio's; issue 19: 10,000 partitions took ~0.4 s through kio's build and
write), the rest of the response by kio.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net import large_requests, metadata_encoding
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.net.server import EncodedResponse
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.topics import INTERNAL_TOPICS, TopicError, TopicState
from trafka.security.acl import AUTHORIZED_OPERATIONS_UNKNOWN
from trafka.security.authorizer import AclOperation, ResourceType

TOPIC = ResourceType.TOPIC


def topic_metadata(ctx: RequestContext, topic: TopicState) -> dict[str, Any]:
    """A topic's answer; its partitions as `metadata_encoding.Partition` tuples (no dict
    or list per partition: a 10,000-partition answer's allocations set off full garbage
    collections)."""
    live = frozenset(ctx.services.metadata.live_broker_ids())
    leader_not_available = int(ErrorCode.leader_not_available)
    partitions: list[metadata_encoding.Partition] = []
    states = topic.partitions
    for index in sorted(states):
        state = states[index]
        replicas = state.replicas
        if state.leader in live:
            error_code, leader = 0, state.leader
        else:
            error_code, leader = leader_not_available, -1
        offline = () if live.issuperset(replicas) else tuple(r for r in replicas if r not in live)
        partitions.append(
            (error_code, index, leader, state.leader_epoch, replicas, state.isr, offline)
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


@register(api_key=ApiKey.METADATA, name="Metadata", min_version=0, max_version=12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    topics_manager = services.topics
    version = ctx.api_version
    requested = request.topics
    allow_auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
    answer: list[Any] = []
    if requested is None or (version == 0 and not requested):
        everything = sorted(topics_manager.topics.items())
        visible = ctx.authorized_names(AclOperation.DESCRIBE, TOPIC, (n for n, _ in everything))
        answer = [topic_metadata(ctx, t) for n, t in everything if n in visible]
    else:
        for index, wanted in enumerate(requested):
            if index and index % large_requests.ELEMENTS_PER_SLICE == 0:
                await trio.sleep(0)  # a huge topic list must not hold the event loop
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            # A response topic name is nullable from v12 only (found by the fuzzer: a null
            # name in a v10/v11 answer failed to encode and closed the connection).
            no_name = None if version >= 12 else ""
            if name is None and topic_id is not None and topic_id.int != 0:
                by_id = topics_manager.by_id(topic_id)
                if by_id is None:
                    answer.append(_error_topic(no_name, ErrorCode.unknown_topic_id, topic_id))
                elif not ctx.authorize(AclOperation.DESCRIBE, TOPIC, by_id.name):
                    answer.append(
                        _error_topic(no_name, ErrorCode.topic_authorization_failed, topic_id)
                    )
                else:
                    answer.append(topic_metadata(ctx, by_id))
                continue
            if name is None:
                answer.append(_error_topic(no_name, ErrorCode.invalid_request))
                continue
            if not ctx.authorize(AclOperation.DESCRIBE, TOPIC, name):
                answer.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                continue
            state = topics_manager.get(name)
            if state is None and allow_auto_create and name not in INTERNAL_TOPICS:
                if not (
                    ctx.authorize(AclOperation.CREATE)
                    or ctx.authorize(AclOperation.CREATE, TOPIC, name)
                ):
                    answer.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                    continue
                try:
                    state = await services.topic_admin.auto_create_topic(name)
                except TopicError as error:
                    answer.append(_error_topic(name, error.error_code))
                    continue
            if state is None:
                answer.append(_error_topic(name, ErrorCode.unknown_topic_or_partition))
            else:
                answer.append(topic_metadata(ctx, state))
    if getattr(request, "include_topic_authorized_operations", False):
        for topic in answer:
            if topic["error_code"] == 0 and topic["name"] is not None:
                topic["topic_authorized_operations"] = ctx.authorized_operations(
                    TOPIC, topic["name"]
                )
    cluster_operations = AUTHORIZED_OPERATIONS_UNKNOWN
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER)
    cls = response_class(request)
    data = {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in services.metadata.live_brokers(ctx.listener_name)
        ],
        "cluster_id": services.cluster_id,
        "controller_id": services.metadata.controller_id(),
        "topics": answer,
        "cluster_authorized_operations": cluster_operations,
    }
    # The topics are written from the dicts (trafka.net.metadata_encoding: kio's build and
    # write cost ~40 us per partition), in slices with yields for many topics; the rest
    # of the response is kio's.
    chunks = await large_requests.encode_in_slices(
        build(cls, {**data, "topics": []}),
        "topics",
        lambda topic, out: metadata_encoding.encode_topic(version, topic, out),
        answer,
    )
    while answer:  # freed in slices too, not in one burst when the handler returns
        del answer[-large_requests.ELEMENTS_PER_SLICE :]
        await trio.sleep(0)
    return EncodedResponse(tuple(chunks))
