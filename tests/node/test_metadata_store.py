"""One contract, two MetadataStores: the in-memory tree (`LocalTransport`) and the Raft quorum
(one voter)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.support.ports import free_port
from trafka.metadata_quorum.bridge import MultiFailedError
from trafka.metadata_quorum.tree import Create, CreateResult, SetData
from trafka.node.metadata_store import (
    MetadataStore,
    NodeExists,
    NoNode,
    QuorumMetadataStore,
    memory_store,
)


@pytest.fixture(params=["memory", "quorum"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MetadataStore]:
    if request.param == "memory":
        async with memory_store() as in_memory:
            yield in_memory
        return
    from trafka.metadata_quorum.bridge import MetadataQuorum
    from trafka.metadata_quorum.config import config_from_properties

    config = config_from_properties(
        {"controller.quorum.voters": f"1@127.0.0.1:{free_port()}"},
        node_id=1,
        data_dir=tmp_path / "quorum",
    )
    quorum = MetadataQuorum(config)
    async with trio.open_nursery() as nursery:
        await quorum.start(nursery)
        with trio.fail_after(30):
            await quorum.wait_ready()
        quorum_store = QuorumMetadataStore(quorum)
        try:
            yield quorum_store
        finally:
            # stop the session keeper first: nothing may propose after the transport is gone
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await quorum_store.close()


async def test_create_get_children_put(store: MetadataStore) -> None:
    assert await store.get("/a/b") is None
    assert await store.children("/a") == []
    await store.create("/a/b", b"1")  # parents are created
    assert await store.get("/a/b") == b"1"
    assert await store.children("/a") == ["b"]
    with pytest.raises(NodeExists):
        await store.create("/a/b", b"2")
    await store.put("/a/b", b"3")
    await store.put("/a/c", b"4")
    assert await store.get("/a/b") == b"3"
    assert await store.children("/a") == ["b", "c"]
    with pytest.raises(NoNode):
        await store.set_data("/a/missing", b"x")


async def test_create_all_is_all_or_nothing(store: MetadataStore) -> None:
    await store.create("/t/x", b"")
    await store.create_all([("/t/y", b"1"), ("/t/y/z", b"2")])
    assert await store.get("/t/y/z") == b"2"
    with pytest.raises(NodeExists):
        await store.create_all([("/t/w", b"1"), ("/t/x", b"2")])
    assert await store.get("/t/w") is None


async def test_delete_recursive(store: MetadataStore) -> None:
    await store.create_all([("/d", b""), ("/d/p", b""), ("/d/p/0", b"s")])
    await store.delete_recursive("/d")
    assert await store.get("/d") is None
    assert await store.get("/d/p/0") is None
    await store.delete_recursive("/never")


async def test_update_is_read_modify_write(store: MetadataStore) -> None:
    def bump(current: bytes | None) -> bytes:
        return str(int(current or b"0") + 1).encode()

    assert await store.update("/counter", bump) == b"1"
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(store.update, "/counter", bump)
    assert await store.get("/counter") == b"6"


async def test_ephemeral_nodes_are_readable(store: MetadataStore) -> None:
    await store.create("/brokers/ids/1", b"{}", ephemeral=True)
    assert await store.children("/brokers/ids") == ["1"]


async def test_local_reads_arm_one_shot_watches(store: MetadataStore) -> None:
    await store.create("/w/a", b"1")
    data, stat = store.get_local("/w/a", watch=True)
    assert data == b"1" and stat.version == 0
    assert store.children_local("/w", watch=True) == ["a"]
    assert store.exists_local("/w/b", watch=True) is None
    with pytest.raises(NoNode):
        store.get_local("/w/b")
    with pytest.raises(NoNode):
        store.children_local("/w/b")
    await store.set_data("/w/a", b"2")
    await store.create("/w/b", b"")
    paths = set()
    with trio.fail_after(10):
        while len(paths) < 3:
            event = await store.events().receive()
            paths.add(getattr(event, "path", None))
    assert paths == {"/w/a", "/w", "/w/b"}


async def test_multi_delete_and_walk(store: MetadataStore) -> None:
    await store.create_recursive("/m/x")
    results = await store.multi([Create("/m/x/1", b"a"), SetData("/m/x", b"p")])
    assert results[0] == CreateResult("/m/x/1")
    with pytest.raises(MultiFailedError):
        await store.multi([Create("/m/x/2", b""), Create("/m/x/1", b"")])
    assert store.exists_local("/m/x/2") is None  # all or nothing
    assert [p for p, _, _ in store.walk_local("/m")] == ["/m", "/m/x", "/m/x/1"]
    assert store.read_local(lambda tree: tree.get("/m/x")[0]) == b"p"
    await store.delete("/m/x/1")
    with pytest.raises(NoNode):
        await store.delete("/m/x/1")
    assert store.status().is_leader
