"""`ktool quorum ls|get|stat|tree|export --bootstrap-server` against a real knode.

They send TrafkaDescribeZNodes (API key 10000, trafka's own request) on the node's normal
Kafka listener; the node must still look like a plain Kafka broker to standard clients
(the key is not advertised in ApiVersions) while accepting the request.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from trafka.metadata_quorum.export import EXPORT_FORMAT, EXPORT_VERSION
from trafka.metadata_quorum.znodes import BrokerRegistration
from trafka.net.client import KafkaConnection
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_KEY,
    DescribeZNodesRequestV0,
)
from trafka.tools.ktool import app

with warnings.catch_warnings():  # kafka-python 3.0.12 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

TOPIC = "quorum-tree-topic"


def _quorum(cluster: KnodeCluster, *args: str) -> str:
    result = CliRunner().invoke(
        app, ["quorum", *args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def with_topic(knode: KnodeCluster) -> KnodeCluster:
    admin = AdminClient({"bootstrap.servers": knode.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    return knode


def test_ls_get_stat(with_topic: KnodeCluster) -> None:
    assert _quorum(with_topic, "ls", "/brokers/ids") == "[1]\n"
    assert TOPIC in _quorum(with_topic, "ls", "/brokers/topics")
    data = _quorum(with_topic, "get", "/brokers/ids/1")
    registration = BrokerRegistration.from_json(data.rstrip("\n").encode(), 1)
    assert registration.endpoints[0].port == with_topic.nodes[1].port
    stat = dict(
        line.split(" = ", 1) for line in _quorum(with_topic, "stat", "/controller").splitlines()
    )
    assert list(stat) == [
        "cZxid",
        "ctime",
        "mZxid",
        "mtime",
        "pZxid",
        "cversion",
        "dataVersion",
        "aclVersion",
        "ephemeralOwner",
        "dataLength",
        "numChildren",
    ]
    assert int(stat["cZxid"], 16) > 0 and int(stat["ephemeralOwner"], 16) > 0
    assert stat["numChildren"] == "0"
    result = CliRunner().invoke(
        app, ["quorum", "get", "/nothing", "--bootstrap-server", with_topic.bootstrap_servers]
    )
    assert result.exit_code == 1 and "Node does not exist: /nothing" in result.stderr


def test_tree_and_export(with_topic: KnodeCluster, tmp_path: Path) -> None:
    lines = _quorum(with_topic, "tree", "/brokers").splitlines()
    assert lines[0] == "/brokers"
    assert "/brokers/ids/1" in lines and f"/brokers/topics/{TOPIC}" in lines
    assert lines.index("/brokers/ids") < lines.index("/brokers/ids/1")
    out = tmp_path / "meta.json"
    assert "exported" in _quorum(with_topic, "export", "--out", str(out))
    document = json.loads(out.read_text())
    assert document["format"] == EXPORT_FORMAT and document["version"] == EXPORT_VERSION
    assert document["status"]["source"] == "bootstrap-server"
    assert document["status"]["leader_id"] == 1 and document["status"]["last_zxid"] > 0
    paths = [node["path"] for node in document["nodes"]]
    assert paths[0] == "/" and "/brokers/ids/1" in paths and "/controller" in paths
    owners = {s["owner"]: s for s in document["sessions"]}
    assert {"/brokers/ids/1", "/controller"} <= set(owners["node-1"]["ephemerals"])
    by_path = {node["path"]: node for node in document["nodes"]}
    topic = json.loads(by_path[f"/brokers/topics/{TOPIC}"]["data"])
    assert sorted(topic["partitions"]) == ["0", "1"]


def test_the_request_is_served_but_not_advertised(knode: KnodeCluster) -> None:
    async def probe() -> tuple[set[int], int]:
        connection = await KafkaConnection.connect("127.0.0.1", knode.nodes[1].port)
        try:
            advertised = set(await connection.negotiate_api_versions())
            response = await connection.request(
                DescribeZNodesRequestV0(paths=("/brokers/ids",), include_children=True)
            )
            return advertised, len(response.entries[0].children)
        finally:
            await connection.close()

    advertised, children = trio.run(probe)
    assert 55 in advertised and DESCRIBE_ZNODES_API_KEY not in advertised
    assert children == 1


def test_standard_clients_are_undisturbed(with_topic: KnodeCluster) -> None:
    _quorum(with_topic, "tree", "/")
    admin = AdminClient({"bootstrap.servers": with_topic.bootstrap_servers})
    metadata = admin.list_topics(timeout=30)
    assert TOPIC in metadata.topics and list(metadata.brokers) == [1]
    kafka_admin = KafkaAdminClient(bootstrap_servers=with_topic.bootstrap_servers)
    try:
        assert TOPIC in kafka_admin.list_topics()
        brokers = kafka_admin.describe_cluster()["brokers"]
        assert [b["broker_id"] for b in brokers] == [1]
    finally:
        kafka_admin.close()
