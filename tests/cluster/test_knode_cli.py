"""`knode start`: one-line errors for bad configuration, a busy port; clean SIGTERM exit."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


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
