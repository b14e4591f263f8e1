"""What the ACL APIs (CreateAcls 30, DescribeAcls 29, DeleteAcls 31) share: wire codes to
`trafka.security.acl` values, and Kafka's answers before any ACL is touched."""

from __future__ import annotations

import enum
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from trafka.node.handlers.context import RequestContext
from trafka.security.acl import (
    AclAuthorizer,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
)
from trafka.security.authorizer import AclOperation, ResourceType

SECURITY_DISABLED_MESSAGE: Final = "No Authorizer is configured on the broker"

_E = TypeVar("_E", bound=enum.IntEnum)


def code_of(cls: type[_E], code: object, unknown: _E) -> _E:
    """A wire code as the enum; an unknown code is the enum's UNKNOWN (Kafka's fromCode)."""
    try:
        return cls(int(code))  # type: ignore[call-overload]
    except (ValueError, TypeError):
        return unknown


def filter_of(wire: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclBindingFilter."""
    return AclBindingFilter(
        resource_type=code_of(ResourceType, wire.resource_type_filter, ResourceType.UNKNOWN),
        name=None if wire.resource_name_filter is None else str(wire.resource_name_filter),
        pattern_type=code_of(PatternType, wire.pattern_type_filter, PatternType.UNKNOWN),
        principal=None if wire.principal_filter is None else str(wire.principal_filter),
        host=None if wire.host_filter is None else str(wire.host_filter),
        operation=code_of(AclOperation, wire.operation, AclOperation.UNKNOWN),
        permission_type=code_of(AclPermissionType, wire.permission_type, AclPermissionType.UNKNOWN),
    )


def refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str | None] | None:
    """Kafka's order: the cluster permission first, then SECURITY_DISABLED without an ACL
    authorizer; None when the request may go on."""
    if not ctx.authorize(operation):
        return ErrorCode.cluster_authorization_failed, None
    if ctx.services.acls is None or not isinstance(ctx.services.authorizer, AclAuthorizer):
        return ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE
    return None
