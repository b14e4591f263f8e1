"""`ktool topics` against one real knode: kafka-topics.sh output, --json, exit codes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def _ktool(cluster: KnodeCluster, *args: str) -> Outcome:
    """Run `ktool topics ...` in-process (typer's runner), as the console script would."""
    result = CliRunner().invoke(
        app, ["topics", *args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Outcome(result.exit_code, result.stdout, result.stderr)


def test_topics_create_describe_alter_delete(knode: KnodeCluster) -> None:
    created = _ktool(
        knode, "create", "kt-orders", "--partitions", "3", "--config", "retention.ms=1000"
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic kt-orders.\n"

    again = _ktool(knode, "create", "kt-orders", "--partitions", "3")
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr
    assert _ktool(knode, "create", "kt-orders", "--if-not-exists").returncode == 0

    listed = _ktool(knode, "list")
    assert "kt-orders" in listed.stdout.splitlines()

    described = _ktool(knode, "describe", "kt-orders")
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Topic: kt-orders\tTopicId: ")
    assert lines[0].endswith(
        "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=1000"
    )
    assert lines[1] == (
        "\tTopic: kt-orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\t"
        "Elr: N/A\tLastKnownElr: N/A"
    )
    assert len(lines) == 4

    assert _ktool(knode, "alter", "kt-orders", "--partitions", "5").returncode == 0
    document = json.loads(_ktool(knode, "describe", "kt-orders", "--json").stdout)
    assert document[0]["partition_count"] == 5
    shrink = _ktool(knode, "alter", "kt-orders", "--partitions", "2")
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr

    assert _ktool(knode, "delete", "kt-orders").returncode == 0
    # Until the controller finishes, describe shows the topic `MarkedForDeletion: true`.
    missing = wait_until(
        lambda: (outcome := _ktool(knode, "describe", "kt-orders")).returncode == 1 and outcome,
        timeout_s=10,
        what="the deletion to finish",
    )
    assert "does not exist" in missing.stderr
    assert _ktool(knode, "delete", "kt-orders").returncode == 1
    assert _ktool(knode, "delete", "kt-orders", "--if-exists").returncode == 0

    bad = _ktool(knode, "create", "bad/name", "--partitions", "1")
    # Checked before connecting, with kafka-topics.sh's message (the broker would answer
    # INVALID_TOPIC_EXCEPTION: tests/cluster/test_topic_names.py).
    assert bad.returncode == 1 and 'Topic name "bad/name" is illegal' in bad.stderr
    assert "Traceback" not in bad.stderr
