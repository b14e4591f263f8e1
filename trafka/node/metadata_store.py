"""The node's one port to the metadata tree (`MetadataStore`), and its implementation.

Every shell of a node (broker, topic admin, config changes, controller, replica manager,
handlers) reaches the znode tree through `MetadataStore` and nothing else: no shell holds
the quorum itself. The port has three parts:

* **Writes** through the quorum (committed when they return): `create`, `set_data`,
  `create_sequential`, `put`, `delete`, `delete_recursive`, `create_all`, `create_recursive`,
  `multi` (all or nothing) and `update` (a conditional read-modify-write).
* **Reads of the local replica** (possibly stale, like a ZooKeeper follower read; `sync`
  first for a linearizable view): `get`/`children` (None / [] when absent), and
  `get_local`/`exists_local`/`children_local`, which can arm a one-shot watch atomically with
  the read (the `LocalTreeReads` part the controller's tree reads use), `walk_local` and
  `read_local`.
* **The replica itself**: `events()` (fired watches and session events), `status()` (Raft
  status for DescribeQuorum), `close()`.

Errors are the tree's (`trafka.metadata_quorum.tree`): `NodeExists` and `NoNode` below are
its `NodeExistsError` and `NoNodeError`; a failed `multi` raises the bridge's
`MultiFailedError`; a write whose outcome stays unknown raises `OperationTimeoutError`.

One implementation: `QuorumMetadataStore` over the node's `MetadataQuorum`. With the quorum's
`RaftTransport` it is the real, replicated tree; with `LocalTransport` it is the in-memory
tree of unit tests (`memory_store`): the same bridge, sessions, watches and chroot, applied
at once in one process. `tests/node/test_metadata_store.py` runs one contract suite against
both.

Paths and payloads are Kafka's ZooKeeper layouts (`/brokers/ids/<id>`, `/brokers/topics/<t>`,
`/brokers/topics/<t>/partitions/<p>/state`, `/config/topics/<t>`, `/cluster/id`, ...).
Sequential nodes carry the config change notifications
(`/config/changes/config_change_<seq>`, `trafka.node.config.changes`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from trafka.metadata_quorum.bridge import MetadataQuorum, MultiFailedError, QuorumEvent
from trafka.metadata_quorum.config import QuorumConfig, Voter, config_from_properties
from trafka.metadata_quorum.local import local_transport_factory
from trafka.metadata_quorum.status import QuorumStatus
from trafka.metadata_quorum.tree import (
    BadArgumentsError,
    BadVersionError,
    Create,
    Delete,
    ErrorCode,
    MultiOp,
    NodeExistsError,
    NoNodeError,
    OpResult,
    Stat,
    ZNodeTree,
)

T = TypeVar("T")
log = logging.getLogger("trafka.node.broker")

MAX_UPDATE_ATTEMPTS = 100
"""Bound on retries of a conditional update that keeps losing to concurrent writers."""

NodeExists = NodeExistsError
"""create() on an existing path."""
NoNode = NoNodeError
"""A path that does not exist."""


class LocalTreeReads(Protocol):
    """Reads of the local replica that may arm a one-shot watch (ZooKeeper's `watch=true`).
    `get_local` and `children_local` raise `NoNode` for a missing path."""

    def get_local(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]: ...

    def exists_local(self, path: str, *, watch: bool = False) -> Stat | None: ...

    def children_local(self, path: str, *, watch: bool = False) -> list[str]: ...


class MetadataStore(LocalTreeReads, Protocol):
    """The node's port to the tree (see the module docstring)."""

    async def get(self, path: str) -> bytes | None:
        """The data of `path` in the local replica; None when absent."""

    async def children(self, path: str) -> list[str]:
        """The sorted children of `path` in the local replica; [] when absent."""

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        """Create `path` (and missing parents, empty); NodeExists if it exists."""

    async def set_data(self, path: str, data: bytes) -> None:
        """Replace the data of an existing path (NoNode otherwise)."""

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create a persistent sequential node `<prefix><10 digits>` (ZooKeeper's
        PERSISTENT_SEQUENTIAL; missing parents are created); returns its path."""

    async def put(self, path: str, data: bytes) -> None:
        """Create or replace (persistent)."""

    async def delete(self, path: str) -> None:
        """Delete a node without children (NoNode if absent)."""

    async def delete_recursive(self, path: str) -> None:
        """Delete `path` and everything below it; no error if absent."""

    async def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        """Create persistent nodes atomically, in order (parents first; the first node's
        parent must exist). NodeExists if any exists: then nothing was created."""

    async def create_recursive(self, path: str) -> None:
        """Create `path` and its missing parents, empty; no error if it exists."""

    async def multi(self, ops: Sequence[MultiOp]) -> list[OpResult]:
        """All or nothing; `MultiFailedError` (with every op's result) on failure."""

    async def sync(self) -> None:
        """Make later reads see every write committed before this call."""

    async def update(self, path: str, change: Callable[[bytes | None], bytes]) -> bytes:
        """Read-modify-write that no concurrent writer can interleave with (a conditional
        write on the node's version, retried on conflict); returns the data written."""

    def walk_local(self, path: str = "/") -> list[tuple[str, bytes, Stat]]:
        """Every node under `path`, depth first, from the local replica."""

    def read_local(self, reader: Callable[[ZNodeTree], T]) -> T:
        """Run `reader` on the local replica, atomically w.r.t. applies."""

    def events(self) -> trio.MemoryReceiveChannel[QuorumEvent]:
        """The node's one stream of fired watches and session events (bounded)."""

    def status(self) -> QuorumStatus:
        """The quorum's Raft status as this replica sees it."""

    def observe_commits(self, observer: Callable[[float], None]) -> None:
        """Tell `observer` the latency (ms) of each of this node's committed writes."""

    async def close(self) -> None: ...


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


class QuorumMetadataStore:
    """`MetadataStore` over the node's `MetadataQuorum` (Raft-replicated, or in memory over
    `LocalTransport`). Ephemeral nodes belong to the quorum's session and vanish when it
    expires or the node stops."""

    def __init__(self, quorum: MetadataQuorum) -> None:
        self._quorum = quorum

    # ---- local reads ---------------------------------------------------------------------------
    def get_local(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        data, stat = self._quorum.get_local(path, watch=watch)
        return bytes(data), stat

    def exists_local(self, path: str, *, watch: bool = False) -> Stat | None:
        return self._quorum.exists_local(path, watch=watch)

    def children_local(self, path: str, *, watch: bool = False) -> list[str]:
        return list(self._quorum.children_local(path, watch=watch))

    def walk_local(self, path: str = "/") -> list[tuple[str, bytes, Stat]]:
        return self._quorum.walk_local(path)

    def read_local(self, reader: Callable[[ZNodeTree], T]) -> T:
        return self._quorum.read_local(reader)

    async def get(self, path: str) -> bytes | None:
        # A path that cannot exist (a client's topic name such as "a/b" or "..") holds
        # nothing: the fuzzer found it raising out of the DescribeConfigs and LeaderAndIsr
        # handlers (issue 12, item 8).
        try:
            data, _ = self._quorum.get_local(path)
        except (NoNodeError, BadArgumentsError):
            return None
        return bytes(data)

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(self._quorum.children_local(path))
        except NoNodeError:
            return []

    # ---- writes --------------------------------------------------------------------------------
    async def sync(self) -> None:
        await self._quorum.sync()

    async def update(self, path: str, change: Callable[[bytes | None], bytes]) -> bytes:
        for _ in range(MAX_UPDATE_ATTEMPTS):
            await self._quorum.sync()
            try:
                current, stat = self._quorum.get_local(path)
            except NoNodeError:
                new = change(None)
                try:
                    await self.create(path, new)
                except NodeExistsError:
                    continue
                return new
            new = change(bytes(current))
            try:
                await self._quorum.set_data(path, new, stat.version)
            except (BadVersionError, NoNodeError, NodeExistsError):
                continue
            return new
        raise RuntimeError(f"{path}: too many concurrent updates")

    async def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        if not nodes:
            return
        parent = _parent(nodes[0][0])
        if parent != "/":
            await self._quorum.create_recursive(parent)
        try:
            await self._quorum.multi([Create(path, data) for path, data in nodes])
        except MultiFailedError as error:
            if error.code == ErrorCode.NODE_EXISTS:
                raise NodeExistsError(error.error.path) from None
            raise

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        parent = _parent(path)
        if parent != "/":
            await self._quorum.create_recursive(parent)
        await self._quorum.create(path, data, ephemeral=ephemeral)

    async def create_recursive(self, path: str) -> None:
        await self._quorum.create_recursive(path)

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        parent = _parent(prefix)
        if parent != "/" and self._quorum.exists_local(parent) is None:
            await self._quorum.create_recursive(parent)
        return str(await self._quorum.create(prefix, data, sequential=True))

    async def set_data(self, path: str, data: bytes) -> None:
        await self._quorum.set_data(path, data)

    async def put(self, path: str, data: bytes) -> None:
        try:
            await self.set_data(path, data)
        except NoNodeError:
            try:
                await self.create(path, data)
            except NodeExistsError:
                await self.set_data(path, data)

    async def delete(self, path: str) -> None:
        await self._quorum.delete(path)

    async def delete_recursive(self, path: str) -> None:
        """One atomic multi deleting the subtree, deepest nodes first."""
        await self._quorum.sync()
        try:
            nodes = self._quorum.walk_local(path)
        except NoNodeError:
            return
        paths = sorted((p for p, _, _ in nodes), key=lambda p: (-p.count("/"), p))
        if paths:
            await self._quorum.multi([Delete(p) for p in paths])

    async def multi(self, ops: Sequence[MultiOp]) -> list[OpResult]:
        return await self._quorum.multi(ops)

    # ---- the replica ---------------------------------------------------------------------------
    def events(self) -> trio.MemoryReceiveChannel[QuorumEvent]:
        return self._quorum.events()

    def status(self) -> QuorumStatus:
        return self._quorum.status()

    def observe_commits(self, observer: Callable[[float], None]) -> None:
        self._quorum.commit_observer = observer

    async def close(self) -> None:
        await self._quorum.aclose()


QUORUM_WAIT_LOG_INTERVAL_S = 10.0


async def open_quorum_store(
    properties: Mapping[str, str], node_id: int, data_dir: Path, nursery: trio.Nursery
) -> QuorumMetadataStore:
    """Start a node's replica of the Raft-replicated tree (journal in `data_dir`) in
    `nursery` and wait until it is ready, saying every few seconds what it waits for.
    `QuorumConfigError` for a bad configuration, `OSError` when the replica cannot start."""
    quorum = MetadataQuorum(config_from_properties(properties, node_id=node_id, data_dir=data_dir))
    await quorum.start(nursery)
    while True:
        with trio.move_on_after(QUORUM_WAIT_LOG_INTERVAL_S):
            await quorum.wait_ready()
            return QuorumMetadataStore(quorum)
        log.warning(
            "waiting for the metadata quorum (voters %s)",
            properties.get("controller.quorum.voters"),
        )


@asynccontextmanager
async def memory_store(node_id: int = 1) -> AsyncIterator[QuorumMetadataStore]:
    """The in-memory tree: a `QuorumMetadataStore` over a one-voter quorum on
    `LocalTransport` (no port, no files), started and ready; closed on exit."""
    config = QuorumConfig(
        node_id,
        (Voter(node_id, "127.0.0.1", 0),),
        Path("/nonexistent"),
        "",
        gil_switch_interval_s=None,
    )
    quorum = MetadataQuorum(config, transport_factory=local_transport_factory)
    store = QuorumMetadataStore(quorum)
    try:
        async with trio.open_nursery() as nursery:
            await quorum.start(nursery)
            await quorum.wait_ready()
            yield store
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await store.close()
