"""The ACL authorizer's decisions, filters and tree encoding (Kafka's semantics, pure)."""

from __future__ import annotations

import json

import pytest

from trafka.security.acl import (
    ACL_CHANGES,
    ACL_EXTENDED_CHANGES,
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    acl_path,
    authorized_operations_bits,
    change_notification,
    decode_entries,
    encode_entries,
    operation_from_name,
    parse_change_notification,
    parse_super_users,
    validate_binding,
)
from trafka.security.authorizer import AclOperation as Op
from trafka.security.authorizer import Action, Requester, ResourceType
from trafka.security.principal import KafkaPrincipal

ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP


def who(name: str, host: str = "10.0.0.1") -> Requester:
    return Requester(KafkaPrincipal.user(name), host, "PLAINTEXT", "PLAINTEXT")


def entry(
    principal: str, op: Op, permission: AclPermissionType = ALLOW, host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, permission)


def literal(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PatternType.LITERAL)


def prefixed(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PatternType.PREFIXED)


def allowed(authorizer: AclAuthorizer, requester: Requester, op: Op, name: str, rt=TOPIC) -> bool:
    return authorizer.authorize(requester, [Action(op, rt, name)])[0]


def test_no_acl_denies_by_default_and_allow_everyone_flag_allows() -> None:
    assert not allowed(AclAuthorizer(), who("alice"), Op.READ, "orders")
    open_authorizer = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert allowed(open_authorizer, who("alice"), Op.READ, "orders")
    # An ACL on the resource (for anyone) ends the "no ACL found" case.
    open_authorizer.set_entries(literal("orders"), [entry("User:bob", Op.READ)])
    assert not allowed(open_authorizer, who("alice"), Op.READ, "orders")
    assert allowed(open_authorizer, who("bob"), Op.READ, "orders")
    assert allowed(open_authorizer, who("alice"), Op.READ, "other")


def test_super_users_are_allowed_everything_even_when_denied() -> None:
    authorizer = AclAuthorizer(super_users=parse_super_users("User:admin; User:ops"))
    authorizer.set_entries(literal("*"), [entry("User:*", Op.ALL, DENY)])
    assert allowed(authorizer, who("admin"), Op.WRITE, "orders")
    assert allowed(authorizer, who("ops"), Op.CLUSTER_ACTION, "kafka-cluster", ResourceType.CLUSTER)
    assert not allowed(authorizer, who("alice"), Op.WRITE, "orders")


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.WRITE)])
    authorizer.set_entries(literal("*"), [entry("User:bob", Op.READ)])
    authorizer.set_entries(prefixed("pay"), [entry("User:carol", Op.READ)])
    assert allowed(authorizer, who("alice"), Op.WRITE, "orders")
    assert not allowed(authorizer, who("alice"), Op.WRITE, "orders2")
    assert allowed(authorizer, who("bob"), Op.READ, "anything")
    assert allowed(authorizer, who("carol"), Op.READ, "payments")
    assert allowed(authorizer, who("carol"), Op.READ, "pay")
    assert not allowed(authorizer, who("carol"), Op.READ, "xpayments")
    # Patterns of another resource type never apply.
    assert not allowed(authorizer, who("bob"), Op.READ, "anything", GROUP)


def test_deny_wins_over_allow() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.ALL)])
    authorizer.set_entries(prefixed("ord"), [entry("User:alice", Op.WRITE, DENY)])
    assert not allowed(authorizer, who("alice"), Op.WRITE, "orders")
    assert allowed(authorizer, who("alice"), Op.READ, "orders")
    authorizer.set_entries(literal("*"), [entry("User:*", Op.ALL, DENY, host="10.0.0.9")])
    assert not allowed(authorizer, who("alice", "10.0.0.9"), Op.READ, "orders")
    assert allowed(authorizer, who("alice", "10.0.0.1"), Op.READ, "orders")


def test_principal_and_host_matching() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(
        literal("orders"),
        [entry("User:*", Op.READ, host="10.0.0.1"), entry("User:bob", Op.WRITE)],
    )
    assert allowed(authorizer, who("anyone", "10.0.0.1"), Op.READ, "orders")
    assert not allowed(authorizer, who("anyone", "10.0.0.2"), Op.READ, "orders")
    assert allowed(authorizer, who("bob", "1.2.3.4"), Op.WRITE, "orders")
    assert not allowed(authorizer, who("bobby"), Op.WRITE, "orders")


@pytest.mark.parametrize("granting", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_operations_that_imply_describe(granting: Op) -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(literal("orders"), [entry("User:alice", granting)])
    assert allowed(authorizer, who("alice"), Op.DESCRIBE, "orders")


def test_implications_are_only_kafkas() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.ALTER_CONFIGS)])
    assert allowed(authorizer, who("alice"), Op.DESCRIBE_CONFIGS, "orders")
    assert not allowed(authorizer, who("alice"), Op.DESCRIBE, "orders")
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.CREATE)])
    assert not allowed(authorizer, who("alice"), Op.DESCRIBE, "orders")
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.READ)])
    assert not allowed(authorizer, who("alice"), Op.WRITE, "orders")
    # A DENY of READ does not deny DESCRIBE (implication works for ALLOW only).
    authorizer.set_entries(
        literal("orders"), [entry("User:alice", Op.DESCRIBE), entry("User:alice", Op.READ, DENY)]
    )
    assert allowed(authorizer, who("alice"), Op.DESCRIBE, "orders")
    assert not allowed(authorizer, who("alice"), Op.READ, "orders")


def test_removing_entries_forgets_the_pattern() -> None:
    authorizer = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    authorizer.set_entries(literal("orders"), [entry("User:bob", Op.READ)])
    assert not allowed(authorizer, who("alice"), Op.READ, "orders")
    authorizer.set_entries(literal("orders"), [])
    assert allowed(authorizer, who("alice"), Op.READ, "orders")
    assert authorizer.bindings() == []


def test_kip_679_write_on_some_topic() -> None:
    authorizer = AclAuthorizer()
    assert not authorizer.may_write_some_topic(who("alice"))
    authorizer.set_entries(prefixed("a"), [entry("User:alice", Op.WRITE)])
    assert authorizer.may_write_some_topic(who("alice"))
    assert not authorizer.may_write_some_topic(who("bob"))


def test_authorized_operations_bits() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_entries(literal("orders"), [entry("User:alice", Op.READ)])
    bits = authorized_operations_bits(authorizer, who("alice"), TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert authorized_operations_bits(authorizer, who("bob"), TOPIC, "orders") == 0


# ---- filters (DescribeAcls / DeleteAcls) ---------------------------------------------------

BINDINGS = [
    AclBinding(literal("orders"), entry("User:alice", Op.READ)),
    AclBinding(literal("*"), entry("User:bob", Op.WRITE, DENY)),
    AclBinding(prefixed("ord"), entry("User:carol", Op.DESCRIBE, host="10.0.0.1")),
    AclBinding(literal("g1", GROUP), entry("User:alice", Op.READ)),
]


def matching(binding_filter: AclBindingFilter) -> list[AclBinding]:
    return [b for b in BINDINGS if binding_filter.matches(b)]


def test_filter_any_matches_everything() -> None:
    assert matching(AclBindingFilter()) == BINDINGS


def test_filter_by_fields() -> None:
    assert matching(AclBindingFilter(resource_type=GROUP)) == [BINDINGS[3]]
    assert matching(AclBindingFilter(principal="User:alice")) == [BINDINGS[0], BINDINGS[3]]
    assert matching(AclBindingFilter(host="10.0.0.1")) == [BINDINGS[2]]
    assert matching(AclBindingFilter(operation=Op.WRITE)) == [BINDINGS[1]]
    assert matching(AclBindingFilter(permission_type=DENY)) == [BINDINGS[1]]


def test_filter_literal_and_prefixed_match_exactly() -> None:
    assert matching(AclBindingFilter(TOPIC, "orders", PatternType.LITERAL)) == [BINDINGS[0]]
    assert matching(AclBindingFilter(TOPIC, "ord", PatternType.PREFIXED)) == [BINDINGS[2]]
    assert matching(AclBindingFilter(TOPIC, "orders", PatternType.ANY)) == [BINDINGS[0]]


def test_filter_match_finds_every_pattern_that_applies() -> None:
    found = matching(AclBindingFilter(TOPIC, "orders", PatternType.MATCH))
    assert found == BINDINGS[:3]
    assert matching(AclBindingFilter(TOPIC, "xyz", PatternType.MATCH)) == [BINDINGS[1]]


def test_filter_with_unknown_field_is_invalid() -> None:
    with pytest.raises(AclError):
        AclBindingFilter(operation=Op.UNKNOWN).validate()
    with pytest.raises(AclError):
        AclBindingFilter(pattern_type=PatternType.UNKNOWN).validate()
    AclBindingFilter().validate()


def test_authorizer_lists_bindings_by_filter() -> None:
    authorizer = AclAuthorizer()
    for binding in BINDINGS:
        authorizer.set_entries(
            binding.pattern, authorizer.entries(binding.pattern) | {binding.entry}
        )
    assert authorizer.bindings() == sorted(BINDINGS)
    assert authorizer.bindings(AclBindingFilter(resource_type=GROUP)) == [BINDINGS[3]]


@pytest.mark.parametrize(
    "binding",
    [
        AclBinding(literal("orders", ResourceType.ANY), entry("User:a", Op.READ)),
        AclBinding(ResourcePattern(TOPIC, "o", PatternType.MATCH), entry("User:a", Op.READ)),
        AclBinding(literal(""), entry("User:a", Op.READ)),
        AclBinding(literal("a/b"), entry("User:a", Op.READ)),
        AclBinding(literal("other", ResourceType.CLUSTER), entry("User:a", Op.ALTER)),
        AclBinding(literal("orders"), entry("User:a", Op.ANY)),
        AclBinding(literal("orders"), entry("User:a", Op.READ, AclPermissionType.ANY)),
        AclBinding(literal("orders"), entry("alice", Op.READ)),
    ],
)
def test_invalid_bindings_are_refused(binding: AclBinding) -> None:
    with pytest.raises(AclError):
        validate_binding(binding)


def test_valid_binding_passes() -> None:
    validate_binding(
        AclBinding(literal("kafka-cluster", ResourceType.CLUSTER), entry("User:a", Op.ALTER))
    )


# ---- the tree's encoding -------------------------------------------------------------------


def test_paths_are_kafkas_zookeeper_paths() -> None:
    assert acl_path(literal("orders")) == "/kafka-acl/Topic/orders"
    assert acl_path(literal("tx", ResourceType.TRANSACTIONAL_ID)) == "/kafka-acl/TransactionalId/tx"
    assert acl_path(prefixed("pay", GROUP)) == "/kafka-acl-extended/prefixed/Group/pay"


def test_entries_json_is_kafkas() -> None:
    entries = {entry("User:alice", Op.IDEMPOTENT_WRITE), entry("User:*", Op.READ, DENY, "1.2.3.4")}
    data = encode_entries(entries)
    document = json.loads(data)
    assert document["version"] == 1
    assert {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "IdempotentWrite",
        "host": "*",
    } in document["acls"]
    assert {
        "principal": "User:*",
        "permissionType": "Deny",
        "operation": "Read",
        "host": "1.2.3.4",
    } in document["acls"]
    assert decode_entries(data) == entries
    # Compact, as Kafka's Json.encodeAsBytes.
    assert encode_entries([entry("User:a", Op.READ)]) == (
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b'{"acls":[{"principal":"User:a"}]}',
        b"\xff",
        b'{"acls":[{"principal":"User:a","host":"*","operation":"Fly","permissionType":"Allow"}]}',
    ],
)
def test_malformed_nodes_raise_acl_error(data: bytes) -> None:
    with pytest.raises(AclError):
        decode_entries(data)


def test_change_notifications_round_trip() -> None:
    prefix, data = change_notification(literal("orders"))
    assert prefix == "/kafka-acl-changes/acl_changes_"
    assert data == b"Topic:orders"
    assert parse_change_notification(ACL_CHANGES, data) == literal("orders")
    prefix, data = change_notification(prefixed("pay", GROUP))
    assert prefix == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "Group",
        "name": "pay",
        "patternType": "PREFIXED",
    }
    assert parse_change_notification(ACL_EXTENDED_CHANGES, data) == prefixed("pay", GROUP)
    with pytest.raises(AclError):
        parse_change_notification(ACL_CHANGES, b"nocolon")
    with pytest.raises(AclError):
        parse_change_notification(ACL_EXTENDED_CHANGES, b"[]")


def test_names_parse_in_kafkas_spellings() -> None:
    assert operation_from_name("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert operation_from_name("describe_configs") is Op.DESCRIBE_CONFIGS
    assert operation_from_name("ALL") is Op.ALL
    with pytest.raises(AclError):
        operation_from_name("fly")


def test_printing_is_kafka_acls_sh_format() -> None:
    assert (
        str(literal("orders"))
        == "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    )
    assert (
        str(entry("User:alice", Op.READ))
        == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    )
