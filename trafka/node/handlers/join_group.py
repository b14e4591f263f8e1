"""JoinGroup v0-7: join a group; parked until the rebalance completes (GRP-07, GRP-10).

* v0: session_timeout (the rebalance timeout is the same). v1: rebalance_timeout (KIP-62).
* v2: throttle_time in the response. v3: no change.
* v4: a member joining with an empty member id gets MEMBER_ID_REQUIRED (79) and a member
  id, and must rejoin with it (KIP-394).
* v5: group_instance_id, static membership (KIP-345); members carry their instance ids.
* v6: flexible (KIP-482). v7: protocol_type in the response, protocol_name nullable
  (KIP-559).

The coordinator logic is `trafka.group.coordinator`; this module only translates. A classic
member joining a non-empty KIP-848 consumer group (online migration) is answered at once by
the consumer group: generation = its member epoch, no leader (the coordinator assigns).
Not implemented: v8 `reason` (KIP-800) and v9 `skip_assignment` (KIP-814) are not
advertised (the coordinator supports skip_assignment for a later version bump).

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import JoinGroupRequest, Protocol
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, ms, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


def client_host(ctx: RequestContext) -> str:
    """Kafka reports hosts as `InetAddress.toString()`: "/127.0.0.1"."""
    return f"/{ctx.client_host}" if ctx.client_host else ""


@register(api_key=ApiKey.JOIN_GROUP, name="JoinGroup", min_version=0, max_version=7)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id)):
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.group_authorization_failed),
                "generation_id": -1,
                "member_id": str(request.member_id),
            },
        )
    session_timeout_ms = ms(request.session_timeout)
    rebalance_timeout_ms = (
        ms(request.rebalance_timeout) if has_field(request, "rebalance_timeout") else -1
    )
    if rebalance_timeout_ms < 0:
        rebalance_timeout_ms = session_timeout_ms
    join = JoinGroupRequest(
        group_id=str(request.group_id),
        member_id=str(request.member_id),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=str(request.protocol_type),
        protocols=tuple(Protocol(str(p.name), bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        api_version=ctx.api_version,
    )
    result = await ctx.services.groups.join_group(join)
    nullable_protocol = ctx.api_version >= 7
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(result.error),
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": (
                result.protocol_name if nullable_protocol else result.protocol_name or ""
            ),
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in result.members
            ],
        },
    )
