"""Issue 14 item 3: an ACL created through one broker is enforced by the others within 1 s.

Three knode processes, each with a SASL_PLAINTEXT client listener (PLAIN users admin, bob)
and a PLAINTEXT inter-broker listener, and an ``AclAuthorizer``. The admin creates an ACL
through broker 1 (CreateAcls); bob's Metadata request to broker 2 and broker 3 must see it
within a second (the brokers follow ``/kafka-acl-changes`` as Kafka's ZooKeeper mode did).
Then the admin deletes it through broker 3 and brokers 1 and 2 refuse bob again within 1 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.cluster.test_acls import acl_node_settings
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from trafka.net.client import KafkaConnection
from trafka.net.client_security import ClientSecurity
from trafka.net.kio_shape import build
from trafka.security.acl import AccessControlEntry, AclBinding, AclPermissionType, ResourcePattern
from trafka.security.authorizer import AclOperation, ResourceType
from trafka.tools import acls_cmd

TOPIC = "spread"
PROPAGATION_LIMIT_S = 1.0


@pytest.fixture(scope="module")
def three(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KnodeCluster, dict[int, int]]]:
    base: Path = tmp_path_factory.mktemp("acls-cluster")
    cluster = KnodeCluster(base, node_count=3, start=False)
    sasl_ports = {}
    for node_id, node in cluster.nodes.items():
        sasl_ports[node_id] = free_port()
        node.extra = acl_node_settings(sasl_ports[node_id], node.port)
    with cluster:
        cluster.start_all()
        yield cluster, sasl_ports


async def _connect(port: int, user: str) -> KafkaConnection:
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, f"{user}-secret")
    connection = await KafkaConnection.connect("127.0.0.1", port, security=security)
    await connection.negotiate_api_versions()
    return connection


async def _topic_error(connection: KafkaConnection) -> int:
    from kio.schema.metadata.v8.request import MetadataRequest

    request = build(
        MetadataRequest,
        {
            "topics": [{"name": TOPIC}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    response = await connection.request(request, 8)
    return int(response.topics[0].error_code)


async def _until(connection: KafkaConnection, wanted: int, started: float) -> float:
    """Poll bob's Metadata until the topic's error code is `wanted`; seconds it took."""
    while trio.current_time() - started < 30:
        if await _topic_error(connection) == wanted:
            return trio.current_time() - started
        await trio.sleep(0.01)
    raise AssertionError(f"error code {wanted} not seen within 30 s")


BOB_DESCRIBE = AclBinding(
    ResourcePattern(ResourceType.TOPIC, TOPIC),
    AccessControlEntry("User:bob", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
)
ALLOWED, REFUSED = 0, 29  # NONE, TOPIC_AUTHORIZATION_FAILED


def test_an_acl_added_through_one_broker_is_enforced_by_the_others_within_a_second(
    three: tuple[KnodeCluster, dict[int, int]],
) -> None:
    _, ports = three

    async def main() -> None:
        admin = {n: await _connect(ports[n], "admin") for n in (1, 3)}
        bob = {n: await _connect(ports[n], "bob") for n in (1, 2, 3)}
        from kio.schema.create_topics.v5.request import CreateTopicsRequest

        created = await admin[1].request(
            build(
                CreateTopicsRequest,
                {
                    "topics": [
                        {
                            "name": TOPIC,
                            "num_partitions": 1,
                            "replication_factor": 3,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": False,
                },
            ),
            5,
        )
        assert int(created.topics[0].error_code) == 0
        for connection in bob.values():
            assert await _topic_error(connection) == REFUSED
        started = trio.current_time()
        await acls_cmd.create(admin[1], [BOB_DESCRIBE])
        took = [await _until(bob[n], ALLOWED, started) for n in (2, 3)]
        assert max(took) < PROPAGATION_LIMIT_S, took
        started = trio.current_time()
        await acls_cmd.delete(
            admin[3],
            acls_cmd.ResourceFilter(ResourceType.TOPIC, TOPIC, BOB_DESCRIBE.pattern.pattern_type),
            [BOB_DESCRIBE.entry],
        )
        took = [await _until(bob[n], REFUSED, started) for n in (1, 2)]
        assert max(took) < PROPAGATION_LIMIT_S, took
        for connection in (*admin.values(), *bob.values()):
            await connection.close()

    trio.run(main)
