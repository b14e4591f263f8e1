"""The node's port to the metadata tree: a few ZooKeeper-style calls on byte payloads.

Broker code (topic manager, registration, handlers) talks to the znode tree only through
`MetadataStore`, so it is independent of how the tree is replicated:

* `QuorumMetadataStore` wraps the Raft-replicated `trafka.metadata_quorum` tree (the real
  one; every node of a cluster sees the same tree).
* `FileMetadataStore` is the in-process fake with the same contract: persistent nodes kept in
  one JSON file written atomically (tmp + fsync + rename) on every change, ephemeral nodes
  in memory only. It is used by unit tests and by a single node when the quorum package is
  not available; it is never shared between processes.

Paths and payloads are Kafka's ZooKeeper layouts (`/brokers/ids/<id>`, `/brokers/topics/<t>`,
`/brokers/topics/<t>/partitions/<p>/state`, `/config/topics/<t>`, `/cluster/id`, ...).

Not implemented here: watches (the broker re-reads after its own writes; the controller
engineer adds watch-driven refresh on top of the quorum's watch channel), sequential nodes.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Protocol


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

    async def put(self, path: str, data: bytes) -> None:
        """Create or replace (persistent)."""

    async def delete_recursive(self, path: str) -> None:
        """Delete `path` and everything below it; no error if absent."""

    async def close(self) -> None: ...


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


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

    async def close(self) -> None:
        self._ephemeral.clear()


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def json_value(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data)
