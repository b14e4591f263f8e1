"""ListGroups v0-5: the groups this broker coordinates (admin clients ask every broker).

* v0: no fields. v1: throttle_time. v2: no change. v3: flexible (KIP-482).
* v4: states_filter, matched case-insensitively, and group_state in the answer (KIP-518);
  the states of KIP-848 consumer groups (Empty, Assigning, Reconciling, Stable) match too.
* v5: types_filter ("classic", "consumer"; case-insensitive) and group_type (KIP-848).
  A consumer group's protocol_type is "consumer".

Unknown state or type names in a filter match nothing. Share and streams groups do not
exist here.

Authorization: DESCRIBE on the CLUSTER lists every group; otherwise only the groups with
DESCRIBE on the GROUP (Kafka).
"""

from __future__ import annotations

from typing import Any

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.LIST_GROUPS, name="ListGroups", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    names = tuple(getattr(request, "states_filter", ()) or ())
    state_names = frozenset(str(name).lower() for name in names) if names else None
    type_names = tuple(getattr(request, "types_filter", ()) or ())
    types = frozenset(str(name).lower() for name in type_names) if type_names else None
    error, listings = await ctx.services.groups.list_groups(
        None, state_names=state_names, types=types
    )
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
                    "group_type": g.group_type,
                }
                for g in listings
            ],
        },
    )
