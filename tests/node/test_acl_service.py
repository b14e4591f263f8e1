"""The node's ACL pieces that need no process: the tree reads behind `AclService`, the
change-notification bookkeeping, `build_authorizer`, and TrafkaDescribeZNodes never
answering credentials."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from trafka.metadata_quorum.tree import Create, Entry, ZNodeTree
from trafka.net.messages.describe_znodes import DescribeZNodesRequestV0
from trafka.node.config.broker import BrokerConfig
from trafka.node.handlers.describe_znodes import describe
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.security.acls import (
    NOTIFICATION_EXPIRY_MS,
    AclService,
    AuthorizerConfigError,
    build_authorizer,
    expired_notifications,
    latest_notifications,
    read_all,
)
from trafka.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    acl_path,
    decode_entries,
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


# ---- AclService over the in-memory tree: two "brokers" sharing one tree --------------------


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


BOB_WRITE = AccessControlEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
PAY = ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED)


async def test_writes_reach_the_tree_and_another_broker_follows_them(store: MetadataStore) -> None:
    writer = AclService(AclAuthorizer(), store)
    other = AclService(AclAuthorizer(), store)
    await writer.ensure_paths()
    assert await other.run_once()  # the first pass always reads everything
    await writer.create(
        [AclBinding(ORDERS, ALICE_READ), AclBinding(ORDERS, BOB_WRITE), AclBinding(PAY, ALICE_READ)]
    )
    # The writer's copy is current at once; the tree holds Kafka's nodes and notifications.
    assert writer.authorizer.entries(ORDERS) == {ALICE_READ, BOB_WRITE}
    raw, _ = store.get_local("/kafka-acl/Topic/orders")
    assert decode_entries(bytes(raw)) == {ALICE_READ, BOB_WRITE}
    assert store.children_local("/kafka-acl-changes") == ["acl_changes_0000000000"]
    assert store.children_local("/kafka-acl-extended-changes") == ["acl_changes_0000000000"]
    # The other broker sees the notifications and re-reads.
    assert other.authorizer.bindings() == []
    assert await other.run_once()
    assert other.authorizer.entries(ORDERS) == {ALICE_READ, BOB_WRITE}
    assert other.authorizer.entries(PAY) == {ALICE_READ}
    assert not await other.run_once()  # nothing new: nothing re-read
    # Deleting bob's entries through the other broker; the last entry of a node removes it.
    removed = await other.delete([AclBindingFilter(principal="User:bob")])
    assert removed == [[AclBinding(ORDERS, BOB_WRITE)]]
    removed = await other.delete([AclBindingFilter(resource_type=ResourceType.TOPIC, name="pay")])
    assert removed == [[AclBinding(PAY, ALICE_READ)]]
    assert store.exists_local("/kafka-acl-extended/prefixed/Topic/pay") is None
    assert await writer.run_once()
    assert writer.authorizer.bindings() == [AclBinding(ORDERS, ALICE_READ)]


async def test_concurrent_creates_on_one_resource_keep_both(store: MetadataStore) -> None:
    first = AclService(AclAuthorizer(), store)
    second = AclService(AclAuthorizer(), store)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first.create, [AclBinding(ORDERS, ALICE_READ)])
        nursery.start_soon(second.create, [AclBinding(ORDERS, BOB_WRITE)])
    raw, _ = store.get_local(acl_path(ORDERS))
    assert decode_entries(bytes(raw)) == {ALICE_READ, BOB_WRITE}
