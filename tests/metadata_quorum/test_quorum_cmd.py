"""`ktool quorum`: pure formatting, the offline data-dir source and the learner source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from typer.testing import CliRunner

from tests.metadata_quorum.proc_support import REPO, SECRET, leader_of, quorum_cluster
from tests.metadata_quorum.test_bridge import make_config
from tests.net.toy import SUPPORTED, ToyBroker
from tests.support.ports import free_ports
from trafka.metadata_quorum.bridge import MetadataQuorum, open_metadata_quorum
from trafka.metadata_quorum.config import Voter
from trafka.metadata_quorum.export import EXPORT_FORMAT
from trafka.metadata_quorum.local import LocalTransport
from trafka.metadata_quorum.status import QuorumStatus, ReplicaState, describe_quorum_topics
from trafka.metadata_quorum.transport import load_data_dir
from trafka.metadata_quorum.tree import Stat
from trafka.metadata_quorum.znodes import ClusterId
from trafka.net import codec, protocol
from trafka.net.kio_shape import build
from trafka.net.server import KafkaServer, Listener, RequestContext
from trafka.tools.quorum_cmd import (
    DESCRIBE_QUORUM_API_KEY,
    QuorumCommandError,
    _describe_quorum,
    format_ls,
    format_replication,
    format_stat,
    format_status,
    format_tree,
    quorum_app,
    status_from_describe_quorum,
)

STATUS = QuorumStatus(
    cluster_id="abc",
    node_id=1,
    leader_id=2,
    leader_epoch=7,
    high_watermark=120,
    last_applied=120,
    is_leader=False,
    has_quorum=True,
    voters=(
        ReplicaState(1, 118, 1000, 900, "Follower"),
        ReplicaState(2, 121, 1500, 1500, "Leader"),
        ReplicaState(3, 121, 1400, 1400, "Follower"),
    ),
    observers=(ReplicaState(4, -1, -1, -1, "Observer"),),
    now_ms=1500,
)


def test_format_status_prints_kafka_metadata_quorum_lines() -> None:
    assert format_status(STATUS) == (
        "ClusterId:              abc\n"
        "LeaderId:               2\n"
        "LeaderEpoch:            7\n"
        "HighWatermark:          120\n"
        "MaxFollowerLag:         3\n"
        "MaxFollowerLagTimeMs:   600\n"
        "CurrentVoters:          [1,2,3]\n"
        "CurrentObservers:       [4]\n"
    )


def test_format_replication_lists_leader_first() -> None:
    lines = format_replication(STATUS).splitlines()
    assert lines[0].split() == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [line.split() for line in lines[1:]] == [
        ["2", "121", "0", "1500", "1500", "Leader"],
        ["1", "118", "3", "1000", "900", "Follower"],
        ["3", "121", "0", "1400", "1400", "Follower"],
        ["4", "-1", "-1", "-1", "-1", "Observer"],
    ]


def test_zookeeper_shell_formats() -> None:
    stat = Stat(2, 5, 6, 0, 86_400_000, 3, 1, 0x1F, 4, 0)
    assert format_stat(stat).splitlines() == [
        "cZxid = 0x2",
        "ctime = Thu Jan 01 00:00:00 UTC 1970",
        "mZxid = 0x5",
        "mtime = Fri Jan 02 00:00:00 UTC 1970",
        "pZxid = 0x6",
        "cversion = 1",
        "dataVersion = 3",
        "aclVersion = 0",
        "ephemeralOwner = 0x1f",
        "dataLength = 4",
        "numChildren = 0",
    ]
    assert format_ls(["a", "b"]) == "[a, b]\n"
    assert format_tree([("/", b""), ("/a", b"x"), ("/b", b"\xff")], with_data=True) == (
        "/\n/a = x\n/b = base64:/w==\n"
    )


async def test_data_dir_source_reads_a_stopped_node(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100)
    async with open_metadata_quorum(config) as quorum:
        await quorum.wait_ready()
        await quorum.create_recursive("/brokers/topics/orders", b'{"version":3}')
        await quorum.create("/cluster")
        await quorum.create("/cluster/id", ClusterId("cid-1").to_json())
        await quorum.create("/bin", b"\x00\xff")
        expected = quorum.walk_local("/")
        committed = quorum.status().high_watermark
        with trio.fail_after(5):  # the commit index reaches the .meta file once a second
            while load_data_dir(config.data_dir).commit_index < committed:
                await trio.sleep(0.05)
    state = load_data_dir(config.data_dir)
    assert [(p, d) for p, d, _ in state.tree.walk("/")] == [(p, d) for p, d, _ in expected]

    runner = CliRunner()
    result = runner.invoke(
        quorum_app, ["ls", "/brokers/topics", "--data-dir", str(config.data_dir)]
    )
    assert result.exit_code == 0 and result.output == "[orders]\n"
    result = runner.invoke(quorum_app, ["status", "--data-dir", str(config.data_dir)])
    assert "ClusterId:              cid-1" in result.output
    assert "CurrentVoters:          [1]" in result.output  # from <data dir>/quorum.voters
    out = tmp_path / "export.json"
    result = runner.invoke(
        quorum_app, ["export", "--out", str(out), "--data-dir", str(config.data_dir)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["format"] == EXPORT_FORMAT and document["version"] == 1
    by_path = {node["path"]: node for node in document["nodes"]}
    assert by_path["/bin"]["data"] is None and by_path["/bin"]["data_base64"] == "AP8="
    assert by_path["/brokers/topics/orders"]["data"] == '{"version":3}'
    assert [n["path"] for n in document["nodes"]][:2] == ["/", "/bin"]
    result = runner.invoke(quorum_app, ["get", "/nothing", "--data-dir", str(config.data_dir)])
    assert result.exit_code == 1


@pytest.mark.cluster
@pytest.mark.slow
def test_learner_source_against_live_voters(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        leader.ok("create", path="/config", data="x")
        leader.ok("create", path="/config/topics")
        voters = members[0].settings["voters"]
        command = [sys.executable, "-m", "trafka.tools.ktool", "quorum"]
        common = ["--quorum-voters", voters, "--secret", SECRET]
        tree = subprocess.run(
            [*command, "tree", "/config", *common],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert tree.returncode == 0, tree.stderr
        assert tree.stdout.splitlines() == ["/config", "/config/topics"]
        status = subprocess.run(
            [*command, "status", *common], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert f"LeaderId:               {leader.node_id}" in status.stdout
        assert "CurrentVoters:          [1,2,3]" in status.stdout


class _QuorumNode:
    """A minimal Kafka listener answering ApiVersions, Metadata and DescribeQuorum v0-v1 the
    way a trafka node is meant to (DescribeQuorum from `describe_quorum_topics`)."""

    def __init__(self, quorum: MetadataQuorum, supported: protocol.SupportedApis) -> None:
        self.quorum = quorum
        self.toy = ToyBroker(supported=supported)

    async def handle(self, ctx: RequestContext) -> Any:
        if ctx.api_key == 55:
            response_class = codec.response_class(55, ctx.api_version)
            return build(
                response_class,
                {"error_code": 0, "topics": describe_quorum_topics(self.quorum.status())},
            )
        return await self.toy.handle(ctx)


async def test_bootstrap_server_status_uses_describe_quorum(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await quorum.create("/x")
        supported = protocol.SupportedApis(
            [*SUPPORTED, protocol.ApiVersionRange(DESCRIBE_QUORUM_API_KEY, 0, 1)]
        )
        node = _QuorumNode(quorum, supported)
        server = KafkaServer(node.handle, supported)
        (bound,) = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
        status = await _describe_quorum(f"127.0.0.1:{bound.port}", 10.0)
        assert status.leader_id == 1 and status.high_watermark == quorum.status().high_watermark
        text = format_status(status)
        assert "ClusterId:              toy-cluster" in text
        assert "CurrentVoters:          [1]" in text
        rows = format_replication(status).splitlines()
        assert rows[1].split()[0] == "1" and rows[1].split()[-1] == "Leader"
        nursery.cancel_scope.cancel()


def test_describe_quorum_errors_are_reported() -> None:
    response = build(
        codec.response_class(55, 1),
        {
            "error_code": 0,
            "topics": [
                {
                    "topic_name": "__cluster_metadata",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 6,
                            "leader_id": -1,
                            "leader_epoch": 0,
                            "high_watermark": 0,
                            "current_voters": [],
                            "observers": [],
                        }
                    ],
                }
            ],
        },
    )
    with pytest.raises(QuorumCommandError, match="NOT_LEADER_OR_FOLLOWER"):
        status_from_describe_quorum(response, "", 0)
