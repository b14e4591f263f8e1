"""The node's ACL pieces that need no process: the tree reads behind `AclService`, the
change-notification bookkeeping, `build_authorizer`, and TrafkaDescribeZNodes never
answering credentials."""

from __future__ import annotations

import pytest

from trafka.metadata_quorum.tree import Create, Entry, ZNodeTree
from trafka.net.messages.describe_znodes import DescribeZNodesRequestV0
from trafka.node.config.broker import BrokerConfig
from trafka.node.handlers.describe_znodes import describe
from trafka.node.security.acls import (
    NOTIFICATION_EXPIRY_MS,
    AuthorizerConfigError,
    build_authorizer,
    expired_notifications,
    latest_notifications,
    read_all,
)
from trafka.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    acl_path,
    encode_entries,
)
from trafka.security.authorizer import AclOperation, AllowAllAuthorizer, ResourceType


def create(tree: ZNodeTree, path: str, data: bytes = b"", *, now_ms: int = 1_000) -> None:
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        parent = "/" + "/".join(parts[:depth])
        if tree.exists(parent) is None:
            tree.apply(Entry("", 0, now_ms, Create(parent)))
    tree.apply(Entry("", 0, now_ms, Create(path, data)))
    assert tree.exists(path) is not None, path


ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def test_read_all_finds_literal_and_prefixed_nodes_and_skips_malformed_ones() -> None:
    tree = ZNodeTree()
    literal = ResourcePattern(ResourceType.TOPIC, "orders")
    prefixed = ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
    create(tree, acl_path(literal), encode_entries([ALICE_READ]))
    create(tree, acl_path(prefixed), encode_entries([ALICE_READ]))
    create(tree, "/kafka-acl/Topic/broken", b"{not json")
    create(tree, "/kafka-acl/Unknown/x", encode_entries([ALICE_READ]))
    assert read_all(tree) == {literal: {ALICE_READ}, prefixed: {ALICE_READ}}
    assert read_all(ZNodeTree()) == {}


def test_notification_bookkeeping() -> None:
    tree = ZNodeTree()
    assert latest_notifications(tree) == (-1, -1)
    create(tree, "/kafka-acl-changes/acl_changes_0000000003", b"Topic:a", now_ms=1_000)
    create(tree, "/kafka-acl-changes/acl_changes_0000000007", b"Topic:a", now_ms=5_000)
    create(tree, "/kafka-acl-extended-changes/acl_changes_0000000001", b"{}", now_ms=5_000)
    assert latest_notifications(tree) == (7, 1)
    now = 1_000 + NOTIFICATION_EXPIRY_MS + 1
    assert expired_notifications(tree, now) == ["/kafka-acl-changes/acl_changes_0000000003"]


def test_authorizer_class_names() -> None:
    def config(**values: str) -> BrokerConfig:
        return BrokerConfig.build(1, values)

    assert isinstance(build_authorizer(config()), AllowAllAuthorizer)
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ):
        authorizer = build_authorizer(
            config(
                **{
                    "authorizer.class.name": name,
                    "super.users": "User:admin;User:ops",
                    "allow.everyone.if.no.acl.found": "true",
                }
            )
        )
        assert isinstance(authorizer, AclAuthorizer)
        assert authorizer.super_users == {"User:admin", "User:ops"}
        assert authorizer.allow_everyone_if_no_acl_found
    with pytest.raises(AuthorizerConfigError):
        build_authorizer(config(**{"authorizer.class.name": "com.example.Custom"}))


def test_describe_znodes_never_answers_credentials() -> None:
    tree = ZNodeTree()
    create(tree, "/config/users/alice", b'{"config":{"SCRAM-SHA-512":"salt=...,stored_key=..."}}')
    create(tree, "/config/topics/orders", b'{"version":1,"config":{}}')
    answer = describe(
        tree, DescribeZNodesRequestV0(paths=("/config",), include_data=True, recursive=True)
    )
    data = {entry.path: entry.data for entry in answer.entries}
    assert "/config/users/alice" in data and data["/config/users/alice"] is None
    assert data["/config/topics/orders"] == b'{"version":1,"config":{}}'
