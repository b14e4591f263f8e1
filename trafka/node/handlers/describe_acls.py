"""DescribeAcls v1-2: the ACL bindings a filter matches (KIP-140; KIP-290 pattern filters).

* v1: pattern_type_filter (ANY, MATCH, LITERAL, PREFIXED). v2: flexible (KIP-482).

Needs DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED); without an ACL authorizer
SECURITY_DISABLED, as Kafka. A filter with an UNKNOWN field: INVALID_REQUEST. Answered from
the node's copy of the ACLs (kept within a second of the tree: `trafka.node.security.acls`),
grouped by resource pattern.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.acl_common import filter_of, refusal
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.acl import AclBinding, AclError, ResourcePattern
from trafka.security.authorizer import AclOperation


def resources_of(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for binding in sorted(bindings):
        entry = binding.entry
        by_pattern.setdefault(binding.pattern, []).append(
            {
                "principal": entry.principal,
                "host": entry.host,
                "operation": int(entry.operation),
                "permission_type": int(entry.permission_type),
            }
        )
    return [
        {
            "resource_type": int(pattern.resource_type),
            "resource_name": pattern.name,
            "pattern_type": int(pattern.pattern_type),
            "acls": acls,
        }
        for pattern, acls in by_pattern.items()
    ]


@register(api_key=ApiKey.DESCRIBE_ACLS, name="DescribeAcls", min_version=1, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    def answer(code: ErrorCode, message: str | None, resources: list[dict[str, Any]]) -> Any:
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(code),
                "error_message": message,
                "resources": resources,
            },
        )

    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return answer(refused[0], refused[1], [])
    binding_filter = filter_of(request)
    try:
        binding_filter.validate()
    except AclError as error:
        return answer(ErrorCode.invalid_request, str(error), [])
    acls = ctx.services.acls
    assert acls is not None
    return answer(ErrorCode.none, None, resources_of(acls.authorizer.bindings(binding_filter)))
