"""`ktool quorum ls|get|stat|tree|export --bootstrap-server`: TrafkaDescribeZNodes (API 10000)
served by the node's real handler over a real listener, on an in-memory quorum."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from tests.metadata_quorum.test_bridge import make_config
from tests.net.toy import SUPPORTED, ToyBroker
from trafka.metadata_quorum.bridge import MetadataQuorum, open_metadata_quorum
from trafka.metadata_quorum.config import Voter
from trafka.metadata_quorum.export import export_tree
from trafka.metadata_quorum.local import LocalTransport
from trafka.metadata_quorum.tree import ConnectionLossError
from trafka.net import protocol
from trafka.net.client import KafkaConnection
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_KEY,
    MAX_RESPONSE_BYTES,
    DescribeZNodesRequestV0,
)
from trafka.net.server import KafkaServer, Listener, RequestContext
from trafka.node.handlers import describe_znodes
from trafka.node.handlers.describe_znodes import describe, walk_from
from trafka.node.metadata_store import QuorumMetadataStore
from trafka.tools.quorum_cmd import (
    QuorumCommandError,
    export_remote,
    format_ls,
    format_stat,
    read_znodes,
)


async def _fill(quorum: MetadataQuorum) -> None:
    await quorum.create_recursive("/brokers/ids")
    for broker_id in (1, 2, 3):
        await quorum.create(f"/brokers/ids/{broker_id}", b'{"version":5}', ephemeral=True)
    await quorum.create_recursive("/brokers/topics/orders", b'{"version":3}')
    await quorum.create_recursive("/brokers/topics/audit")
    await quorum.create("/bin", b"\x00\xff")
    await quorum.create("/controller", b'{"brokerid":1}', ephemeral=True)


class _UnreadableTree:
    """A node whose replica of the tree cannot be read (no metadata quorum)."""

    def read_local(self, reader: object) -> object:
        raise ConnectionLossError("/", "no metadata quorum")


class _Node:
    """A listener that serves TrafkaDescribeZNodes with the node's handler (the rest: toy)."""

    def __init__(self, quorum: MetadataQuorum) -> None:
        self.services = types.SimpleNamespace(store=QuorumMetadataStore(quorum))
        self.toy = ToyBroker(supported=SUPPORTED)

    def authorize(self, *_action: object) -> bool:
        """No authorizer configured: every action is allowed (Kafka's default)."""
        return True

    async def handle(self, ctx: RequestContext) -> Any:
        if ctx.api_key == DESCRIBE_ZNODES_API_KEY:
            return await describe_znodes.handle(self, ctx.request)  # type: ignore[arg-type]
        return await self.toy.handle(ctx)


async def _serve(quorum: MetadataQuorum, nursery: trio.Nursery) -> int:
    supported = protocol.SupportedApis(
        [*SUPPORTED, protocol.ApiVersionRange(DESCRIBE_ZNODES_API_KEY, 0, 0)]
    )
    server = KafkaServer(_Node(quorum).handle, supported)
    (bound,) = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
    return int(bound.port)


async def test_reads_through_the_listener_match_the_local_replica(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await _fill(quorum)
        port = await _serve(quorum, nursery)
        connection = await KafkaConnection.connect("127.0.0.1", port)
        try:
            ls = await read_znodes(connection, "/brokers/ids", children=True)
            assert format_ls(ls.nodes[0].children) == "[1, 2, 3]\n"
            got = await read_znodes(connection, "/brokers/ids/2", data=True)
            assert got.nodes[0].data == b'{"version":5}'
            stat = await read_znodes(connection, "/controller")
            _data, local_stat = quorum.get_local("/controller")
            assert stat.nodes[0].stat == local_stat
            assert format_stat(stat.nodes[0].stat).splitlines()[0] == (
                f"cZxid = {hex(local_stat.czxid)}"
            )
            with pytest.raises(QuorumCommandError, match="Node does not exist: /nothing"):
                await read_znodes(connection, "/nothing")
            with pytest.raises(QuorumCommandError, match="Invalid path"):
                await read_znodes(connection, "no-slash")
            # Paging: 2 nodes per page must give the same depth-first walk as one page.
            expected = quorum.walk_local("/")
            for page_nodes in (1, 2, 10_000):
                whole = await read_znodes(
                    connection, "/", recursive=True, data=True, page_nodes=page_nodes
                )
                assert [(n.path, n.data, n.stat) for n in whole.nodes] == expected
            sub = await read_znodes(connection, "/brokers", recursive=True, page_nodes=3)
            assert [n.path for n in sub.nodes] == [p for p, _, _ in quorum.walk_local("/brokers")]
            # export: the same document as export.py's, apart from the status fields.
            read = await read_znodes(connection, "/", recursive=True, data=True, sessions=True)
            document = export_remote(read, exported_at_ms=5, status={"source": "x"})
            reference = quorum.read_local(lambda tree: export_tree(tree, exported_at_ms=5))
            assert document["nodes"] == reference["nodes"]
            assert document["sessions"] == reference["sessions"]
            assert document["sessions"][0]["ephemerals"] == [
                "/brokers/ids/1",
                "/brokers/ids/2",
                "/brokers/ids/3",
                "/controller",
            ]
            assert document["status"]["last_zxid"] == reference["status"]["last_zxid"]
        finally:
            await connection.close()
        nursery.cancel_scope.cancel()


async def test_describe_pages_resume_and_bounds(tmp_path: Path) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await _fill(quorum)
        everything = [p for p, _, _ in quorum.walk_local("/")]
        # walk_from resumes after any path, even one deleted in between.
        for index, path in enumerate(everything):
            rest = quorum.read_local(lambda tree, p=path: list(walk_from(tree, "/", p)))
            assert rest == everything[index + 1 :]
        await quorum.delete("/brokers/topics/audit")
        rest = quorum.read_local(lambda tree: list(walk_from(tree, "/", "/brokers/topics/audit")))
        assert rest == everything[everything.index("/brokers/topics/audit") + 1 :]
        # Several paths, one per page: next_path_index walks through them.
        request = DescribeZNodesRequestV0(paths=("/bin", "/nothing", "/controller"), max_nodes=1)
        first = quorum.read_local(lambda tree: describe(tree, request))
        assert [e.path for e in first.entries] == ["/bin"] and first.next_path_index == 1
        whole = quorum.read_local(
            lambda tree: describe(tree, DescribeZNodesRequestV0(paths=request.paths))
        )
        assert [int(e.error_code) for e in whole.entries] == [0, -101, 0]
        assert whole.next_path_index == -1
        # A sync read and the request bounds through the handler.
        node = types.SimpleNamespace(
            services=types.SimpleNamespace(store=QuorumMetadataStore(quorum)),
            authorize=lambda *_action: True,
        )
        synced = await describe_znodes.handle(
            node,  # type: ignore[arg-type]
            DescribeZNodesRequestV0(paths=("/",), sync=True, include_children=True),
        )
        assert synced.error_code == ErrorCode.none
        assert "brokers" in synced.entries[0].children
        too_many = await describe_znodes.handle(
            node,  # type: ignore[arg-type]
            DescribeZNodesRequestV0(paths=tuple(["/"] * 1001)),
        )
        assert too_many.error_code == ErrorCode.invalid_request
        empty = await describe_znodes.handle(node, DescribeZNodesRequestV0(paths=()))  # type: ignore[arg-type]
        assert empty.error_code == ErrorCode.invalid_request
    no_quorum = types.SimpleNamespace(
        services=types.SimpleNamespace(store=_UnreadableTree()), authorize=lambda *_action: True
    )
    answer = await describe_znodes.handle(no_quorum, DescribeZNodesRequestV0(paths=("/",)))  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.broker_not_available


async def test_a_page_stays_within_the_byte_budget(tmp_path: Path) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await quorum.create("/big")
        for index in range(12):
            await quorum.create(f"/big/n{index:02d}", bytes([index]) * 1_000_000)
        pages, resume, seen = 0, None, []
        while True:
            request = DescribeZNodesRequestV0(
                paths=("/big",), recursive=True, include_data=True, resume_after=resume
            )
            page = quorum.read_local(lambda tree, r=request: describe(tree, r))
            pages += 1
            assert sum(len(e.data or b"") for e in page.entries) <= MAX_RESPONSE_BYTES
            seen += [e.path for e in page.entries]
            if page.next_path_index < 0:
                break
            assert page.next_path_index == 0 and page.next_resume_after == seen[-1]
            resume = page.next_resume_after
        assert pages == 2
        assert seen == ["/big", *(f"/big/n{index:02d}" for index in range(12))]


async def test_a_resume_point_outside_the_walk_is_bad_arguments(tmp_path: Path) -> None:
    config = make_config(1, (Voter(1, "127.0.0.1", 1),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        await quorum.wait_ready()
        await _fill(quorum)
        for resume in ("/controller", "/brokersx", "bad"):
            request = DescribeZNodesRequestV0(
                paths=("/brokers",), recursive=True, resume_after=resume
            )
            page = quorum.read_local(lambda tree, r=request: describe(tree, r))
            assert [(e.path, int(e.error_code)) for e in page.entries] == [("/brokers", -8)]
