"""KIP-848 administration with real clients on a 2-node cluster (issue 18): per-group dynamic
configs through Kafka 4.4's `kafka-configs --entity-type groups` and raw requests, and
online migration between the classic and consumer protocols
(`group.consumer.migration.policy`).

One cluster and one tool JVM for the module; every test uses its own group ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.cluster.java_support import ToolShell, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.net import codec
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

FIND_COORDINATOR, INCREMENTAL_ALTER_CONFIGS, CONSUMER_GROUP_HEARTBEAT = 10, 44, 68
DESCRIBE_CONFIGS = 32
GROUP_RESOURCE = 32
OFFSETS_PARTITIONS = 4
SETTINGS = [
    "group.initial.rebalance.delay.ms=0",
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    "offsets.topic.replication.factor=2",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
]


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("kip848-admin")
    with KnodeCluster(base, node_count=2, settings=SETTINGS, start=False) as c:
        start_slowly(c)
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("mig", 6, 2)])["mig"].result(60)
        yield c


def request(cluster: KnodeCluster, node_id: int, api_key: int, data: Any, high: int) -> Any:
    async def run() -> Any:
        connection = await KafkaConnection.connect(
            "127.0.0.1", cluster.nodes[node_id].port, client_id="kip848-admin"
        )
        try:
            await connection.negotiate_api_versions()
            version = connection.version_for(api_key, 0, high)
            request_class = codec.request_class(api_key, version)
            assert request_class is not None
            return await connection.request(build(request_class, data), version)
        finally:
            await connection.close()

    return trio.run(run)


def coordinator_of(cluster: KnodeCluster, group_id: str) -> int:
    def found() -> int | None:
        response = request(
            cluster,
            1,
            FIND_COORDINATOR,
            {"key_type": 0, "coordinator_keys": [group_id]},
            4,
        )
        (coordinator,) = response.coordinators
        return int(coordinator.node_id) if coordinator.error_code == ErrorCode.none else None

    return wait_until(found, timeout_s=60, what=f"the coordinator of {group_id}")


def join(cluster: KnodeCluster, node_id: int, group_id: str) -> Any:
    return request(
        cluster,
        node_id,
        CONSUMER_GROUP_HEARTBEAT,
        {
            "group_id": group_id,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": ["mig"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
        1,
    )


def alter_group(
    cluster: KnodeCluster, node_id: int, group_id: str, configs: dict[str, str | None]
) -> Any:
    (result,) = request(
        cluster,
        node_id,
        INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group_id,
                    "configs": [
                        {"name": k, "config_operation": 0 if v is not None else 1, "value": v}
                        for k, v in configs.items()
                    ],
                }
            ],
            "validate_only": False,
        },
        1,
    ).responses
    return result


def group_on(cluster: KnodeCluster, coordinator: int) -> str:
    """A group id whose coordinator is `coordinator` (the partition's leader)."""
    for index in range(10_000):
        group_id = f"cfg-{index}"
        if coordinator_of(cluster, group_id) == coordinator:
            return group_id
    raise AssertionError("no group id for that coordinator")


# ---- per-group configs --------------------------------------------------------------------------
def test_group_configs_reach_the_coordinator_of_another_broker(cluster: KnodeCluster) -> None:
    """Altered through the node that does not coordinate the group: the change notification
    brings it to the coordinator, whose next heartbeat answer carries the new interval."""
    group_id = group_on(cluster, 2)
    before = join(cluster, 2, group_id)
    assert before.error_code == ErrorCode.none and before.heartbeat_interval.total_seconds() == 1
    result = alter_group(
        cluster,
        1,
        group_id,
        {"consumer.heartbeat.interval.ms": "4000", "consumer.session.timeout.ms": "50000"},
    )
    assert result.error_code == ErrorCode.none, result.error_message
    wait_until(
        lambda: join(cluster, 2, group_id).heartbeat_interval.total_seconds() == 4,
        timeout_s=30,
        what="the coordinator applying the group's heartbeat interval",
    )
    refused = alter_group(cluster, 2, group_id, {"consumer.session.timeout.ms": "61000"})
    assert refused.error_code == ErrorCode.invalid_config
    assert refused.error_message == (
        "consumer.session.timeout.ms must be less than or equal to "
        "group.consumer.max.session.timeout.ms"
    )
    unknown = alter_group(cluster, 2, group_id, {"session.timeout.ms": "50000"})
    assert unknown.error_code == ErrorCode.invalid_config
    assert unknown.error_message == "Unknown group config name: session.timeout.ms"
    deleted = alter_group(cluster, 2, group_id, {"consumer.heartbeat.interval.ms": None})
    assert deleted.error_code == ErrorCode.none
    wait_until(
        lambda: join(cluster, 2, group_id).heartbeat_interval.total_seconds() == 1,
        timeout_s=30,
        what="the broker's heartbeat interval back",
    )


def test_kafka_configs_entity_type_groups(shell: ToolShell, cluster: KnodeCluster) -> None:
    def tool(*args: str) -> Any:
        return shell.run("kafka-configs", "--bootstrap-server", cluster.bootstrap_servers, *args)

    added = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--add-config",
        "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=2000",
    )
    assert added.exit == 0, added.err
    assert added.lines == ["Completed updating config for group tool-group."]
    described = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group")
    assert described.exit == 0, described.err
    assert described.lines == [
        "Dynamic configs for group tool-group are:",
        "  consumer.heartbeat.interval.ms=2000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=2000, "
        "STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=1000}",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    ]
    every = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group", "--all")
    assert every.exit == 0, every.err
    assert "All configs for group tool-group are:" in every.lines
    listed = tool("--describe", "--entity-type", "groups")
    assert "Dynamic configs for group tool-group are:" in listed.lines
    too_small = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--add-config",
        "consumer.heartbeat.interval.ms=500",
    )
    assert too_small.exit != 0
    assert (
        "consumer.heartbeat.interval.ms must be greater than or equal to "
        "group.consumer.min.heartbeat.interval.ms" in too_small.out + too_small.err
    )
    removed = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--delete-config",
        "consumer.session.timeout.ms,consumer.heartbeat.interval.ms",
    )
    assert removed.exit == 0, removed.err
    gone = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group")
    assert gone.lines == ["The group 'tool-group' doesn't exist and doesn't have dynamic config."]
