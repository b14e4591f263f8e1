"""DescribeQuorum (API 55) on a real knode: `ktool quorum status/replication --bootstrap-server`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _quorum(cluster: KnodeCluster, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["quorum", *args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_status_reports_the_one_voter_as_leader(knode: KnodeCluster) -> None:
    code, out, err = _quorum(knode, "status")
    assert code == 0, err
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert fields["LeaderId"].strip() == "1"
    assert int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) > 0
    assert fields["ClusterId"].strip()
    # Kafka 3.x's layout (before KIP-853's directory ids): a list of voter ids.
    assert fields["CurrentVoters"].strip() == "[1]"
    assert fields["CurrentObservers"].strip() == "[]"


def test_replication_lists_the_leader(knode: KnodeCluster) -> None:
    code, out, err = _quorum(knode, "replication")
    assert code == 0, err
    header, *rows = out.strip().splitlines()
    assert header.split()[:3] == ["NodeId", "LogEndOffset", "Lag"]
    assert len(rows) == 1
    assert rows[0].split()[0] == "1"
    assert "Leader" in rows[0]
