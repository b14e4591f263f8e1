"""`ktool audit export|check` and `python -m trafka.spark.export|check`: the metadata flags.

`--metadata FILE` and `--bootstrap-server HOST:PORT[,...]` are alternatives; every failure
on the metadata side (both flags, a missing or non-JSON file, a malformed address, a server
that refuses or never answers) is one line on stderr and exit code 2, decided before Spark
starts (these tests would take seconds more, and print a JVM banner, if it started).
No Spark, no knode: plain sockets on loopback stand in for unreachable servers, and the
node's own DescribeQuorum/TrafkaDescribeZNodes handlers on an in-memory quorum for a live one.
"""

from __future__ import annotations

import json
import socket
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from typer.testing import CliRunner

from tests.metadata_quorum.test_bridge import make_config
from tests.net.toy import SUPPORTED, ToyBroker
from tests.support.ports import free_port
from trafka.client.metadata import (
    DESCRIBE_QUORUM_API_KEY,
    MetadataReadError,
    fetch_export_document,
    parse_bootstrap,
)
from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.bridge import MetadataQuorum, open_metadata_quorum
from trafka.metadata_quorum.config import Voter
from trafka.metadata_quorum.export import export_tree
from trafka.metadata_quorum.local import LocalTransport
from trafka.net import protocol
from trafka.net.messages.describe_znodes import DESCRIBE_ZNODES_API_KEY
from trafka.net.server import KafkaServer, Listener, RequestContext
from trafka.node.handlers import describe_quorum, describe_znodes
from trafka.node.metadata_store import QuorumMetadataStore
from trafka.spark import check as check_entry
from trafka.spark import export as export_entry
from trafka.spark.commands import EXIT_CANNOT_RUN, output_path
from trafka.spark.metadata import tables_from_document
from trafka.tools.ktool import app


@pytest.fixture
def log_dir(tmp_path: Path) -> str:
    path = tmp_path / "b1"
    path.mkdir()
    (path / "meta.properties").write_text("version=1\nnode.id=1\n")
    return str(path)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A listening socket that never accepts: connects succeed, nothing ever answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def _audit(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("command", ["export", "check"])
def test_metadata_and_bootstrap_server_together_is_one_line(
    command: str, log_dir: str, tmp_path: Path
) -> None:
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text('{"nodes": []}')
    out = ["--out", str(tmp_path / "out")] if command == "export" else []
    code, err = _audit(
        command,
        "--log-dirs",
        log_dir,
        *out,
        "--metadata",
        str(snapshot),
        "--bootstrap-server",
        "127.0.0.1:9092",
    )
    assert code == EXIT_CANNOT_RUN
    assert _one_line(err) == "error: give --metadata or --bootstrap-server, not both\n"


@pytest.mark.parametrize("command", ["export", "check"])
def test_unreachable_bootstrap_server_is_one_line_exit_2(
    command: str, log_dir: str, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    out = ["--out", str(tmp_path / "out")] if command == "export" else []
    code, err = _audit(command, "--log-dirs", log_dir, *out, "--bootstrap-server", dead)
    assert code == EXIT_CANNOT_RUN
    line = _one_line(err)
    assert line.startswith(f"error: cannot read metadata from {dead}: no server answered: ")
    assert "cannot connect" in line
    assert not (tmp_path / "out").exists()  # nothing was written: Spark never started


def test_every_bootstrap_server_is_tried_and_named(
    log_dir: str, silent_server: str, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    bootstrap = f"{dead},{silent_server}"
    code, err = _audit(
        "check", "--log-dirs", log_dir, "--bootstrap-server", bootstrap, "--metadata-timeout", "0.5"
    )
    assert code == EXIT_CANNOT_RUN
    line = _one_line(err)
    assert f"{dead}: " in line and "cannot connect" in line
    assert f"{silent_server} did not answer within 0.5 s" in line


def test_malformed_bootstrap_server_and_bad_snapshots(log_dir: str, tmp_path: Path) -> None:
    code, err = _audit("check", "--log-dirs", log_dir, "--bootstrap-server", "no-port")
    assert code == EXIT_CANNOT_RUN
    assert "expected host:port" in _one_line(err)
    code, err = _audit("check", "--log-dirs", log_dir, "--metadata", str(tmp_path / "none"))
    assert code == EXIT_CANNOT_RUN
    assert _one_line(err).startswith("error: --metadata: ")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, err = _audit("check", "--log-dirs", log_dir, "--metadata", str(broken))
    assert code == EXIT_CANNOT_RUN
    assert "not JSON" in _one_line(err)


def test_spark_submit_entry_points_take_the_same_flags(
    log_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert check_entry.main(["--log-dirs", log_dir, "--bootstrap-server", dead]) == 2
    assert f"cannot read metadata from {dead}" in _one_line(capsys.readouterr().err)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text("{}")
    both = ["--metadata", str(snapshot), "--bootstrap-server", dead]
    out = ["--out", str(tmp_path / "out")]
    assert export_entry.main(["--log-dirs", log_dir, *out, *both]) == 2
    assert "not both" in _one_line(capsys.readouterr().err)


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,") == (("a", 1), ("b", 2))
    assert parse_bootstrap("[::1]:9092") == (("::1", 9092),)
    for bad in ("", ",", "host", ":9092", "host:port", "host:0", "host:70000"):
        with pytest.raises(MetadataReadError):
            parse_bootstrap(bad)


def test_output_uris_are_kept_and_paths_made_absolute() -> None:
    for uri in ("hdfs://namenode:8020/audit", "s3a://bucket/audit", "file:///tmp/audit"):
        assert output_path(uri) == uri
    assert output_path("audit") == str(Path.cwd() / "audit")


# ---------------------------------------------------------------------------------------
# The live read itself, against the node's real handlers on an in-memory quorum


class _MetadataNode:
    """A listener answering like a trafka node for the audit's read: DescribeQuorum and
    TrafkaDescribeZNodes from the node's real handlers; ApiVersions and Metadata (cluster id
    "toy-cluster") from the toy broker."""

    def __init__(self, quorum: MetadataQuorum) -> None:
        self.services = types.SimpleNamespace(store=QuorumMetadataStore(quorum))
        self.toy = ToyBroker(supported=_SUPPORTED)

    def authorize(self, *_action: object) -> bool:
        """No authorizer configured: every action is allowed (Kafka's default)."""
        return True

    async def handle(self, ctx: RequestContext) -> Any:
        if ctx.api_key == DESCRIBE_ZNODES_API_KEY:
            return await describe_znodes.handle(self, ctx.request)  # type: ignore[arg-type]
        if ctx.api_key == DESCRIBE_QUORUM_API_KEY:
            return await describe_quorum.handle(self, ctx.request)  # type: ignore[arg-type]
        return await self.toy.handle(ctx)


_SUPPORTED = protocol.SupportedApis(
    [
        *SUPPORTED,
        protocol.ApiVersionRange(DESCRIBE_QUORUM_API_KEY, 0, 1),
        protocol.ApiVersionRange(DESCRIBE_ZNODES_API_KEY, 0, 0),
    ]
)


async def _fill(quorum: MetadataQuorum) -> None:
    for path in znodes.PERSISTENT_PATHS:
        await quorum.create_recursive(path)
    for broker in (1, 2):
        endpoint = znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker)
        registration = znodes.BrokerRegistration(broker, (endpoint,), 1_700_000_000_000)
        await quorum.create(znodes.broker_path(broker), registration.to_json(), ephemeral=True)
    moving = znodes.TopicAssignment({0: (1, 2)})
    await quorum.create(znodes.topic_path("orders"), moving.to_json())
    await quorum.create_recursive(
        znodes.partition_state_path("orders", 0), znodes.PartitionState(1, 4, (1, 2), 3).to_json()
    )
    plan = znodes.ReassignPartitions((znodes.PartitionReassignment("orders", 0, (2, 3)),))
    await quorum.create(znodes.REASSIGN_PARTITIONS, plan.to_json())


async def test_fetch_export_document_tries_the_next_server_and_feeds_the_tables(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await _fill(quorum)
        server = KafkaServer(_MetadataNode(quorum).handle, _SUPPORTED)
        (bound,) = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
        live = f"127.0.0.1:{bound.port}"
        dead = f"127.0.0.1:{free_port()}"
        document = await fetch_export_document(f"{dead},{live}", 10.0)
        reference = quorum.read_local(lambda tree: export_tree(tree, exported_at_ms=0))
        assert document["nodes"] == reference["nodes"]
        assert document["sessions"] == reference["sessions"]
        status = document["status"]
        assert status["source"] == "bootstrap-server" and status["bootstrap_server"] == live
        assert status["cluster_id"] == "toy-cluster" and status["voters"] == [1]
        assert status["leader_id"] == 1 and status["last_zxid"] == reference["status"]["last_zxid"]

        tables = tables_from_document(json.loads(json.dumps(document)))
        assert tables.rows["metadata_errors"] == []
        assert [b["broker_id"] for b in tables.rows["brokers"]] == [1, 2]
        (partition,) = tables.rows["partitions"]
        assert (partition["replicas"], partition["leader"], partition["isr"]) == ([1, 2], 1, [1, 2])
        # planned, not started: the difference to the target, as `ktool reassign list` says
        (reassignment,) = tables.rows["reassignments"]
        assert reassignment["target_replicas"] == [2, 3]
        assert (reassignment["adding_replicas"], reassignment["removing_replicas"]) == ([3], [1])
        quorum_status = {r["key"]: r["value"] for r in tables.rows["quorum_status"]}
        assert quorum_status["bootstrap_server"] == live
        nursery.cancel_scope.cancel()
