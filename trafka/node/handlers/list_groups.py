"""ListGroups v0-4: the groups this broker coordinates (admin clients ask every broker).

* v0: no fields. v1: throttle_time. v2: no change. v3: flexible (KIP-482).
* v4: states_filter, matched case-insensitively, and group_state in the answer (KIP-518).

Unknown state names in the filter match nothing. Not implemented: v5 `types_filter`
(KIP-848; every group here is a "classic" group).

Authorization: DESCRIBE on the CLUSTER lists every group; otherwise only the groups with
DESCRIBE on the GROUP (Kafka).
"""

from __future__ import annotations

from typing import Any

from trafka.group.state import GroupState, parse_state_filter
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.LIST_GROUPS, name="ListGroups", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    names = tuple(getattr(request, "states_filter", ()) or ())
    states: frozenset[GroupState] | None = None
    if names:
        states = frozenset(state for state in map(parse_state_filter, names) if state is not None)
    error, listings = await ctx.services.groups.list_groups(states)
    if not ctx.authorize(AclOperation.DESCRIBE):
        visible = ctx.authorized_names(
            AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in listings)
        )
        listings = tuple(g for g in listings if g.group_id in visible)
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(error),
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.state,
                }
                for g in listings
            ],
        },
    )
