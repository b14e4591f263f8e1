"""DescribeGroups v0-5: state, protocol and members of groups (ktool groups describe).

* v0: groups. v1: throttle_time. v2: no change.
* v3: include_authorized_operations (KIP-430: the bit set when asked for, else -2^31).
* v4: members carry group_instance_id (KIP-345). v5: flexible (KIP-482).

A group nobody knows is described as state "Dead" with error NONE (Kafka's answer before
v6). Member metadata and assignments are only reported in Stable (Kafka's `summary`).
Not implemented: v6 (KIP-1043 GROUP_ID_NOT_FOUND and error messages).

Authorization: DESCRIBE on each GROUP (else GROUP_AUTHORIZATION_FAILED for it), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

_UNKNOWN_OPERATIONS = -(2**31)


@register(api_key=ApiKey.DESCRIBE_GROUPS, name="DescribeGroups", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.services.groups
    groups = []
    with_operations = bool(getattr(request, "include_authorized_operations", False))
    loop_slice = LoopSlice()
    for group_id in request.groups:
        await loop_slice.tick()
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, str(group_id)):
            groups.append(
                {
                    "error_code": int(ErrorCode.group_authorization_failed),
                    "group_id": str(group_id),
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                    "authorized_operations": _UNKNOWN_OPERATIONS,
                }
            )
            continue
        description = await service.describe_group(str(group_id))
        groups.append(
            {
                "error_code": int(description.error),
                "group_id": description.group_id,
                "group_state": description.state,
                "protocol_type": description.protocol_type,
                "protocol_data": description.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in description.members
                ],
                "authorized_operations": ctx.authorized_operations(
                    ResourceType.GROUP, str(group_id)
                )
                if with_operations
                else _UNKNOWN_OPERATIONS,
            }
        )
    return await answer(request, {"throttle_time": 0, "groups": groups}, len(groups))
