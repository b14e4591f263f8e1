"""DeleteAcls v1-2: remove the ACL bindings each filter matches (KIP-140, KIP-290).

* v1: pattern_type_filter (ANY, MATCH, LITERAL, PREFIXED). v2: flexible (KIP-482).

Needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED on every filter); without an
ACL authorizer SECURITY_DISABLED on every filter, as Kafka. A filter with an UNKNOWN field:
INVALID_REQUEST for that filter. Each filter's result lists the bindings it removed (a
binding two filters match is listed under both, as Kafka). Removal is a compare-and-set per
resource node followed by a change notification (`trafka.node.security.acls`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum.tree import ZooKeeperError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.acl_common import filter_of, refusal
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import answer
from trafka.node.handlers.registry import register
from trafka.security.acl import AclBindingFilter, AclError
from trafka.security.authorizer import AclOperation


def _result(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message, "matching_acls": []}


@register(api_key=ApiKey.DELETE_ACLS, name="DeleteAcls", min_version=1, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    filters = [filter_of(wire) for wire in request.filters]
    results = [_result(ErrorCode.none, None) for _ in filters]
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        results = [_result(*refused) for _ in filters]
        return build(response_class(request), {"throttle_time": 0, "filter_results": results})
    valid: list[tuple[int, AclBindingFilter]] = []
    for index, binding_filter in enumerate(filters):
        try:
            binding_filter.validate()
        except AclError as error:
            results[index] = _result(ErrorCode.invalid_request, str(error))
            continue
        valid.append((index, binding_filter))
    acls = ctx.services.acls
    assert acls is not None
    try:
        removed = await acls.delete([binding_filter for _, binding_filter in valid])
    except ZooKeeperError as error:
        for index, _ in valid:
            results[index] = _result(ErrorCode.unknown_server_error, f"Failed to delete: {error}")
    else:
        for (index, _), bindings in zip(valid, removed, strict=True):
            results[index]["matching_acls"] = [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": int(b.pattern.resource_type),
                    "resource_name": b.pattern.name,
                    "pattern_type": int(b.pattern.pattern_type),
                    "principal": b.entry.principal,
                    "host": b.entry.host,
                    "operation": int(b.entry.operation),
                    "permission_type": int(b.entry.permission_type),
                }
                for b in bindings
            ]
    # Every filter lists every binding it matched: 3,000 filters over 1,000 bindings is
    # 3 million entries, built off the loop.
    elements = len(results) + sum(len(r["matching_acls"]) for r in results)
    return await answer(request, {"throttle_time": 0, "filter_results": results}, elements)
