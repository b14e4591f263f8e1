"""ConsumerGroupHeartbeat v0-1: a member of a KIP-848 consumer group joins, heartbeats,
reports the partitions it owns and gets its assignment; epoch -1 / -2 leaves.

* v0: member_id may be empty when joining (the coordinator makes one). v1: the member makes
  its own member id (a UUID; empty is INVALID_REQUEST) and may subscribe with
  `subscribed_topic_regex` (KIP-848's server-side regex, evaluated with Python's `re`).
* Null fields mean "unchanged since the last heartbeat" (instance id, rack, rebalance
  timeout, subscription, assignor, owned partitions).

The logic (epochs, reconciliation, fencing, static members, assignors) is
`trafka.group.consumer_group`; errors: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (a non-empty classic group of that id),
INVALID_REQUEST, NOT_COORDINATOR. The answer is sent after the records are appended.

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every
subscribed topic name (else TOPIC_AUTHORIZATION_FAILED), as Kafka 4.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.consumer_group import ConsumerHeartbeatRequest
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, ms, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.join_group import client_host
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

MAX_OWNED_PARTITIONS = 1_000_000  # bounded by the frame size anyway; a guard for the sets


def _error(request: Any, error: ErrorCode, message: str | None = None) -> Any:
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(error),
            "error_message": message,
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval": 0,
            "assignment": None,
        },
    )


@register(
    api_key=ApiKey.CONSUMER_GROUP_HEARTBEAT,
    name="ConsumerGroupHeartbeat",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    group_id = str(request.group_id)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(request, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names is not None:
        allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, map(str, names))
        if any(str(name) not in allowed for name in names):
            return _error(request, ErrorCode.topic_authorization_failed)
    owned = None
    if request.topic_partitions is not None:
        owned = tuple(
            (tp.topic_id, tuple(int(p) for p in tp.partitions))
            for tp in request.topic_partitions
            if tp.topic_id is not None
        )
        if sum(len(p) for _, p in owned) > MAX_OWNED_PARTITIONS:
            return _error(request, ErrorCode.invalid_request, "too many owned partitions")
    result = await ctx.services.groups.consumer_group_heartbeat(
        ConsumerHeartbeatRequest(
            group_id=group_id,
            member_id=str(request.member_id),
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=ms(request.rebalance_timeout),
            subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            api_version=ctx.api_version,
        )
    )
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": list(partitions)}
                for topic_id, partitions in result.assignment
            ]
        }
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(result.error),
            "error_message": result.error_message,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )
