"""Issue 14 item 3: ACLs enforced on a real knode, driven by confluent-kafka over SASL PLAIN.

One knode with an ``AclAuthorizer`` (``authorizer.class.name`` as Kafka's), a SASL_PLAINTEXT
listener for clients (PLAIN users admin, alice, bob) and a PLAINTEXT inter-broker listener
whose ``User:ANONYMOUS`` is a super user with ``User:admin``. The ACLs are created through
the Kafka admin API (CreateAcls), so each test also shows the ACL APIs working:

* alice may WRITE ``orders``; bob may only READ it: bob's produce fails with
  TOPIC_AUTHORIZATION_FAILED and none of his records is in the log;
* bob without READ on his group gets GROUP_AUTHORIZATION_FAILED; with it he consumes;
* Metadata shows bob only the topics he may DESCRIBE;
* DescribeAcls / DeleteAcls with Kafka's filters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
ORDERS = "orders"
HIDDEN = "hidden"


@dataclass
class SecuredNode:
    cluster: KnodeCluster
    sasl_port: int
    scram_port: int = 0

    def client(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
            **extra,
        }


def acl_node_settings(sasl_port: int, internal_port: int, scram_port: int = 0) -> list[str]:
    """A PLAIN listener (SASL), a PLAINTEXT inter-broker one and, with `scram_port`, a
    SCRAM-SHA-512 listener (SCRAM)."""
    scram = f",SCRAM://127.0.0.1:{scram_port}" if scram_port else ""
    return [
        f"listeners=SASL://127.0.0.1:{sasl_port},INTERNAL://127.0.0.1:{internal_port}{scram}",
        "listener.security.protocol.map=SASL:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,"
        "SCRAM:SASL_PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl.plain.sasl.jaas.config={JAAS}",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
        "group.initial.rebalance.delay.ms=0",
    ]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    base: Path = tmp_path_factory.mktemp("acls")
    cluster = KnodeCluster(base, node_count=1, start=False)
    node = cluster.nodes[1]
    sasl_port, scram_port = free_port(), free_port()
    node.extra = acl_node_settings(sasl_port, node.port, scram_port)
    with cluster:
        cluster.start_all()
        secured = SecuredNode(cluster, sasl_port, scram_port)
        _setup(secured)
        yield secured


def _binding(
    resource_type: Any, name: str, principal: str, operation: Any, pattern: Any = None
) -> Any:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclPermissionType,
        ResourcePatternType,
    )

    return AclBinding(
        resource_type,
        name,
        pattern or ResourcePatternType.LITERAL,
        principal,
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def _setup(node: SecuredNode) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclOperation,
        AdminClient,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient(node.client("admin"))
    for future in admin.create_topics([NewTopic(ORDERS, 1, 1), NewTopic(HIDDEN, 1, 1)]).values():
        future.result(60)
    bindings = [
        _binding(ResourceType.TOPIC, ORDERS, "User:alice", AclOperation.WRITE),
        _binding(ResourceType.TOPIC, ORDERS, "User:bob", AclOperation.READ),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(30) is None


def _produce(config: dict[str, Any], values: list[bytes]) -> list[Any]:
    from confluent_kafka import Producer

    errors: list[Any] = []

    def report(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer({"message.timeout.ms": 15000, "retries": 0, **config})
    for value in values:
        producer.produce(ORDERS, value=value, on_delivery=report)
    assert producer.flush(60) == 0
    return errors


def _log_values(node: SecuredNode) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        node.client("admin", **{"group.id": "admin-check", "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(ORDERS, 0, 0)])
    values: list[bytes] = []
    try:
        # The first records can take seconds on a loaded machine (SASL handshake, metadata,
        # first fetch): wait up to 30 s for them, then read until 3 s bring nothing new.
        deadline = time.monotonic() + 30
        idle = 0
        while idle < 3 and (values or time.monotonic() < deadline):
            batch = consumer.consume(100, timeout=1)
            idle = idle + 1 if not batch and values else 0
            values.extend(m.value() for m in batch if m.error() is None)
    finally:
        consumer.close()
    return values


def test_producer_without_write_is_refused_and_nothing_is_appended(secured: SecuredNode) -> None:
    from confluent_kafka import KafkaError

    assert _produce(secured.client("alice"), [b"alice-1", b"alice-2"]) == []
    errors = _produce(secured.client("bob"), [b"bob-1", b"bob-2"])
    assert errors, "bob's records were accepted"
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    values = _log_values(secured)
    assert b"alice-1" in values and b"alice-2" in values
    assert not [v for v in values if v.startswith(b"bob")]


def test_consumer_without_read_on_its_group_is_refused(secured: SecuredNode) -> None:
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType  # type: ignore[attr-defined]

    def first_outcome(group: str) -> Any:
        consumer = Consumer(
            secured.client("bob", **{"group.id": group, "auto.offset.reset": "earliest"})
        )
        consumer.subscribe([ORDERS])
        try:
            # Bounded but generous: joining the group and the first fetch took over 30 s on
            # the loaded 2-core machine once.
            for _ in range(90):
                message = consumer.poll(1)
                if message is not None:
                    return message.error() or message.value()
        finally:
            consumer.close()
        return None

    # Something to read, whichever test ran on this module's cluster before (pytest-xdist
    # spreads a module's tests over workers, each with its own cluster).
    assert _produce(secured.client("alice"), [b"for-bob"]) == []
    outcome = first_outcome("bob-group")
    assert isinstance(outcome, KafkaError), outcome
    assert outcome.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    admin = AdminClient(secured.client("admin"))
    binding = _binding(ResourceType.GROUP, "bob-group", "User:bob", AclOperation.READ)
    for future in admin.create_acls([binding]).values():
        future.result(30)
    # The same consumer is let in once it may READ the group.
    outcome = first_outcome("bob-group")
    assert isinstance(outcome, bytes), outcome


def test_metadata_hides_topics_the_principal_may_not_describe(secured: SecuredNode) -> None:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    bob_view = set(AdminClient(secured.client("bob")).list_topics(timeout=30).topics)
    admin_view = set(AdminClient(secured.client("admin")).list_topics(timeout=30).topics)
    assert ORDERS in bob_view  # READ implies DESCRIBE
    assert HIDDEN not in bob_view
    assert {ORDERS, HIDDEN} <= admin_view
    # Asking for it by name: TOPIC_AUTHORIZATION_FAILED, as Kafka.
    named = AdminClient(secured.client("bob")).list_topics(topic=HIDDEN, timeout=30)
    assert named.topics[HIDDEN].error is not None
    assert named.topics[HIDDEN].error.name() == "TOPIC_AUTHORIZATION_FAILED"


def test_describe_and_delete_acls_with_filters(secured: SecuredNode) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(secured.client("admin"))
    prefixed = _binding(
        ResourceType.TOPIC,
        "tmp-",
        "User:carol",
        AclOperation.DESCRIBE,
        ResourcePatternType.PREFIXED,
    )
    for future in admin.create_acls([prefixed]).values():
        future.result(30)
    orders_filter = AclBindingFilter(
        ResourceType.TOPIC,
        ORDERS,
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(orders_filter).result(30)
    assert {(b.name, b.principal, b.operation) for b in found} == {
        (ORDERS, "User:alice", AclOperation.WRITE),
        (ORDERS, "User:bob", AclOperation.READ),
    }
    carol_filter = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:carol",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    removed = next(iter(admin.delete_acls([carol_filter]).values())).result(30)
    assert [(b.name, b.resource_pattern_type) for b in removed] == [
        ("tmp-", ResourcePatternType.PREFIXED)
    ]
    wait_until(
        lambda: admin.describe_acls(carol_filter).result(30) == [],
        timeout_s=10,
        what="carol's ACL to be gone",
    )
    # bob may not change ACLs: CLUSTER_AUTHORIZATION_FAILED, as Kafka.
    bob_admin = AdminClient(secured.client("bob"))
    with pytest.raises(KafkaException) as refused:
        for future in bob_admin.create_acls([prefixed]).values():
            future.result(30)
    assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"


# ---- ktool acls (kafka-acls.sh's output), through --command-config -------------------------


def _ktool(
    node: SecuredNode | None, bootstrap: str, config: Path | None, *args: str, tool: str = "acls"
) -> Any:
    import subprocess
    import sys

    command = [sys.executable, "-m", "trafka.tools.ktool", tool, "--bootstrap-server", bootstrap]
    if config is not None:
        command += ["--command-config", str(config)]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120, check=False
    )


def _command_config(tmp_path: Path, user: str) -> Path:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="{user}" password="{user}-secret";\n'
    )
    return path


REPORTS = "`ResourcePattern(resourceType=TOPIC, name=reports, patternType=LITERAL)`"
DAVE_READ = "(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)"
DAVE_DESCRIBE = "(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)"


def test_ktool_acls_matches_kafka_acls_sh(secured: SecuredNode, tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{secured.sasl_port}"
    admin = _command_config(tmp_path, "admin")
    added = _ktool(
        secured,
        bootstrap,
        admin,
        "--add",
        "--allow-principal",
        "User:dave",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "reports",
    )
    assert added.returncode == 0, added.stderr
    both = f" \t{DAVE_READ}\n\t{DAVE_DESCRIBE} \n\n"
    assert added.stdout == (
        f"Adding ACLs for resource {REPORTS}: \n{both}Current ACLs for resource {REPORTS}: \n{both}"
    )
    listed = _ktool(secured, bootstrap, admin, "--list", "--topic", "reports")
    assert listed.stdout == f"Current ACLs for resource {REPORTS}: \n{both}"
    removed = _ktool(
        secured,
        bootstrap,
        admin,
        "--remove",
        "--force",
        "--allow-principal",
        "User:dave",
        "--operation",
        "Read",
        "--topic",
        "reports",
    )
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == f"Current ACLs for resource {REPORTS}: \n \t{DAVE_DESCRIBE} \n\n"
    everything = _ktool(secured, bootstrap, admin, "--list")
    assert f"Current ACLs for resource {REPORTS}: \n \t{DAVE_DESCRIBE} \n" in everything.stdout
    assert "name=orders" in everything.stdout
    # bob may not DESCRIBE the cluster: the tool's one-line error, exit 1.
    refused = _ktool(secured, bootstrap, _command_config(tmp_path, "bob"), "--list")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "Error while executing ACL command: CLUSTER_AUTHORIZATION_FAILED"
    )


def test_acl_apis_without_an_authorizer_answer_security_disabled(knode: KnodeCluster) -> None:
    done = _ktool(None, knode.bootstrap_servers, None, "--list")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error while executing ACL command: SECURITY_DISABLED: "
        "No Authorizer is configured on the broker"
    )


def test_ktool_configs_creates_a_scram_user_that_can_log_in(
    secured: SecuredNode, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    bootstrap = f"127.0.0.1:{secured.sasl_port}"
    admin = _command_config(tmp_path, "admin")
    users = ("--entity-type", "users", "--entity-name", "erin")
    added = _ktool(
        secured,
        bootstrap,
        admin,
        "--alter",
        *users,
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=erin-secret]",
        tool="configs",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for user erin.\n"
    described = _ktool(secured, bootstrap, admin, "--describe", *users, tool="configs")
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=8192\n"
    )
    # erin logs in over SCRAM-SHA-512 with the password only the tool saw.
    erin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{secured.scram_port}",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "erin",
            "sasl.password": "erin-secret",
        }
    )
    assert ORDERS not in erin.list_topics(timeout=30).topics  # no ACL: nothing to DESCRIBE
    # bob may not ALTER the cluster.
    refused = _ktool(
        secured,
        bootstrap,
        _command_config(tmp_path, "bob"),
        "--alter",
        *users,
        "--delete-config",
        "SCRAM-SHA-512",
        tool="configs",
    )
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr


def test_kip_430_authorized_operations_and_kip_679_idempotent_producers(
    secured: SecuredNode,
) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AclOperation, AdminClient  # type: ignore[attr-defined]

    admin, bob = AdminClient(secured.client("admin")), AdminClient(secured.client("bob"))
    admin_view = admin.describe_cluster(include_authorized_operations=True)
    bob_view = bob.describe_cluster(include_authorized_operations=True)
    assert AclOperation.ALTER in admin_view.result(30).authorized_operations
    assert AclOperation.CLUSTER_ACTION in admin_view.result(30).authorized_operations
    assert not bob_view.result(30).authorized_operations
    # alice may WRITE a topic, so an idempotent producer may start (KIP-679) ...
    assert (
        _produce(
            secured.client("alice", **{"enable.idempotence": True, "retries": 5}), [b"alice-3"]
        )
        == []
    )
    # ... bob may write none: InitProducerId gets CLUSTER_AUTHORIZATION_FAILED.
    errors: list[Any] = []
    producer = Producer(
        secured.client(
            "bob",
            **{"enable.idempotence": True, "error_cb": errors.append, "message.timeout.ms": 10000},
        )
    )
    producer.produce(ORDERS, value=b"bob-idempotent")
    try:
        producer.flush(30)
    except KafkaException as fatal:  # librdkafka raises the fatal idempotence error here
        errors.append(fatal.args[0])
    assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in errors), errors
    assert b"bob-idempotent" not in _log_values(secured)


def test_client_quota_apis_need_cluster_alter_and_describe_configs_and_users_are_throttled(
    secured: SecuredNode, tmp_path: Path
) -> None:
    """AlterClientQuotas needs ALTER_CONFIGS, DescribeClientQuotas DESCRIBE_CONFIGS on the
    cluster (issue 18 item 3); a quota on the SASL user (the request's principal) throttles
    that user's producer."""
    from confluent_kafka import Producer

    bootstrap = f"127.0.0.1:{secured.sasl_port}"
    bob = _command_config(tmp_path, "bob")
    alice_quota = ("--entity-type", "users", "--entity-name", "alice")
    for action in (("--alter", "--add-config", "producer_byte_rate=100000"), ("--describe",)):
        refused = _ktool(secured, bootstrap, bob, *action, *alice_quota, tool="configs")
        assert refused.returncode == 1
        assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
    admin = _command_config(tmp_path, "admin")
    added = _ktool(
        secured,
        bootstrap,
        admin,
        "--alter",
        *alice_quota,
        "--add-config",
        "producer_byte_rate=100000",
        tool="configs",
    )
    assert added.returncode == 0, added.stderr
    described = _ktool(secured, bootstrap, admin, "--describe", *alice_quota, tool="configs")
    assert described.stdout == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=100000.0\n"
    )
    try:
        throttles: list[int] = []

        def stats(text: str) -> None:
            import json

            for broker in json.loads(text).get("brokers", {}).values():
                throttles.append(int(broker.get("throttle", {}).get("max", 0)))

        producer = Producer(
            secured.client("alice", **{"statistics.interval.ms": 500, "stats_cb": stats})
        )
        for _ in range(40):  # 400 kB at 100 kB/s: answered at once with ~3 s of throttle
            producer.produce(ORDERS, value=b"q" * 10_000)
            producer.poll(0)
        assert producer.flush(60) == 0
        started = time.monotonic()  # the next produce waits out the throttle (KIP-219)
        producer.produce(ORDERS, value=b"after")
        assert producer.flush(60) == 0
        elapsed = time.monotonic() - started
        producer.poll(1.0)
        assert elapsed >= 1.5, elapsed
        assert max(throttles, default=0) > 0, throttles
    finally:
        _ktool(
            secured,
            bootstrap,
            admin,
            "--alter",
            *alice_quota,
            "--delete-config",
            "producer_byte_rate",
            tool="configs",
        )
