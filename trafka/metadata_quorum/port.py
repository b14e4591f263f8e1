"""The transport port: what the bridge needs from a replicated log (no pysyncobj here).

Two implementations: `transport.RaftTransport` (pysyncobj) and `local.LocalTransport` (in
memory, one node, for tests). `tests/metadata_quorum/test_bridge.py` runs one contract
suite against both.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from trafka.metadata_quorum.status import ReplicaState
from trafka.metadata_quorum.tree import Applied, Entry, Result, ZNodeTree

T = TypeVar("T")


class ProposalFailure(enum.Enum):
    """Why a proposal got no result (pysyncobj's FAIL_REASON values). All mean: unknown
    outcome, retry with the same request id."""

    QUEUE_FULL = 1
    MISSING_LEADER = 2
    DISCARDED = 3
    NOT_LEADER = 4
    LEADER_CHANGED = 5
    REQUEST_DENIED = 6
    UNKNOWN_OUTCOME = 7


ApplyListener = Callable[[Entry, Applied], None]
ProposalCallback = Callable[[Result | None, ProposalFailure | None], None]


class QuorumTransport(Protocol):
    """A replicated log of `Entry` applied to a local `ZNodeTree` under `lock`."""

    lock: threading.Lock

    def propose(self, entry: Entry, callback: ProposalCallback) -> None: ...

    def read(self, reader: Callable[[ZNodeTree], T]) -> T: ...

    def is_ready(self) -> bool: ...

    def is_leader(self) -> bool: ...

    def has_quorum(self) -> bool: ...

    def leader_id(self) -> int: ...

    def term(self) -> int: ...

    def commit_index(self) -> int: ...

    def last_applied(self) -> int: ...

    def voter_states(self, now_ms: int) -> tuple[ReplicaState, ...]: ...

    def force_snapshot(self) -> None: ...

    def destroy(self) -> None: ...
