"""DescribeTopicPartitions v0 (KIP-966): topics and partitions, paged by a cursor.

Kafka 3.8+ Admin clients describe topics with it (Kafka 4's `kafka-topics --describe`,
`Admin.describeTopics`), falling back to Metadata only when a broker does not advertise it.
The rules are Kafka's (`DescribeTopicPartitionsRequestHandler`, `KRaftMetadataCache`):

* An empty topic list means every topic; otherwise the named ones. Names below the
  cursor's topic are skipped; with a topic list, the cursor's topic must be in it, else
  every named topic is answered INVALID_REQUEST (Kafka's error response).
* Topics are answered sorted by name. At most `min(response_partition_limit,
  max.request.partition.size.limit)` partitions (Kafka's broker config, default 2000) are
  returned; the cursor's partition index applies to the cursor's topic. When a topic's
  partitions do not all fit, the answer ends with that topic and `next_cursor` names it
  and the first partition left out; when the limit is used up exactly and more topics
  follow, `next_cursor` names the next topic and partition 0.
* A named topic that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION
  (INVALID_TOPIC_EXCEPTION for an illegal name); with "every topic" nothing is invented.
* Authorization: DESCRIBE on each topic. A named topic the principal may not describe is
  answered TOPIC_AUTHORIZATION_FAILED with the zero topic id (after the others, as Kafka
  appends them); with "every topic" it is left out. `topic_authorized_operations` is always
  filled (KIP-430 bits), as Kafka does.

Partitions carry what Metadata carries (`metadata.topic_metadata`'s rules: a leader that is
not alive gives LEADER_NOT_AVAILABLE and leader -1, offline replicas listed), plus the
KIP-966 eligible leader replicas, always empty: trafka has no ELR (unclean recovery is
the classic `unclean.leader.election.enable`).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.log.names import topic_name_error
from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.node.topics import INTERNAL_TOPICS, TopicState
from trafka.security.acl import AUTHORIZED_OPERATIONS_UNKNOWN
from trafka.security.authorizer import AclOperation, ResourceType

TOPIC = ResourceType.TOPIC
ZERO_UUID = uuid.UUID(int=0)


@register(
    api_key=ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    name="DescribeTopicPartitions",
    min_version=0,
    max_version=0,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics_manager = ctx.services.topics
    cursor = request.cursor
    cursor_topic = str(cursor.topic_name) if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = {name for name in topics_manager.topics if name >= cursor_topic}
    else:
        names = {str(t.name) for t in request.topics if str(t.name) >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            return await _respond(
                request,
                [_error_topic(str(t.name), ErrorCode.invalid_request) for t in request.topics],
                None,
            )
    authorized = ctx.authorized_names(AclOperation.DESCRIBE, TOPIC, names)
    first_partition = (
        max(0, int(cursor.partition_index))
        if cursor is not None and cursor_topic in authorized
        else 0
    )
    remaining = min(_partition_limit(ctx), int(request.response_partition_limit))
    live = set(ctx.services.metadata.live_broker_ids())
    answered: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    loop_slice = LoopSlice()
    for name in sorted(authorized):
        await loop_slice.tick()
        if remaining <= 0:
            if remaining == 0:
                next_cursor = {"topic_name": name, "partition_index": 0}
            break
        state = topics_manager.get(name)
        if state is None:
            if not fetch_all:
                error = ErrorCode.unknown_topic_or_partition
                if topic_name_error(name) is not None:
                    error = ErrorCode.invalid_topic_exception
                answered.append(_error_topic(name, error))
            continue
        start = first_partition if name == cursor_topic else 0
        end = min(len(state.partitions), start + remaining)
        partitions = [_partition(state, index, live) for index in range(start, end)]
        answered.append(_topic(ctx, state, partitions))
        if end < len(state.partitions):
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(partitions)
    if not fetch_all:
        answered += [
            _error_topic(name, ErrorCode.topic_authorization_failed)
            for name in sorted(names - authorized)
        ]
    return await _respond(request, answered, next_cursor)


def _partition_limit(ctx: RequestContext) -> int:
    return int(ctx.services.configs.config.get_int("max.request.partition.size.limit"))


async def _respond(
    request: Any, topics: list[dict[str, Any]], next_cursor: dict[str, Any] | None
) -> Any:
    elements = sum(len(t["partitions"]) + 1 for t in topics)
    data = {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
    return await answer(request, data, elements)


def _partition(state: TopicState, index: int, live: set[int]) -> dict[str, Any]:
    partition = state.partitions[index]
    leader_alive = partition.leader in live
    return {
        "error_code": 0 if leader_alive else int(ErrorCode.leader_not_available),
        "partition_index": index,
        "leader_id": partition.leader if leader_alive else -1,
        "leader_epoch": partition.leader_epoch,
        "replica_nodes": list(partition.replicas),
        "isr_nodes": list(partition.isr),
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [r for r in partition.replicas if r not in live],
    }


def _topic(
    ctx: RequestContext, state: TopicState, partitions: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": state.name,
        "topic_id": state.topic_id,
        "is_internal": state.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": ctx.authorized_operations(TOPIC, state.name),
    }


def _error_topic(name: str, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
    }
