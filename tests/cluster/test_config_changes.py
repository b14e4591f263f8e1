"""Dynamic configs reach every broker (Kafka's ZK-mode config change notifications), on three
real knode processes.

A topic config changed through a broker that is not even a replica of the partition is
enforced by the partition's leader (min.insync.replicas on an acks=all produce, both ways),
and a cluster-wide default broker config (`/config/brokers/<default>`, resource name "")
changed through one broker becomes every broker's effective value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.log.records import NewRecord, build_batch
from trafka.net import codec
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build
from trafka.node.config.broker import ConfigSource

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=6000",
    "broker.heartbeat.interval.ms=300",
    "offsets.topic.num.partitions=1",
]
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
OP_SET = 0


def _request(cluster: KnodeCluster, node_id: int, api_key: int, high: int, data: Any) -> Any:
    """One request to one broker (a fresh connection), at the highest common version."""

    async def run() -> Any:
        connection = await KafkaConnection.connect(
            "127.0.0.1", cluster.nodes[node_id].port, client_id="config-changes-test"
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


def _produce_acks_all(cluster: KnodeCluster, node_id: int, topic: str) -> int:
    """The error code of one acks=all produce to partition 0, sent to `node_id`."""
    records = build_batch([NewRecord(b"value", key=b"key")], now_ms=1)
    response = _request(
        cluster,
        node_id,
        0,
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return int(response.responses[0].partition_responses[0].error_code)


def _set_configs(
    cluster: KnodeCluster, node_id: int, resource_type: int, name: str, configs: dict[str, str]
) -> None:
    response = _request(
        cluster,
        node_id,
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": key, "config_operation": OP_SET, "value": value}
                        for key, value in configs.items()
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert [int(r.error_code) for r in response.responses] == [0], response


def _broker_config(cluster: KnodeCluster, node_id: int, key: str) -> tuple[str | None, int]:
    """(value, source) of one of `node_id`'s own broker configs, asked of that broker."""
    response = _request(
        cluster,
        node_id,
        32,
        4,
        {
            "resources": [
                {
                    "resource_type": BROKER_RESOURCE,
                    "resource_name": str(node_id),
                    "configuration_keys": [key],
                }
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    (entry,) = response.results[0].configs
    return entry.value, int(entry.config_source)


def test_config_changed_elsewhere_is_enforced_by_the_leader(tmp_path: Path) -> None:
    cluster = KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False)
    with cluster:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        # Replicas on 1 and 2 (1 preferred); broker 3 holds nothing of the topic.
        admin.create_topics([NewTopic("cfg", num_partitions=1, replica_assignment=[[1, 2]])])[
            "cfg"
        ].result(30)

        def leader_with_full_isr() -> int | None:
            state = admin.list_topics("cfg", timeout=5).topics["cfg"].partitions[0]
            return int(state.leader) if sorted(state.isrs) == [1, 2] else None

        leader = wait_until(leader_with_full_isr, timeout_s=30, what="a leader, ISR [1, 2]")
        assert isinstance(leader, int) and leader in (1, 2)
        wait_until(
            lambda: _produce_acks_all(cluster, leader, "cfg") == 0,
            timeout_s=30,
            what="an acks=all produce accepted by the leader",
        )

        # Broker 3 writes the config; the leader must enforce it without being asked.
        _set_configs(cluster, 3, TOPIC_RESOURCE, "cfg", {"min.insync.replicas": "3"})
        wait_until(
            lambda: (
                _produce_acks_all(cluster, leader, "cfg") == ErrorCode.not_enough_replicas.value
            ),
            timeout_s=15,
            what="NOT_ENOUGH_REPLICAS from the leader after min.insync.replicas=3 on broker 3",
        )
        _set_configs(cluster, 3, TOPIC_RESOURCE, "cfg", {"min.insync.replicas": "2"})
        wait_until(
            lambda: _produce_acks_all(cluster, leader, "cfg") == 0,
            timeout_s=15,
            what="acks=all accepted again after min.insync.replicas=2 on broker 3",
        )

        # The cluster-wide default written through broker 3 becomes every broker's value
        # (DescribeConfigs of a broker's own configs reads its in-memory config, no tree).
        _set_configs(cluster, 3, BROKER_RESOURCE, "", {"log.retention.ms": "3600000"})
        for node_id in (1, 2, 3):
            wait_until(
                lambda node_id=node_id: (  # type: ignore[misc]
                    _broker_config(cluster, node_id, "log.retention.ms")
                    == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
                ),
                timeout_s=15,
                what=f"broker {node_id} using the cluster default log.retention.ms",
            )
        # A per-broker value written on broker 1 still beats the default there only.
        _set_configs(cluster, 1, BROKER_RESOURCE, "1", {"log.retention.ms": "7200000"})
        assert _broker_config(cluster, 1, "log.retention.ms") == (
            "7200000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        assert _broker_config(cluster, 2, "log.retention.ms") == (
            "3600000",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
