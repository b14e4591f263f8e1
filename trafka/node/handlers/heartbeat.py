"""Heartbeat v0-4: a member says it is alive; the answer says whether to rejoin (GRP-16).

* v0: group, generation, member. v1: throttle_time. v2: no change.
* v3: group_instance_id (KIP-345, FENCED_INSTANCE_ID). v4: flexible (KIP-482).

Errors (GRP-18): REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, NOT_COORDINATOR (look the coordinator up again). A classic member of a
KIP-848 consumer group gets REBALANCE_IN_PROGRESS when it must rejoin to reconcile.

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import HeartbeatRequest
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.HEARTBEAT, name="Heartbeat", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id)):
        return build(
            response_class(request),
            {"throttle_time": 0, "error_code": int(ErrorCode.group_authorization_failed)},
        )
    error = await ctx.services.groups.heartbeat(
        HeartbeatRequest(
            group_id=str(request.group_id),
            generation_id=int(request.generation_id),
            member_id=str(request.member_id),
            group_instance_id=getattr(request, "group_instance_id", None),
        )
    )
    return build(response_class(request), {"throttle_time": 0, "error_code": int(error)})
