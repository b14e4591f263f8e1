"""ACLs and the ACL authorizer: Kafka's semantics as pure code (issue 14 item 3).

Values (Kafka's `org.apache.kafka.common.acl` / `.resource`): a `ResourcePattern` (resource
type, name, LITERAL or PREFIXED pattern; the LITERAL name ``*`` matches every resource of its
type), an `AccessControlEntry` (principal ``User:<name>`` or ``User:*``, host or ``*``,
operation, ALLOW/DENY), an `AclBinding` (both), and an `AclBindingFilter` with Kafka's
filter semantics (ANY matches everything, MATCH matches the patterns that would apply to a
resource, a null field matches any value) for DescribeAcls and DeleteAcls.

The decision (`AclAuthorizer.authorize`, Kafka's AclAuthorizer/StandardAuthorizer):

1. a principal in ``super.users`` is allowed everything;
2. the ACLs that apply to the resource are the LITERAL ones with its exact name, the LITERAL
   ``*`` ones of its type, and the PREFIXED ones whose name is a prefix of its name;
3. if none applies (for any principal) the answer is ``allow.everyone.if.no.acl.found``
   (default false);
4. a DENY whose principal (exact or ``User:*``), host (exact or ``*``) and operation (exact
   or ALL) match wins;
5. otherwise an ALLOW that matches allows; ALLOW of READ, WRITE, DELETE or ALTER implies
   DESCRIBE, ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALLOW of ALL implies
   everything (DENY implies nothing beyond itself, except DENY ALL);
6. otherwise denied.

Storage (Kafka's ZooKeeper mode, `ZkAclStore`): LITERAL bindings of a resource live in
``/kafka-acl/<ResourceType>/<name>``, PREFIXED ones in
``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, each as
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``. A change to a resource's ACLs is announced by a
persistent sequential node ``/kafka-acl-changes/acl_changes_<10 digits>`` (data
``Topic:orders``) for LITERAL and ``/kafka-acl-extended-changes/acl_changes_<10 digits>``
(data ``{"version":1,"resourceType":"Topic","name":"orders","patternType":"PREFIXED"}``)
for PREFIXED patterns. Resource names go into paths as they are (Kafka does the same; a
name containing ``/`` is refused with INVALID_REQUEST at creation).

Not implemented: principal types other than ``User`` are matched by their text like any
other; no DELEGATION_TOKEN or USER resources are ever checked (no such APIs exist here).
KIP-679 (Kafka 3.0: an idempotent producer needs IDEMPOTENT_WRITE on the cluster *or* WRITE
on some topic) is `AclAuthorizer.may_write_some_topic`, simplified: an ALLOW of WRITE (or
ALL) on any TOPIC pattern for the principal and host counts, a DENY does not cancel it (the
Produce itself still needs WRITE on its topic).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from trafka.security.authorizer import (
    AclOperation,
    Action,
    Authorizer,
    Requester,
    ResourceType,
)

WILDCARD_RESOURCE: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
WILDCARD_HOST: Final = "*"

ACL_ROOT: Final = "/kafka-acl"
ACL_EXTENDED_ROOT: Final = "/kafka-acl-extended/prefixed"
ACL_CHANGES: Final = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES: Final = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX: Final = "acl_changes_"

AUTHORIZED_OPERATIONS_UNKNOWN: Final = -(2**31)
"""KIP-430's "not requested" value of `*_authorized_operations`."""


class PatternType(enum.IntEnum):
    """Kafka's PatternType codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    """Kafka's AclPermissionType codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclError(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST), with Kafka's message."""


# ---- names ---------------------------------------------------------------------------------

_RESOURCE_TYPE_NAMES: Final = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
STORABLE_RESOURCE_TYPES: Final = tuple(_RESOURCE_TYPE_NAMES)


def pascal_name(value: enum.Enum) -> str:
    """READ -> Read, IDEMPOTENT_WRITE -> IdempotentWrite (Kafka's SecurityUtils names)."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def resource_type_name(resource_type: ResourceType) -> str:
    return _RESOURCE_TYPE_NAMES[resource_type]


def resource_type_from_name(name: str) -> ResourceType:
    for resource_type, text in _RESOURCE_TYPE_NAMES.items():
        if text.lower() == name.lower() or resource_type.name.lower() == name.lower():
            return resource_type
    raise AclError(f"unknown resource type {name!r}")


_E = TypeVar("_E", bound=enum.Enum)


def _enum_from_name(cls: type[_E], name: str) -> _E:
    wanted = name.replace("_", "").lower()
    for member in cls:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise AclError(f"unknown {cls.__name__} {name!r}")


def operation_from_name(name: str) -> AclOperation:
    """``Read``, ``READ``, ``IdempotentWrite``, ``idempotent_write`` -> AclOperation."""
    return _enum_from_name(AclOperation, name)


def permission_from_name(name: str) -> AclPermissionType:
    return _enum_from_name(AclPermissionType, name)


def pattern_type_from_name(name: str) -> PatternType:
    return _enum_from_name(PatternType, name)


# ---- operations ----------------------------------------------------------------------------

_IMPLIED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
"""ALLOW of any of these operations also allows the key (Kafka's AclAuthorizer)."""

SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (
        AclOperation.CREATE_TOKENS,
        AclOperation.DESCRIBE_TOKENS,
    ),
}
"""The operations KIP-430's authorized-operations bit sets list per resource type (Kafka's
`AclEntry.supportedOperations`)."""


def _operation_matches(acl_operation: AclOperation, wanted: AclOperation, *, allow: bool) -> bool:
    if acl_operation in (AclOperation.ALL, wanted):
        return True
    return allow and acl_operation in _IMPLIED_BY.get(wanted, frozenset())


# ---- values --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Does an ACL on this pattern apply to the resource `name` of `resource_type`?"""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.name in (name, WILDCARD_RESOURCE)
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return False


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """Raise AclError with Kafka's reasons for a binding CreateAcls refuses."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in STORABLE_RESOURCE_TYPES:
        raise AclError(f"Invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid pattern type {pattern.pattern_type.name}")
    if not pattern.name:
        raise AclError("Resource name must not be empty")
    if "/" in pattern.name or pattern.name in (".", ".."):
        raise AclError(f"Invalid resource name {pattern.name!r}")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != "kafka-cluster":
        raise AclError("The only valid name for the CLUSTER resource is kafka-cluster")
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"Invalid permission type {entry.permission_type.name}")
    principal_type, sep, _ = entry.principal.partition(":")
    if not sep or not principal_type:
        raise AclError(f"Could not parse principal from `{entry.principal}` (no colon is present)")
    if not entry.host:
        raise AclError("Host must not be empty")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: what DescribeAcls lists and DeleteAcls removes."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        """Raise AclError for a filter with an UNKNOWN field (Kafka: INVALID_REQUEST)."""
        if self.resource_type is ResourceType.UNKNOWN:
            raise AclError("Invalid resource type UNKNOWN in filter")
        if self.pattern_type is PatternType.UNKNOWN:
            raise AclError("Invalid pattern type UNKNOWN in filter")
        if self.operation is AclOperation.UNKNOWN:
            raise AclError("Invalid operation UNKNOWN in filter")
        if self.permission_type is AclPermissionType.UNKNOWN:
            raise AclError("Invalid permission type UNKNOWN in filter")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type is PatternType.ANY:
            return self.name is None or self.name == pattern.name
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type is PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return self.name.startswith(pattern.name)
        if self.pattern_type is not pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


# ---- the tree's encoding -------------------------------------------------------------------


def acl_path(pattern: ResourcePattern) -> str:
    root = ACL_ROOT if pattern.pattern_type is PatternType.LITERAL else ACL_EXTENDED_ROOT
    return f"{root}/{resource_type_name(pattern.resource_type)}/{pattern.name}"


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential node prefix, data) announcing a change of `pattern`'s ACLs."""
    if pattern.pattern_type is PatternType.LITERAL:
        data = f"{resource_type_name(pattern.resource_type)}:{pattern.name}".encode()
        return f"{ACL_CHANGES}/{ACL_CHANGE_PREFIX}", data
    document = {
        "version": 1,
        "resourceType": resource_type_name(pattern.resource_type),
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{ACL_EXTENDED_CHANGES}/{ACL_CHANGE_PREFIX}", json.dumps(
        document, separators=(",", ":")
    ).encode()


def parse_change_notification(changes_path: str, data: bytes) -> ResourcePattern:
    """The pattern a notification under `changes_path` names; AclError when malformed."""
    try:
        text = data.decode()
        if changes_path == ACL_CHANGES:
            type_name, sep, name = text.partition(":")
            if not sep:
                raise AclError(f"malformed ACL change notification {text!r}")
            return ResourcePattern(resource_type_from_name(type_name), name, PatternType.LITERAL)
        document = json.loads(text)
        return ResourcePattern(
            resource_type_from_name(str(document["resourceType"])),
            str(document["name"]),
            pattern_type_from_name(str(document["patternType"])),
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise AclError(f"malformed ACL change notification: {error}") from None


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": entry.principal,
            "permissionType": pascal_name(entry.permission_type),
            "operation": pascal_name(entry.operation),
            "host": entry.host,
        }
        for entry in sorted(set(entries))
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """Kafka's ``{"version":1,"acls":[...]}``; AclError when malformed."""
    try:
        document = json.loads(data.decode()) if data else {"acls": []}
        return frozenset(
            AccessControlEntry(
                principal=str(acl["principal"]),
                host=str(acl["host"]),
                operation=operation_from_name(str(acl["operation"])),
                permission_type=permission_from_name(str(acl["permissionType"])),
            )
            for acl in document.get("acls", [])
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise AclError(f"malformed ACL node: {error}") from None


# ---- the authorizer ------------------------------------------------------------------------

AUTHORIZER_CLASS_NAMES: Final = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "trafka.security.acl.AclAuthorizer",
    }
)
"""``authorizer.class.name`` values that select `AclAuthorizer`."""


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's format)."""
    if not text:
        return frozenset()
    return frozenset(part.strip() for part in text.split(";") if part.strip())


class AclAuthorizer:
    """Kafka's ACL authorizer over an in-memory copy of the tree's ACLs.

    The node's shell loads every resource's entries (`set_entries`) at start and after
    each change notification; `authorize` only reads."""

    def __init__(
        self,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._by_type: dict[ResourceType, dict[ResourcePattern, frozenset[AccessControlEntry]]] = {}

    # -- the stored copy
    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        frozen = frozenset(entries)
        by_type = self._by_type.setdefault(pattern.resource_type, {})
        if frozen:
            self._acls[pattern] = frozen
            by_type[pattern] = frozen
        else:
            self._acls.pop(pattern, None)
            by_type.pop(pattern, None)

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        self._acls = {}
        self._by_type = {}
        for pattern, entries in acls.items():
            self.set_entries(pattern, entries)

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def bindings(self, binding_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every stored binding the filter matches, sorted."""
        found = [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            for entry in entries
            if binding_filter is None or binding_filter.matches(AclBinding(pattern, entry))
        ]
        return sorted(found)

    # -- decisions
    def _applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        return [
            entry
            for pattern, entries in self._by_type.get(resource_type, {}).items()
            if pattern.applies_to(resource_type, name)
            for entry in entries
        ]

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize_one(self, requester: Requester, action: Action) -> bool:
        principal = str(requester.principal)
        if self.is_super_user(principal):
            return True
        entries = self._applicable(action.resource_type, action.resource_name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        matching = [
            entry
            for entry in entries
            if entry.principal in (principal, WILDCARD_PRINCIPAL)
            and entry.host in (requester.client_host, WILDCARD_HOST)
        ]
        for entry in matching:
            if entry.permission_type is AclPermissionType.DENY and _operation_matches(
                entry.operation, action.operation, allow=False
            ):
                return False
        return any(
            entry.permission_type is AclPermissionType.ALLOW
            and _operation_matches(entry.operation, action.operation, allow=True)
            for entry in matching
        )

    def authorize(self, requester: Requester, actions: Sequence[Action]) -> list[bool]:
        return [self.authorize_one(requester, action) for action in actions]

    def may_write_some_topic(self, requester: Requester) -> bool:
        """KIP-679's `authorizeByResourceType(TOPIC, WRITE)`, simplified (module docstring)."""
        principal = str(requester.principal)
        if self.is_super_user(principal):
            return True
        if not self._by_type.get(ResourceType.TOPIC) and self.allow_everyone_if_no_acl_found:
            return True
        return any(
            entry.permission_type is AclPermissionType.ALLOW
            and entry.principal in (principal, WILDCARD_PRINCIPAL)
            and entry.host in (requester.client_host, WILDCARD_HOST)
            and _operation_matches(entry.operation, AclOperation.WRITE, allow=True)
            for entries in self._by_type.get(ResourceType.TOPIC, {}).values()
            for entry in entries
        )


def authorized_operations_bits(
    authorizer: Authorizer, requester: Requester, resource_type: ResourceType, name: str
) -> int:
    """KIP-430's bit set: bit `op` set for every supported operation the requester may
    perform on the resource (an `Authorizer` without ACLs allows them all)."""
    authorize = authorizer.authorize
    operations = SUPPORTED_OPERATIONS.get(resource_type, ())
    decisions = authorize(
        requester, [Action(operation, resource_type, name) for operation in operations]
    )
    bits = 0
    for operation, allowed in zip(operations, decisions, strict=True):
        if allowed:
            bits |= 1 << int(operation)
    return bits
