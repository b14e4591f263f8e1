"""`ktool groups` against a real knode: lag while a consumer is behind, members, state,
reset-offsets, delete-offsets and delete (issue 6, REFERENCE §6.4)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("groups-ktool")
    with KnodeCluster(base, node_count=1, settings=["group.initial.rebalance.delay.ms=0"]) as c:
        yield c


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def ktool(cluster: KnodeCluster, *args: str) -> Result:
    """Run `ktool groups ...` in-process (the entry point itself is run once, below)."""
    result = CliRunner().invoke(
        app, ["groups", *args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def test_ktool_entry_point_lists_groups(cluster: KnodeCluster) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trafka.tools.ktool",
            "groups",
            "list",
            "--json",
            "--bootstrap-server",
            cluster.bootstrap_servers,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)


def test_describe_lag_members_state_then_reset_and_delete(cluster: KnodeCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("lagging", 2, 1)])["lagging"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce("lagging", str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-lag",
            "client.id": "lag-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["lagging"])
        for _ in range(200):
            consumer.poll(0.05)
            if len(consumer.assignment()) == 2:
                break
        assert len(consumer.assignment()) == 2
        consumer.commit(
            offsets=[TopicPartition("lagging", 0, 3), TopicPartition("lagging", 1, 10)],
            asynchronous=False,
        )
        described = ktool(cluster, "describe", "--group", "g-lag", "--json")
        assert described.returncode == 0, described.stderr
        rows = {r["partition"]: r for r in json.loads(described.stdout)}
        assert (rows[0]["current_offset"], rows[0]["log_end_offset"], rows[0]["lag"]) == (3, 10, 7)
        assert (rows[1]["current_offset"], rows[1]["log_end_offset"], rows[1]["lag"]) == (10, 10, 0)
        assert rows[0]["client_id"] == "lag-client" and rows[0]["consumer_id"]

        table = ktool(cluster, "describe", "--group", "g-lag")
        assert table.returncode == 0, table.stderr
        header, *lines = table.stdout.splitlines()
        assert header.split() == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        assert lines[0].split()[:6] == ["g-lag", "lagging", "0", "3", "10", "7"]

        members = ktool(cluster, "describe", "--group", "g-lag", "--members")
        assert members.returncode == 0, members.stderr
        assert members.stdout.splitlines()[1].split()[-1] == "2"  # #PARTITIONS

        state = ktool(cluster, "describe", "--group", "g-lag", "--state", "--json")
        assert json.loads(state.stdout)["state"] == "Stable"
        assert json.loads(state.stdout)["members"] == 1

        refused = ktool(
            cluster,
            "reset-offsets",
            "--group",
            "g-lag",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1
        assert "inactive" in refused.stderr
    finally:
        consumer.close()

    listed = ktool(cluster, "list", "--json")
    assert {"group": "g-lag", "state": "Empty"} in json.loads(listed.stdout)
    empty = ktool(cluster, "describe", "--group", "g-lag")
    assert "Consumer group 'g-lag' has no active members." in empty.stderr

    dry = ktool(
        cluster,
        "reset-offsets",
        "--group",
        "g-lag",
        "--topic",
        "lagging",
        "--shift-by",
        "-2",
        "--json",
    )
    assert [(r["partition"], r["new_offset"]) for r in json.loads(dry.stdout)] == [(0, 1), (1, 8)]
    still = json.loads(ktool(cluster, "describe", "--group", "g-lag", "--json").stdout)
    assert [r["current_offset"] for r in still] == [3, 10]  # dry run is the default

    done = ktool(
        cluster,
        "reset-offsets",
        "--group",
        "g-lag",
        "--topic",
        "lagging:0",
        "--to-earliest",
        "--execute",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split() == ["g-lag", "lagging", "0", "0"]
    after = json.loads(ktool(cluster, "describe", "--group", "g-lag", "--json").stdout)
    assert [r["current_offset"] for r in after] == [0, 10]

    deleted_offsets = ktool(cluster, "delete-offsets", "--group", "g-lag", "--topic", "lagging:1")
    assert deleted_offsets.returncode == 0, deleted_offsets.stderr
    after = json.loads(ktool(cluster, "describe", "--group", "g-lag", "--json").stdout)
    assert [r["partition"] for r in after] == [0]

    deleted = ktool(cluster, "delete", "--group", "g-lag")
    assert deleted.returncode == 0, deleted.stderr
    assert "Deletion of requested consumer groups ('g-lag') was successful." in deleted.stdout
    again = ktool(cluster, "delete", "--group", "g-lag")
    assert again.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in again.stderr
