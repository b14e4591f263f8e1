"""The node's port to the metadata tree: a few ZooKeeper-style calls on byte payloads.

Broker code (topic manager, registration, handlers) talks to the znode tree only through
`MetadataStore`, so it is independent of how the tree is replicated:

* `QuorumMetadataStore` wraps the Raft-replicated `trafka.metadata_quorum` tree (the real
  one; every node of a cluster sees the same tree).
* `FileMetadataStore` is the in-process fake with the same contract: persistent nodes kept in
  one JSON file written atomically (tmp + fsync + rename) on every change, ephemeral nodes
  in memory only. It is used by unit tests; it is never shared between processes.

Paths and payloads are Kafka's ZooKeeper layouts (`/brokers/ids/<id>`, `/brokers/topics/<t>`,
`/brokers/topics/<t>/partitions/<p>/state`, `/config/topics/<t>`, `/cluster/id`, ...).

Sequential nodes (`create_sequential`) carry the config change notifications
(`/config/changes/config_change_<seq>`, `trafka.node.config.changes`).

Not implemented here: watches (the broker re-reads after its own writes; watch-driven
refresh is built on the quorum's watch channel: the controller, `config_changes`).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

MAX_UPDATE_ATTEMPTS = 100
"""Bound on retries of a conditional update that keeps losing to concurrent writers."""


class NodeExists(Exception):
    """create() on an existing path."""


class NoNode(Exception):
    """A path that does not exist."""


class MetadataStore(Protocol):
    async def get(self, path: str) -> bytes | None: ...

    async def children(self, path: str) -> list[str]: ...

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        """Create `path` (and missing parents, empty); NodeExists if it exists."""

    async def set_data(self, path: str, data: bytes) -> None:
        """Replace the data of an existing path (NoNode otherwise)."""

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create a persistent sequential node `<prefix><10 digits>` (ZooKeeper's
        PERSISTENT_SEQUENTIAL; missing parents are created); returns its path."""

    async def put(self, path: str, data: bytes) -> None:
        """Create or replace (persistent)."""

    async def delete_recursive(self, path: str) -> None:
        """Delete `path` and everything below it; no error if absent."""

    async def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        """Create persistent nodes atomically, in order (parents first; the first node's
        parent must exist). NodeExists if any exists: then nothing was created."""

    async def sync(self) -> None:
        """Make later reads see every write committed before this call."""

    async def update(self, path: str, change: Callable[[bytes | None], bytes]) -> bytes:
        """Read-modify-write that no concurrent writer can interleave with (a conditional
        write on the node's version, retried on conflict); returns the data written."""

    async def close(self) -> None: ...


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


class QuorumMetadataStore:
    """`MetadataStore` over the Raft-replicated tree (`trafka.metadata_quorum`).

    Reads are linearizable (`MetadataQuorum.get` commits a barrier first); ephemeral nodes
    belong to the node's quorum session and vanish when it expires or the node stops.
    """

    def __init__(self, quorum: Any) -> None:
        self.quorum = quorum

    async def sync(self) -> None:
        await self.quorum.sync()

    async def update(self, path: str, change: Callable[[bytes | None], bytes]) -> bytes:
        from trafka.metadata_quorum.tree import (
            BadVersionError,
            NodeExistsError,
            NoNodeError,
        )

        for _ in range(MAX_UPDATE_ATTEMPTS):
            await self.quorum.sync()
            try:
                current, stat = self.quorum.get_local(path)
            except NoNodeError:
                new = change(None)
                try:
                    await self.create(path, new)
                except NodeExists:
                    continue
                return new
            new = change(bytes(current))
            try:
                await self.quorum.set_data(path, new, stat.version)
            except (BadVersionError, NoNodeError, NodeExistsError):
                continue
            return new
        raise RuntimeError(f"{path}: too many concurrent updates")

    async def get(self, path: str) -> bytes | None:
        """A read of the local replica (call `sync` first for a linearizable view). A path
        that cannot exist (a client's topic name such as "a/b" or "..") holds nothing: the
        fuzzer found it raising out of the DescribeConfigs and LeaderAndIsr handlers (issue 12,
        item 8)."""
        from trafka.metadata_quorum.tree import BadArgumentsError, NoNodeError

        try:
            data, _ = self.quorum.get_local(path)
        except (NoNodeError, BadArgumentsError):
            return None
        return bytes(data)

    async def children(self, path: str) -> list[str]:
        from trafka.metadata_quorum.tree import NoNodeError

        try:
            return sorted(self.quorum.children_local(path))
        except NoNodeError:
            return []

    async def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        from trafka.metadata_quorum.bridge import MultiFailedError
        from trafka.metadata_quorum.tree import Create, ErrorCode

        if not nodes:
            return
        parent = _parent(nodes[0][0])
        if parent != "/":
            await self.quorum.create_recursive(parent)
        try:
            await self.quorum.multi([Create(path, data) for path, data in nodes])
        except MultiFailedError as error:
            if error.code == ErrorCode.NODE_EXISTS:
                raise NodeExists(error.error.path) from None
            raise

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        from trafka.metadata_quorum.tree import NodeExistsError

        parent = _parent(path)
        if parent != "/":
            await self.quorum.create_recursive(parent)
        try:
            await self.quorum.create(path, data, ephemeral=ephemeral)
        except NodeExistsError:
            raise NodeExists(path) from None

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        parent = _parent(prefix)
        if parent != "/" and self.quorum.exists_local(parent) is None:
            await self.quorum.create_recursive(parent)
        return str(await self.quorum.create(prefix, data, sequential=True))

    async def set_data(self, path: str, data: bytes) -> None:
        from trafka.metadata_quorum.tree import NoNodeError

        try:
            await self.quorum.set_data(path, data)
        except NoNodeError:
            raise NoNode(path) from None

    async def put(self, path: str, data: bytes) -> None:
        try:
            await self.set_data(path, data)
        except NoNode:
            try:
                await self.create(path, data)
            except NodeExists:
                await self.set_data(path, data)

    async def delete_recursive(self, path: str) -> None:
        """One atomic multi deleting the subtree, deepest nodes first."""
        from trafka.metadata_quorum.tree import Delete, NoNodeError

        await self.quorum.sync()
        try:
            nodes = self.quorum.walk_local(path)
        except NoNodeError:
            return
        paths = sorted((p for p, _, _ in nodes), key=lambda p: (-p.count("/"), p))
        if paths:
            await self.quorum.multi([Delete(p) for p in paths])

    async def close(self) -> None:
        await self.quorum.aclose()


class FileMetadataStore:
    """A single-process tree persisted to one JSON file (see module docstring)."""

    def __init__(self, file_path: Path) -> None:
        self._file_path = file_path
        self._persistent: dict[str, bytes] = {"/": b""}
        self._ephemeral: dict[str, bytes] = {}
        if file_path.exists():
            raw = json.loads(file_path.read_text(encoding="utf-8"))
            for path, encoded in raw.items():
                self._persistent[path] = base64.b64decode(encoded)

    def _all(self) -> dict[str, bytes]:
        return {**self._persistent, **self._ephemeral}

    def _save(self) -> None:
        self._file_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file_path.with_suffix(".tmp")
        payload = {p: base64.b64encode(d).decode() for p, d in self._persistent.items()}
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._file_path)

    async def get(self, path: str) -> bytes | None:
        return self._all().get(path)

    async def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            {p[len(prefix) :].split("/", 1)[0] for p in self._all() if p.startswith(prefix)} - {""}
        )

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        if path in self._all():
            raise NodeExists(path)
        parent = _parent(path)
        while parent not in self._all():
            self._persistent[parent] = b""
            parent = _parent(parent)
        if ephemeral:
            self._ephemeral[path] = data
        else:
            self._persistent[path] = data
            self._save()

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        taken = [p[len(prefix) :] for p in self._all() if p.startswith(prefix)]
        sequence = 1 + max((int(s) for s in taken if s.isdigit()), default=-1)
        path = f"{prefix}{sequence:010d}"
        await self.create(path, data)
        return path

    async def set_data(self, path: str, data: bytes) -> None:
        if path in self._ephemeral:
            self._ephemeral[path] = data
            return
        if path not in self._persistent:
            raise NoNode(path)
        self._persistent[path] = data
        self._save()

    async def put(self, path: str, data: bytes) -> None:
        if path in self._all():
            await self.set_data(path, data)
        else:
            await self.create(path, data)

    async def delete_recursive(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for store in (self._persistent, self._ephemeral):
            for p in [p for p in store if p == path or p.startswith(prefix)]:
                del store[p]
        self._save()

    async def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        existing = self._all()
        for path, _ in nodes:
            if path in existing:
                raise NodeExists(path)
        for path, data in nodes:
            parent = _parent(path)
            while parent not in self._persistent and parent not in self._ephemeral:
                self._persistent[parent] = b""
                parent = _parent(parent)
            self._persistent[path] = data
        self._save()

    async def sync(self) -> None:
        return None

    async def update(self, path: str, change: Callable[[bytes | None], bytes]) -> bytes:
        new = change(await self.get(path))
        await self.put(path, new)
        return new

    async def close(self) -> None:
        self._ephemeral.clear()


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def json_value(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data)
