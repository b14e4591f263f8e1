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


def test_killed_broker_makes_partitions_under_replicated(tmp_path: Path) -> None:
    cluster = KnodeCluster(tmp_path, node_count=3, settings=THREE_NODE_SETTINGS, start=False)
    with cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
        created = CliRunner().invoke(
            app,
            [
                *("topics", "create", "kf-replicated", "--partitions", "2"),
                *("--replication-factor", "3", "--config", "min.insync.replicas=2"),
                *("--bootstrap-server", cluster.bootstrap_servers),
            ],
        )
        assert created.exit_code == 0, created.stderr
        wait_until(
            lambda: _describe(cluster, "--under-replicated-partitions") == "",
            timeout_s=30,
            what="every ISR complete",
        )
        assert _describe(cluster, "--unavailable-partitions") == ""

        cluster.kill(3)
        survivor = CliRunner()

        def under_replicated() -> list[str]:
            result = survivor.invoke(
                app,
                [
                    *("topics", "describe", "--under-replicated-partitions"),
                    *("--bootstrap-server", cluster.address(1)),
                ],
            )
            return result.stdout.splitlines() if result.exit_code == 0 else []

        wait_until(
            lambda: len(under_replicated()) == 2, timeout_s=30, what="both partitions shrunk"
        )
        lines = under_replicated()
        isrs = [line.split("\tIsr: ")[1].split("\t")[0] for line in lines]
        assert all(set(i.split(",")) == {"1", "2"} for i in isrs)
        at_min = survivor.invoke(
            app,
            [
                *("topics", "describe", "--at-min-isr-partitions"),
                *("--bootstrap-server", cluster.address(1)),
            ],
        )
        assert len(at_min.stdout.splitlines()) == 2
