"""CreateAcls v1-2: store ACL bindings (KIP-140; prefixed patterns KIP-290).

* v1: resource_pattern_type (LITERAL / PREFIXED, KIP-290). v2: flexible (KIP-482).
  (v0 is gone from kio's schemas, as from Kafka 4.0, KIP-896.)

Needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED on every creation); without
an ACL authorizer every creation gets SECURITY_DISABLED, as Kafka. A binding Kafka refuses
(resource type ANY/UNKNOWN, pattern other than LITERAL/PREFIXED, operation ANY/UNKNOWN,
permission ANY/UNKNOWN, a principal without ``<type>:``, a CLUSTER not named
``kafka-cluster``, a name with ``/``) gets INVALID_REQUEST with Kafka's message; the others
of the request are stored. Storage and propagation: `trafka.node.security.acls`.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum.tree import ZooKeeperError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.acl_common import code_of, refusal
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclError,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    validate_binding,
)
from trafka.security.authorizer import AclOperation, ResourceType


def binding_of(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            code_of(ResourceType, creation.resource_type, ResourceType.UNKNOWN),
            str(creation.resource_name),
            code_of(PatternType, creation.resource_pattern_type, PatternType.UNKNOWN),
        ),
        AccessControlEntry(
            str(creation.principal),
            str(creation.host),
            code_of(AclOperation, creation.operation, AclOperation.UNKNOWN),
            code_of(AclPermissionType, creation.permission_type, AclPermissionType.UNKNOWN),
        ),
    )


@register(api_key=ApiKey.CREATE_ACLS, name="CreateAcls", min_version=1, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    creations = list(request.creations)
    results: list[dict[str, Any]] = [{"error_code": 0, "error_message": None} for _ in creations]
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        for result in results:
            result["error_code"], result["error_message"] = int(refused[0]), refused[1]
        return build(response_class(request), {"throttle_time": 0, "results": results})
    valid: list[tuple[int, AclBinding]] = []
    for index, creation in enumerate(creations):
        binding = binding_of(creation)
        try:
            validate_binding(binding)
        except AclError as error:
            results[index]["error_code"] = int(ErrorCode.invalid_request)
            results[index]["error_message"] = f"Invalid ACL creation: {error}"
            continue
        valid.append((index, binding))
    acls = ctx.services.acls
    assert acls is not None
    try:
        await acls.create([binding for _, binding in valid])
    except ZooKeeperError as error:
        for index, _ in valid:
            results[index]["error_code"] = int(ErrorCode.unknown_server_error)
            results[index]["error_message"] = f"Failed to store the ACLs: {error}"
    return build(response_class(request), {"throttle_time": 0, "results": results})
