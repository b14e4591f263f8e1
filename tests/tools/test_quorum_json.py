"""`ktool quorum ... --json` on a stopped node's data dir (the offline source): each command's
document through the shared emitter (trafka.tools.output)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from typer.testing import CliRunner

from tests.metadata_quorum.test_bridge import make_config
from tests.support.ports import free_ports
from trafka.metadata_quorum.bridge import open_metadata_quorum
from trafka.metadata_quorum.config import Voter
from trafka.metadata_quorum.transport import load_data_dir
from trafka.metadata_quorum.znodes import ClusterId
from trafka.tools.quorum_cmd import quorum_app


async def test_quorum_commands_print_json_documents(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100)
    async with open_metadata_quorum(config) as quorum:
        await quorum.wait_ready()
        await quorum.create_recursive("/brokers/topics/orders", b'{"version":3}')
        await quorum.create("/cluster")
        await quorum.create("/cluster/id", ClusterId("cid-1").to_json())
        await quorum.create("/bin", b"\x00\xff")
        committed = quorum.status().high_watermark
        with trio.fail_after(5):  # the commit index reaches the .meta file once a second
            while load_data_dir(config.data_dir).commit_index < committed:
                await trio.sleep(0.05)

    def run(*args: str) -> object:
        result = CliRunner().invoke(
            quorum_app, [*args, "--json", "--data-dir", str(config.data_dir)]
        )
        assert result.exit_code == 0, result.output
        assert result.stdout.endswith("\n") and result.stdout.count("\n") >= 1
        return json.loads(result.stdout)

    status = run("status")
    assert isinstance(status, dict)
    assert status["cluster_id"] == "cid-1" and status["current_voters"] == [1]
    assert list(status) == sorted(status)  # keys sorted
    replication = run("replication")
    assert isinstance(replication, list) and replication[0]["node_id"] == 1
    assert run("ls", "/brokers/topics") == ["orders"]
    assert run("get", "/bin") == {"path": "/bin", "data": None, "data_base64": "AP8="}
    stat = run("stat", "/brokers/topics/orders")
    assert isinstance(stat, dict) and stat["data_length"] == len(b'{"version":3}')
    tree = run("tree", "/brokers")
    assert tree == ["/brokers", "/brokers/topics", "/brokers/topics/orders"]
    with_data = run("tree", "/brokers/topics", "--data")
    assert with_data[-1] == {  # type: ignore[index]
        "path": "/brokers/topics/orders",
        "data": '{"version":3}',
        "data_base64": None,
    }
