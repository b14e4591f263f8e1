"""`ktool topics describe` partition filters against one real knode (kafka-topics.sh's
--under-replicated-partitions, --unavailable-partitions, --under/at-min-isr-partitions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _describe(cluster: KnodeCluster, *args: str) -> str:
    result = CliRunner().invoke(
        app, ["topics", "describe", *args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_describe_filters_on_one_node(knode: KnodeCluster) -> None:
    for name, extra in (("kf-plain", []), ("kf-strict", ["--config", "min.insync.replicas=2"])):
        created = CliRunner().invoke(
            app,
            [
                *("topics", "create", name, "--partitions", "2", *extra),
                *("--bootstrap-server", knode.bootstrap_servers),
            ],
        )
        assert created.exit_code == 0, created.stderr

    # One healthy node: nothing under-replicated or unavailable, and no topic lines.
    assert _describe(knode, "--under-replicated-partitions") == ""
    assert _describe(knode, "--unavailable-partitions") == ""

    # ISR of one: below min.insync.replicas=2 on kf-strict, at the default 1 on kf-plain.
    under = _describe(knode, "--under-min-isr-partitions").splitlines()
    assert [line.split("\t")[1:3] for line in under] == [
        ["Topic: kf-strict", "Partition: 0"],
        ["Topic: kf-strict", "Partition: 1"],
    ]
    at = _describe(knode, "--at-min-isr-partitions").splitlines()
    assert [line.split("\t")[1:3] for line in at] == [
        ["Topic: kf-plain", "Partition: 0"],
        ["Topic: kf-plain", "Partition: 1"],
    ]
    assert not any(line.startswith("Topic:") for line in under + at)

    document = json.loads(_describe(knode, "kf-strict", "--under-min-isr-partitions", "--json"))
    assert document[0]["min_insync_replicas"] == 2
    assert [p["partition"] for p in document[0]["partitions"]] == [0, 1]
    assert document[0]["partitions"][0]["adding_replicas"] == []

    # Without a filter the topic line shows only the topic's own overrides.
    plain = _describe(knode, "kf-plain").splitlines()
    assert plain[0].endswith("\tConfigs: ")
    assert len(plain) == 3


THREE_NODE_SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
]


def _invoke(address: str, *args: str) -> list[str]:
    """`ktool topics ARGS` against one node; its stdout lines (fails on a non-zero exit)."""
    result = CliRunner().invoke(app, ["topics", *args, "--bootstrap-server", address])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


def test_killed_broker_makes_partitions_under_replicated(tmp_path: Path) -> None:
    """Broker 3 is SIGKILLed: the filters find the shrunk partitions, and a topic deleted
    while one of its replicas is on broker 3 stays pending, shown `MarkedForDeletion: true`
    (the controller cannot finish until broker 3 returns, CTL-30)."""
    cluster = KnodeCluster(tmp_path, node_count=3, settings=THREE_NODE_SETTINGS, start=False)
    with cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
        address = cluster.bootstrap_servers
        _invoke(
            address,
            *("create", "kf-replicated", "--partitions", "2"),
            *("--replication-factor", "3", "--config", "min.insync.replicas=2"),
        )
        _invoke(address, "create", "kf-doomed", "--replica-assignment", "3:1,1:3")
        wait_until(
            lambda: _describe(cluster, "--under-replicated-partitions") == "",
            timeout_s=30,
            what="every ISR complete",
        )
        assert _describe(cluster, "--unavailable-partitions") == ""
        assert "MarkedForDeletion" not in _describe(cluster)

        cluster.kill(3)
        survivor = cluster.address(1)

        def under_replicated() -> list[str]:
            try:
                return _invoke(
                    survivor, "describe", "kf-replicated", "--under-replicated-partitions"
                )
            except AssertionError:
                return []

        wait_until(
            lambda: len(under_replicated()) == 2, timeout_s=30, what="both partitions shrunk"
        )
        lines = under_replicated()
        isrs = [line.split("\tIsr: ")[1].split("\t")[0] for line in lines]
        assert all(set(i.split(",")) == {"1", "2"} for i in isrs)
        at_min = _invoke(survivor, "describe", "kf-replicated", "--at-min-isr-partitions")
        assert len(at_min) == 2

        # Deleted while its replica on broker 3 is down: pending, and the brokers have
        # dropped it from Metadata, so describe reads it from the tree.
        _invoke(survivor, "delete", "kf-doomed")
        every = _invoke(survivor, "describe")
        doomed = [line for line in every if "Topic: kf-doomed\t" in line]
        assert len(doomed) == 3, every
        assert doomed[0].startswith("Topic: kf-doomed\tTopicId: ")
        assert doomed[0].endswith(
            "\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \tMarkedForDeletion: true"
        )
        assert doomed[1].startswith("\tTopic: kf-doomed\tPartition: 0\tLeader: ")
        assert "\tReplicas: 3,1\t" in doomed[1] and "\tReplicas: 1,3\t" in doomed[2]
        assert all(line.endswith("\tMarkedForDeletion: true") for line in doomed)
        assert not any("MarkedForDeletion" in line for line in every if line not in doomed)
        assert _invoke(survivor, "describe", "kf-doomed") == doomed
        document = json.loads("\n".join(_invoke(survivor, "describe", "kf-doomed", "--json")))
        assert document[0]["marked_for_deletion"] is True
        assert [p["replicas"] for p in document[0]["partitions"]] == [[3, 1], [1, 3]]
