"""Illegal topic names are refused on every creation path of a real knode (issue 12 item 5).

`re.match(r"^[a-zA-Z0-9._-]+$")` accepted `orders\\n` (`$` matches before a final newline), and
Metadata auto-creation created it; its checkpoint lines then broke on every restart. Now
CreateTopics, Metadata auto-creation and `ktool topics create` all answer
INVALID_TOPIC_EXCEPTION and nothing is created.
"""

from __future__ import annotations

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from trafka.net import codec
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BAD_NAMES = ["orders\n", "bad/name", "a" * 250, "..", "ta\tb"]
INVALID_TOPIC_EXCEPTION = 17


def _metadata(port: int, names: list[str] | None, *, auto_create: bool) -> list[tuple[str, int]]:
    async def call() -> list[tuple[str, int]]:
        connection = await KafkaConnection.connect("127.0.0.1", port, client_id="names-test")
        try:
            await connection.negotiate_api_versions()
            version = connection.version_for(3, 4, 9)
            request_class = codec.request_class(3, version)
            assert request_class is not None
            request = build(
                request_class,
                {
                    "topics": None if names is None else [{"name": n} for n in names],
                    "allow_auto_topic_creation": auto_create,
                },
            )
            response = await connection.request(request, version)
        finally:
            await connection.close()
        return [(str(t.name), int(t.error_code)) for t in response.topics]

    return trio.run(call)


def test_create_topics_refuses_illegal_names(knode: KnodeCluster) -> None:
    admin = AdminClient({"bootstrap.servers": knode.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1) for name in BAD_NAMES],
        operation_timeout=10,
    )
    for name, future in futures.items():
        with pytest.raises(Exception) as caught:
            future.result(timeout=30)
        error = caught.value.args[0]
        assert error.code() == INVALID_TOPIC_EXCEPTION, (name, error)
    listed = {name for name, _ in _metadata(knode.nodes[1].port, None, auto_create=False)}
    assert not listed & set(BAD_NAMES)
    assert not any("\n" in name or "/" in name for name in listed)


def test_metadata_auto_create_refuses_illegal_names(knode: KnodeCluster) -> None:
    answers = _metadata(knode.nodes[1].port, ["orders\n", "bad/name"], auto_create=True)
    assert answers == [
        ("orders\n", INVALID_TOPIC_EXCEPTION),
        ("bad/name", INVALID_TOPIC_EXCEPTION),
    ]
    listed = {name for name, _ in _metadata(knode.nodes[1].port, None, auto_create=False)}
    assert "orders\n" not in listed and "bad/name" not in listed
    # a legal name still auto-creates
    assert _metadata(knode.nodes[1].port, ["names-ok"], auto_create=True) == [("names-ok", 0)]


def test_ktool_refuses_illegal_names_with_one_line(knode: KnodeCluster) -> None:
    for name in ["orders\n", "bad/name"]:
        result = CliRunner().invoke(
            app, ["topics", "create", name, "--bootstrap-server", knode.bootstrap_servers]
        )
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1, result.stderr
        assert "is illegal, it contains a character other than ASCII alphanumerics" in (
            result.stderr
        )


def test_ktool_warns_about_collision_characters(knode: KnodeCluster) -> None:
    result = CliRunner().invoke(
        app, ["topics", "create", "names.dot", "--bootstrap-server", knode.bootstrap_servers]
    )
    assert result.exit_code == 0, result.stderr
    assert "could collide" in result.stderr
    clash = CliRunner().invoke(
        app, ["topics", "create", "names_dot", "--bootstrap-server", knode.bootstrap_servers]
    )
    assert clash.exit_code == 1
    assert "collides with existing topic: names.dot" in clash.stderr
