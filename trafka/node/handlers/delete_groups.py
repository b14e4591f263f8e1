"""DeleteGroups v0-2: delete Empty groups and their offsets (KIP-229).

* v0: groups_names. v1: no change. v2: flexible (KIP-482).

Per group: NONE (offset and group tombstones appended), NON_EMPTY_GROUP when it has
members, GROUP_ID_NOT_FOUND when unknown, NOT_COORDINATOR when another broker owns it.

Authorization: DELETE on each GROUP (else GROUP_AUTHORIZATION_FAILED for it), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.DELETE_GROUPS, name="DeleteGroups", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.services.groups
    results = []
    for group_id in request.groups_names:
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, str(group_id)):
            error = int(ErrorCode.group_authorization_failed)
            results.append({"group_id": str(group_id), "error_code": error})
            continue
        deletion = await service.delete_group(str(group_id))
        results.append({"group_id": deletion.group_id, "error_code": int(deletion.error)})
    return build(response_class(request), {"throttle_time": 0, "results": results})
