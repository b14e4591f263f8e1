"""LeaveGroup v0-4: members leave at once instead of waiting for their session (GRP-15).

* v0: group, member_id. v1: throttle_time. v2: no change.
* v3: a batch of members, each with member_id and group_instance_id, each answered with
  its own error (KIP-345: an operator can remove static members by instance id).
* v4: flexible (KIP-482).

For v0-2 the one member's error is the top-level error (Kafka's behaviour).
Not implemented: v5 `reason` (KIP-800) is not advertised.

Authorization: READ on the GROUP (else GROUP_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.messages import LeavingMember
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.LEAVE_GROUP, name="LeaveGroup", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, str(request.group_id)):
        return build(
            response_class(request),
            {"throttle_time": 0, "error_code": int(ErrorCode.group_authorization_failed)},
        )
    batched = has_field(request, "members")
    if batched:
        leaving = tuple(
            LeavingMember(str(m.member_id), m.group_instance_id) for m in request.members
        )
    else:
        leaving = (LeavingMember(str(request.member_id), None),)
    result = await ctx.services.groups.leave_group(str(request.group_id), leaving)
    error = result.error
    if not batched and error == ErrorCode.none and result.members:
        error = result.members[0].error
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(error),
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": int(m.error),
                }
                for m in result.members
            ],
        },
    )
