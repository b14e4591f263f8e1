"""SyncGroup v0-5: the leader's assignment goes out, each member gets its own (GRP-08).

* v0: group, generation, member, assignments (leader only). v1: throttle_time (KIP-124).
* v2: no change. v3: group_instance_id (KIP-345). v4: flexible (KIP-482).
* v5: protocol_type and protocol_name in request and response, checked against the group
  (INCONSISTENT_GROUP_PROTOCOL, KIP-559).

Followers are parked until the leader's SyncGroup arrives (or the rebalance restarts:
REBALANCE_IN_PROGRESS). Assignment bytes are opaque (range, roundrobin, sticky and
cooperative-sticky all work because the clients compute them, GRP-04). A classic member of a
KIP-848 consumer group (online migration) gets its server-side assignment in the consumer
protocol's layout instead.

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import SyncGroupRequest
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

# How long a parked SyncGroup may wait at most; the coordinator answers it within the
# group's rebalance timeout (pending-sync expiry), this is only a safety net.
_SYNC_WAIT_MS = 300_000


@register(api_key=ApiKey.SYNC_GROUP, name="SyncGroup", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id)):
        return build(
            response_class(request),
            {"throttle_time": 0, "error_code": int(ErrorCode.group_authorization_failed)},
        )
    sync = SyncGroupRequest(
        group_id=str(request.group_id),
        generation_id=int(request.generation_id),
        member_id=str(request.member_id),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((str(a.member_id), bytes(a.assignment)) for a in request.assignments),
    )
    result = await ctx.services.groups.sync_group(sync, _SYNC_WAIT_MS)
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(result.error),
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        },
    )
