"""ConsumerGroupDescribe v0-1: KIP-848 consumer groups as the coordinator sees them.

Per group: state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch,
the assignor, and per member its epoch, subscription (names and regex), current assignment
and target assignment (topic ids and names). v1 adds `member_type` (Kafka's MemberType:
0 a classic member of the group, KIP-848 online migration; 1 a consumer member).

A group this node does not coordinate: NOT_COORDINATOR; a classic or unknown group:
GROUP_ID_NOT_FOUND with a message (admin clients then fall back to DescribeGroups).

Authorization: DESCRIBE on the GROUP (else GROUP_AUTHORIZATION_FAILED); with
`include_authorized_operations` the group's operations bitfield.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.group.consumer_group import NamedPartitions
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

_UNKNOWN_OPERATIONS = -(2**31)
_CLASSIC_MEMBER, _CONSUMER_MEMBER = 0, 1
MAX_GROUPS = 10_000


def _assignment(partitions: NamedPartitions) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": name, "partitions": list(numbers)}
            for topic_id, name, numbers in partitions
        ]
    }


@register(
    api_key=ApiKey.CONSUMER_GROUP_DESCRIBE,
    name="ConsumerGroupDescribe",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    with_operations = bool(request.include_authorized_operations)
    groups = []
    for group_id in map(str, request.group_ids[:MAX_GROUPS]):
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(
                {
                    "error_code": int(ErrorCode.group_authorization_failed),
                    "group_id": group_id,
                    "group_state": "",
                    "members": [],
                }
            )
            continue
        described = await ctx.services.groups.consumer_group_describe(group_id)
        groups.append(
            {
                "error_code": int(described.error),
                "error_message": described.error_message,
                "group_id": group_id,
                "group_state": described.state,
                "group_epoch": described.epoch,
                "assignment_epoch": described.assignment_epoch,
                "assignor_name": described.assignor,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": _assignment(m.assignment),
                        "target_assignment": _assignment(m.target_assignment),
                        "member_type": _CLASSIC_MEMBER if m.classic else _CONSUMER_MEMBER,
                    }
                    for m in described.members
                ],
                "authorized_operations": ctx.authorized_operations(ResourceType.GROUP, group_id)
                if with_operations
                else _UNKNOWN_OPERATIONS,
            }
        )
    return build(response_class(request), {"throttle_time": 0, "groups": groups})
