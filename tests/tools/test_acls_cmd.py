"""`ktool acls` without a broker: options -> bindings, and kafka-acls.sh's output format."""

from __future__ import annotations

import pytest

from trafka.client.command_config import (
    CommandConfigError,
    client_security,
    parse_properties,
    strip_option,
)
from trafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from trafka.security.authorizer import AclOperation as Op
from trafka.security.authorizer import ResourceType
from trafka.tools.acls_cmd import (
    AclCommandError,
    AclOptions,
    bindings_to_add,
    format_acls,
    format_listing,
    resource_filters,
)

ALLOW = AclPermissionType.ALLOW


def topic(name: str, pattern: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern)


def test_add_defaults_to_all_operations_and_any_host() -> None:
    plan = bindings_to_add(AclOptions(topics=("orders",), allow_principals=("User:alice",)))
    assert plan == {topic("orders"): {AccessControlEntry("User:alice", "*", Op.ALL, ALLOW)}}


def test_principals_hosts_and_operations_multiply() -> None:
    plan = bindings_to_add(
        AclOptions(
            topics=("t",),
            allow_principals=("User:a", "User:b"),
            allow_hosts=("h1", "h2"),
            deny_principals=("User:c",),
            operations=("Read", "describe"),
        )
    )
    acls = plan[topic("t")]
    assert len(acls) == 2 * 2 * 2 + 1 * 1 * 2
    assert AccessControlEntry("User:c", "*", Op.READ, AclPermissionType.DENY) in acls


def test_producer_and_consumer_conveniences() -> None:
    plan = bindings_to_add(
        AclOptions(
            topics=("t",),
            groups=("g",),
            transactional_ids=("tx",),
            allow_principals=("User:a",),
            producer=True,
            consumer=True,
            idempotent=True,
        )
    )
    ops = {
        pattern.resource_type: {entry.operation for entry in acls} for pattern, acls in plan.items()
    }
    assert ops == {
        ResourceType.TOPIC: {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ},
        ResourceType.GROUP: {Op.READ},
        ResourceType.TRANSACTIONAL_ID: {Op.WRITE, Op.DESCRIBE},
        ResourceType.CLUSTER: {Op.IDEMPOTENT_WRITE},
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (AclOptions(topics=("t",)), "You must specify one of: --allow-principal"),
        (AclOptions(allow_principals=("User:a",)), "You must provide at least one resource"),
        (AclOptions(topics=("t",), allow_principals=("alice",)), "expected a principal"),
        (
            AclOptions(groups=("g",), allow_principals=("User:a",), operations=("Write",)),
            "only supports",
        ),
        (AclOptions(topics=("t",), allow_principals=("User:a",), operations=("Fly",)), "unknown"),
        (
            AclOptions(topics=("t",), allow_principals=("User:a",), pattern_type="match"),
            "not valid",
        ),
        (AclOptions(allow_principals=("User:a",), consumer=True, topics=("t",)), "--group"),
    ],
)
def test_bad_options_are_refused_with_kafkas_messages(options: AclOptions, message: str) -> None:
    with pytest.raises(AclCommandError, match=message):
        bindings_to_add(options)


def test_list_and_remove_accept_any_and_match() -> None:
    filters = resource_filters(AclOptions(topics=("t",), cluster=True, pattern_type="match"))
    assert [str(f) for f in filters] == [
        "ResourcePatternFilter(resourceType=TOPIC, name=t, patternType=MATCH)",
        "ResourcePatternFilter(resourceType=CLUSTER, name=kafka-cluster, patternType=MATCH)",
    ]


def test_output_is_kafka_acls_sh_byte_for_byte() -> None:
    acls = [
        AccessControlEntry("User:alice", "*", Op.READ, ALLOW),
        AccessControlEntry("User:bob", "10.0.0.1", Op.WRITE, AclPermissionType.DENY),
    ]
    assert format_acls("Current ACLs for resource", topic("orders"), acls) == (
        "Current ACLs for resource "
        "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY) \n"
    )


def test_listing_by_principal() -> None:
    bindings = [
        AclBinding(topic("a"), AccessControlEntry("User:x", "*", Op.READ, ALLOW)),
        AclBinding(topic("b"), AccessControlEntry("User:y", "*", Op.READ, ALLOW)),
    ]
    assert len(format_listing(bindings)) == 2
    blocks = format_listing(bindings, ["User:y"])
    assert blocks[0] == "ACLs for principal `User:y`"
    assert len(blocks) == 2 and "name=b" in blocks[1]


# ---- --command-config ----------------------------------------------------------------------


def test_properties_syntax() -> None:
    text = (
        "# comment\n! also\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '   username="admin" password="s3cr=t";\n'
    )
    properties = parse_properties(text)
    assert properties["security.protocol"] == "SASL_PLAINTEXT"
    assert properties["sasl.mechanism"] == "PLAIN"
    security = client_security(properties)
    assert security is not None
    assert (security.sasl_mechanism, security.username, security.password) == (
        "PLAIN",
        "admin",
        "s3cr=t",
    )
    assert client_security({}) is None


@pytest.mark.parametrize(
    "properties",
    [
        {"security.protocol": "KERBEROS"},
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
        {"security.protocol": "SSL", "ssl.truststore.type": "JKS"},
    ],
)
def test_unusable_command_configs_are_refused(properties: dict[str, str]) -> None:
    with pytest.raises(CommandConfigError):
        client_security(properties)


def test_strip_option_anywhere() -> None:
    assert strip_option(["acls", "--command-config", "f", "--list"]) == (["acls", "--list"], "f")
    assert strip_option(["--command-config=g", "topics"]) == (["topics"], "g")
    assert strip_option(["topics"]) == (["topics"], None)
    with pytest.raises(CommandConfigError):
        strip_option(["topics", "--command-config"])
