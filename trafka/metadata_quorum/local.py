"""An in-memory, single-node stand-in for `RaftTransport` (STYLE.md #7: fakes, not mocks).

    quorum = MetadataQuorum(config, transport_factory=LocalTransport)

gives the real bridge (sessions, watches, retries, chroot, barrier reads) over a tree that
lives only in this process: no pysyncobj, no port, no files. Every proposal is applied at
once, in proposal order, and its callback runs right away; the node is always the leader of
a one-voter quorum. `tests/metadata_quorum/test_bridge.py` runs the same contract tests
against this and the real transport. Use it in unit tests of code built on the quorum.

Not provided: durability (state is lost with the object), several replicas, failures. For
those, use `RaftTransport` (in-process, several instances on loopback work).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from trafka.metadata_quorum.config import QuorumConfig
from trafka.metadata_quorum.port import ApplyListener, ProposalCallback
from trafka.metadata_quorum.status import ReplicaState
from trafka.metadata_quorum.tree import Entry, ZNodeTree

T = TypeVar("T")


class LocalTransport:
    """Same methods as RaftTransport; applies synchronously."""

    def __init__(
        self,
        config: QuorumConfig,
        listener: ApplyListener,
        *,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.lock = threading.Lock()
        self._listener = listener
        self._tree = ZNodeTree()
        self._index = 0
        self._destroyed = False
        if on_ready is not None:
            on_ready()

    def propose(self, entry: Entry, callback: ProposalCallback) -> None:
        if self._destroyed:
            return  # like a stopped node: no answer (the bridge times out)
        with self.lock:
            applied = self._tree.apply(entry)
            self._index += 1
            self._listener(entry, applied)
        callback(applied.result, None)

    def read(self, reader: Callable[[ZNodeTree], T]) -> T:
        with self.lock:
            return reader(self._tree)

    def is_ready(self) -> bool:
        return True

    def is_leader(self) -> bool:
        return not self._destroyed

    def has_quorum(self) -> bool:
        return not self._destroyed

    def leader_id(self) -> int:
        return self.config.node_id

    def term(self) -> int:
        return 1

    def commit_index(self) -> int:
        return self._index

    def last_applied(self) -> int:
        return self._index

    def voter_states(self, now_ms: int) -> tuple[ReplicaState, ...]:
        return (ReplicaState(self.config.node_id, self._index, now_ms, now_ms, "Leader"),)

    def force_snapshot(self) -> None:
        pass

    def sync_to_disk(self) -> None:
        pass

    def destroy(self) -> None:
        self._destroyed = True


def local_transport_factory(
    config: QuorumConfig,
    listener: ApplyListener,
    *,
    on_ready: Callable[[], None] | None = None,
) -> LocalTransport:
    """The factory signature `MetadataQuorum(transport_factory=...)` expects."""
    return LocalTransport(config, listener, on_ready=on_ready)
