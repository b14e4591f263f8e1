"""`knode start`: one-line errors for bad configuration (process.roles against the voters
included), a busy port; clean SIGTERM exit. `knode cluster up` with a broker-only node."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port, free_port_range
from trafka.tools.ktool import app as ktool

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


VOTER_1 = "controller.quorum.voters=1@127.0.0.1:1"
KNODE_CLUSTER_UP = [sys.executable, "-m", "trafka.tools.knode", "cluster", "up"]


def _knode(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trafka.tools.knode", "start", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=str(tmp_path),
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--id", "1", "--set", "no.such.key=1"], "unknown configuration 'no.such.key'"),
        (["--id", "1", "--set", "num.partitions=many"], "num.partitions"),
        (["--id", "1", "--set", "listeners=nonsense"], "listeners"),
        (["--id", "1", "--config", "missing.properties"], "cannot read config file"),
        ([], "missing configuration node.id"),
        # process.roles against controller.quorum.voters (Kafka's KafkaConfig rules)
        (["--id", "4", "--set", "process.roles=broker"], "a broker-only node needs"),
        (
            ["--id", "1", "--set", "process.roles=broker", "--set", VOTER_1],
            "the node id 1 must not be included in the set of voters",
        ),
        (["--id", "4", "--set", VOTER_1], "the node id 4 must be included in the set of voters"),
        (["--id", "4", "--set", "process.roles=controller"], "controller-only node"),
        # a learner cannot generate the secret: it must be the voters' one
        (
            ["--id", "2", "--set", "process.roles=broker", "--set", VOTER_1],
            "node 2 is a learner of the quorum of voter 1: it needs that voter's secret",
        ),
    ],
)
def test_bad_configuration_is_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    result = _knode(tmp_path, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("knode: error: ")
    assert fragment in lines[0]


def test_busy_port_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        result = _knode(
            tmp_path,
            "--id",
            "1",
            "--set",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--set",
            f"log.dirs={tmp_path / 'data'}",
            "--set",
            f"controller.quorum.voters=1@127.0.0.1:{free_port()}",
        )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}: address already in use" in (
        result.stderr
    )


def test_sigterm_is_a_clean_shutdown(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path) as cluster:
        assert cluster.stop(1) == 0
        data_dir = cluster.nodes[1].data_dir
        assert (data_dir / ".kafka_cleanshutdown").exists()
        assert "Traceback" not in cluster.nodes[1].stderr_path.read_text()


def test_cluster_up_runs_voters_and_broker_only_nodes(tmp_path: Path) -> None:
    """`knode cluster up --nodes 2 --voters 1`: what it prints and writes, node 2 a learner."""
    port, quorum_port = free_port_range(2), free_port()
    directory = tmp_path / "cluster"
    command = [*KNODE_CLUSTER_UP, "--nodes", "2", "--voters", "1", "--dir", str(directory)]
    command += ["--port", str(port), "--quorum-port", str(quorum_port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
        assert first == (
            f"knode cluster: 2 nodes up (voters 1; broker-only 2), data and logs in {directory}\n"
        ), (directory / "node-2.log").read_text()
        assert second == f"bootstrap.servers=127.0.0.1:{port},127.0.0.1:{port + 1}\n"
        # the secret and the properties holding it are readable by their owner only
        for private in ["quorum.secret", "node-1.properties", "node-2.properties"]:
            assert (directory / private).stat().st_mode & 0o077 == 0, private
        written = (directory / "node-2.properties").read_text().splitlines()
        assert "process.roles=broker" in written
        assert f"controller.quorum.voters=1@127.0.0.1:{quorum_port}" in written
        assert "process.roles=broker,controller" in (directory / "node-1.properties").read_text()
        result = CliRunner().invoke(
            ktool, ["quorum", "status", "--bootstrap-server", f"127.0.0.1:{port + 1}"]
        )
        assert result.exit_code == 0, result.output
        assert "CurrentVoters:          [1]" in result.stdout
        assert "CurrentObservers:       [2]" in result.stdout
    finally:
        process.send_signal(signal.SIGTERM)
        remaining = process.communicate(timeout=60)[0]
    assert remaining.endswith("knode cluster: stopped\n")
    assert process.returncode == 0
    assert not list(directory.glob("node-*.pid"))


def test_cluster_up_refuses_more_voters_than_nodes(tmp_path: Path) -> None:
    result = subprocess.run(
        [*KNODE_CLUSTER_UP, "--nodes", "2", "--voters", "3", "--dir", str(tmp_path / "cluster")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "knode: error: --voters 3 is more than --nodes 2\n"
