"""A broker-only node (`process.roles=broker`, a quorum learner) runs what every broker runs
besides the controller, on real processes (one voter, one broker-only node):

* at a restart it deletes the stray log of a partition reassigned away from it while it was
  down (KAFKA-14616, `trafka.node.stray_log_cleanup`), as a combined node does
  (tests/cluster/test_replication_admin.py);
* it applies a dynamic config change written through another node (`/config/changes`,
  `trafka.node.config.changes`): the cluster-wide default becomes its effective value, and a
  topic config written elsewhere is enforced by it as the partition's leader.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
from trafka.net.api_keys import ApiKey
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build
from trafka.node.config.broker import ConfigSource

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=4000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "offsets.topic.num.partitions=1",
]
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
OP_SET = 0
LEARNER = 2


def _request(cluster: KnodeCluster, node_id: int, api_key: int, high: int, data: Any) -> Any:
    """One request to one node (a fresh connection), at the highest common version."""

    async def run() -> Any:
        connection = await KafkaConnection.connect(
            "127.0.0.1", cluster.nodes[node_id].port, client_id="broker-only-tasks-test"
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


def _set_configs(
    cluster: KnodeCluster, node_id: int, resource_type: int, name: str, configs: dict[str, str]
) -> None:
    """IncrementalAlterConfigs SET through `node_id`."""
    response = _request(
        cluster,
        node_id,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
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


def _own_config(cluster: KnodeCluster, node_id: int, key: str) -> tuple[str | None, int]:
    """(value, source) of one of `node_id`'s broker configs, asked of that node (its
    in-memory config: no tree read)."""
    response = _request(
        cluster,
        node_id,
        ApiKey.DESCRIBE_CONFIGS,
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


def _produce_acks_all(cluster: KnodeCluster, node_id: int, topic: str) -> int:
    """The error code of one acks=all produce to partition 0, sent to `node_id`."""
    response = _request(
        cluster,
        node_id,
        ApiKey.PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [
                        {"index": 0, "records": build_batch([NewRecord(b"v")], now_ms=1)}
                    ],
                }
            ],
        },
    )
    return int(response.responses[0].partition_responses[0].error_code)


def _ktool(cluster: KnodeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trafka.tools.ktool",
            *args,
            "--bootstrap-server",
            cluster.address(1),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _learner_dirs(cluster: KnodeCluster) -> set[str]:
    data_dir = cluster.nodes[LEARNER].data_dir
    return {p.name for p in data_dir.iterdir() if p.name.startswith(("strayed-", "kept-"))}


def _this_run(cluster: KnodeCluster) -> str:
    text = cluster.nodes[LEARNER].stderr_path.read_text(errors="replace")
    return text.rsplit("===== start ", 1)[-1]


def test_broker_only_node_deletes_stray_logs_and_applies_config_changes(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path, node_count=2, voter_count=1, settings=SETTINGS) as cluster:
        assert cluster.broker_only_ids == [LEARNER]
        admin = AdminClient({"bootstrap.servers": cluster.address(1)})
        wait_until(
            lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2],
            timeout_s=30,
            what="both nodes registered",
        )
        futures = admin.create_topics(
            [
                NewTopic("strayed", num_partitions=1, replica_assignment=[[1, LEARNER]]),
                NewTopic("kept", num_partitions=1, replica_assignment=[[LEARNER]]),
            ]
        )
        for future in futures.values():
            future.result(timeout=30)
        wait_until(
            lambda: _learner_dirs(cluster) == {"strayed-0", "kept-0"},
            timeout_s=30,
            what="the broker-only node's replicas",
        )

        # strayed-0 moves to {1} while the broker-only node is down: its StopReplica is
        # never sent, so the node finds the log at its restart and must delete it itself.
        assert cluster.stop(LEARNER) == 0
        plan = tmp_path / "strayed.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": "strayed", "partition": 0, "replicas": [1]}],
                }
            )
        )
        executed = _ktool(cluster, "reassign", "execute", "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stderr
        wait_until(
            lambda: (
                _ktool(
                    cluster, "reassign", "verify", "--reassignment-json-file", str(plan)
                ).returncode
                == 0
            ),
            timeout_s=30,
            what="strayed-0 reassigned to {1}",
        )
        assert "strayed-0" in _learner_dirs(cluster)
        cluster.start(LEARNER)
        wait_until(
            lambda: "stray-log check done" in _this_run(cluster),
            timeout_s=60,
            what="the broker-only node's stray-log check",
        )
        assert _learner_dirs(cluster) == {"kept-0"}
        deleted = [line for line in _this_run(cluster).splitlines() if "deleted stray log" in line]
        assert len(deleted) == 1 and "strayed-0" in deleted[0], deleted

        # A topic config written through the voter is enforced by the broker-only leader.
        wait_until(
            lambda: _produce_acks_all(cluster, LEARNER, "kept") == 0,
            timeout_s=30,
            what="kept-0 led by the broker-only node again",
        )
        _set_configs(cluster, 1, TOPIC_RESOURCE, "kept", {"min.insync.replicas": "2"})
        wait_until(
            lambda: (
                _produce_acks_all(cluster, LEARNER, "kept") == ErrorCode.not_enough_replicas.value
            ),
            timeout_s=20,
            what="NOT_ENOUGH_REPLICAS from the broker-only leader after min.insync.replicas=2",
        )
        # The cluster-wide default written through the voter becomes its effective value.
        _set_configs(cluster, 1, BROKER_RESOURCE, "", {"log.retention.ms": "3600000"})
        wait_until(
            lambda: (
                _own_config(cluster, LEARNER, "log.retention.ms")
                == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            ),
            timeout_s=20,
            what="the broker-only node using the cluster default log.retention.ms",
        )
