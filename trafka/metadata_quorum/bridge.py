"""The trio face of the metadata quorum: the only place pysyncobj's thread meets trio.

Pattern (PLATFORM.md §2): the transport is constructed on the trio thread; a write is
proposed with a callback that runs on pysyncobj's tick thread and only hands the outcome to
trio with `TrioToken.run_sync_soon`; applies call `_on_applied` on the tick thread (under the
transport's lock), which feeds the local `WatchManager` and hands fired events to trio the
same way, in log order. Nothing here blocks the tick thread or holds a trio worker thread.

Writes (`create`, `delete`, `set_data`, `multi`) carry a request id. A timeout, a leader
change or any pysyncobj failure reason means "outcome unknown": the same entry (same
request id) is proposed again until `controller.quorum.request.timeout.ms` runs out, and the
tree applies it at most once (the retry returns the first result). Only then does the caller
see `OperationTimeoutError` (outcome still unknown).

Reads: `get_local`/`children_local`/`exists_local` read the local replica (possibly stale,
like a ZooKeeper follower read). `get`/`children`/`exists` first commit a `Noop` barrier, so
they see every write committed before the call (linearizable up to pysyncobj's own caveats).
`watch=True` registers a one-shot watch atomically with the read.

Sessions: `session_id` is opened at start (owner `node-<id>`, timeout
`broker.session.timeout.ms`) and kept alive by a heartbeat task every
`broker.heartbeat.interval.ms`. When the session is found expired (the apply of an
`ExpireSession` entry, or a heartbeat answered SessionExpired, e.g. after SIGSTOP/SIGCONT),
a new session is opened and `SessionEvent(EXPIRED, old, new)` is put on the event channel:
the owner must re-create its ephemeral nodes. On the quorum leader, an expiry task decides
expiries (sessions.SessionTracker) and commits them.

Events: `events()` is a bounded trio channel of `WatchEvent | SessionEvent`. If it is full,
events are dropped and `SessionEvent(EVENTS_LOST)` is delivered as soon as there is room:
the consumer must re-read what it watches and re-register its watches.

Not implemented: read-only mode when the quorum is lost (reads keep answering from the
local replica), per-watcher callbacks (one event stream per node), ACLs.
"""

from __future__ import annotations

import enum
import itertools
import logging
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import trio

from trafka.metadata_quorum.config import QuorumConfig
from trafka.metadata_quorum.port import ProposalFailure, QuorumTransport
from trafka.metadata_quorum.sessions import SessionTracker
from trafka.metadata_quorum.status import QuorumStatus, ReplicaState
from trafka.metadata_quorum.transport import RaftTransport
from trafka.metadata_quorum.tree import (
    MAX_DATA_BYTES,
    MAX_ENTRY_BYTES,
    Applied,
    BadArgumentsError,
    Check,
    Chroot,
    CloseSession,
    Create,
    CreateResult,
    Delete,
    Entry,
    ErrorCode,
    ErrorResult,
    ExpireSession,
    Heartbeat,
    Multi,
    MultiOp,
    MultiResult,
    Noop,
    OpenSession,
    Operation,
    OperationTimeoutError,
    OpResult,
    Result,
    SessionResult,
    SetData,
    SetDataResult,
    Stat,
    WatchEvent,
    WatchManager,
    ZNodeTree,
    ZooKeeperError,
    entry_size,
    error_for,
    oversized_data,
)
from trafka.metadata_quorum.znodes import CLUSTER_ID, ClusterId, ZNodeFormatError

logger = logging.getLogger(__name__)
T = TypeVar("T")
_PYTHON_SWITCH_INTERVAL_S = 0.005
MAX_IN_FLIGHT_PROPOSALS = 1000


class SessionEventKind(enum.Enum):
    EXPIRED = "expired"  # the session expired; a new one is open: re-create ephemerals
    EVENTS_LOST = "events_lost"  # the event channel overflowed: re-read and re-watch


@dataclass(frozen=True, slots=True)
class SessionEvent:
    kind: SessionEventKind
    old_session_id: int
    new_session_id: int


QuorumEvent = WatchEvent | SessionEvent


class MultiFailedError(ZooKeeperError):
    """A multi failed as a whole; `error` is the failing op's error, `results` all results."""

    def __init__(self, index: int, error: ZooKeeperError, results: tuple[OpResult, ...]) -> None:
        self.code = error.code
        self.index = index
        self.error = error
        self.results = results
        super().__init__(error.path, f"multi op {index} failed")


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class MetadataQuorum:
    """One node's handle on the replicated tree. Create it inside `trio.run`."""

    def __init__(
        self,
        config: QuorumConfig,
        *,
        transport_factory: Callable[..., QuorumTransport] = RaftTransport,
    ) -> None:
        self.config = config
        self.commit_observer: Callable[[float], None] | None = None
        """Told each committed proposal's latency in ms (propose to applied result): the
        node's metrics (`kafka_server_raft_metrics_commit_latency_ms`)."""
        self._chroot = Chroot(config.chroot)
        self._token = trio.lowlevel.current_trio_token()
        self._watches = WatchManager()
        self._send_events, self._receive_events = trio.open_memory_channel[QuorumEvent](
            config.watch_queue_size
        )
        self._events_lost = False
        self._raft_ready = trio.Event()
        self._session_ready = trio.Event()
        self._chroot_ready = trio.Event()
        self._session_lost = trio.Event()
        self._session_id = 0
        self._last_zxid: int | None = None
        self._requests = itertools.count(1)
        self._request_prefix = f"{config.owner}:{secrets.token_hex(4)}:"
        self._closed = False
        # Bound on proposals waiting for an answer (pysyncobj's own queue holds 10,000).
        self._in_flight = trio.Semaphore(MAX_IN_FLIGHT_PROPOSALS)
        if config.gil_switch_interval_s and sys.getswitchinterval() == _PYTHON_SWITCH_INTERVAL_S:
            sys.setswitchinterval(config.gil_switch_interval_s)
        # Last: the tick thread starts here and may apply journal entries at once.
        self._transport = transport_factory(
            config, self._on_applied, on_ready=self._on_raft_ready_thread
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the session keeper and the leader's expiry task."""
        nursery.start_soon(self._watch_readiness)
        nursery.start_soon(self._ensure_chroot)
        if self.config.open_session:
            nursery.start_soon(self._session_keeper)
        else:
            self._session_ready.set()
        nursery.start_soon(self._expiry_loop)

    async def wait_ready(self) -> None:
        """Until the local replica caught up with the leader and the session (if any) is open."""
        await self._raft_ready.wait()
        await self._chroot_ready.wait()
        await self._session_ready.wait()

    async def _ensure_chroot(self) -> None:
        """Create the chroot path (and its parents) if missing, as Kafka does at startup."""
        await self._raft_ready.wait()
        prefix = self._chroot.prefix
        parts = [p for p in prefix.split("/") if p]
        for depth in range(1, len(parts) + 1):
            path = "/" + "/".join(parts[:depth])
            if self.exists_local_server(path) is not None:
                continue
            result = await self._submit(Create(path), use_session=False)
            if isinstance(result, ErrorResult) and result.code != ErrorCode.NODE_EXISTS:
                raise error_for(result.code, path)
        self._chroot_ready.set()

    async def aclose(self) -> None:
        """Close the session (its ephemerals vanish now, not after the timeout), then stop."""
        if self._closed:
            return
        self._closed = True
        if self._session_id and self._transport.is_ready():
            with trio.move_on_after(1.0):
                try:
                    await self._submit(CloseSession(self._session_id), use_session=False)
                except ZooKeeperError:
                    pass
        self._transport.destroy()
        await self._send_events.aclose()

    # -- tick thread -> trio ------------------------------------------------------------

    def _on_raft_ready_thread(self) -> None:
        self._run_in_trio(self._raft_ready.set)

    def _run_in_trio(self, function: Callable[[], None]) -> None:
        try:
            self._token.run_sync_soon(function)
        except trio.RunFinishedError:
            pass

    def _on_applied(self, entry: Entry, applied: Applied) -> None:
        """Tick thread, under the transport lock: fire watches in log order."""
        fired: list[WatchEvent] = []
        if self._last_zxid is not None and applied.zxid != self._last_zxid + 1:
            fired += self._watches.fire_all(applied.zxid)  # a snapshot skipped changes
        self._last_zxid = applied.zxid
        if applied.changes:
            fired += self._watches.trigger(applied.zxid, applied.changes)
        session_id = self._session_id
        lost = session_id != 0 and any(s.session_id == session_id for s in applied.ended_sessions)
        if fired or lost:
            self._run_in_trio(lambda: self._deliver(fired, session_id if lost else 0))

    def _deliver(self, fired: list[WatchEvent], lost_session_id: int) -> None:
        """Trio thread. Must not raise (an exception here would crash trio's run loop)."""
        for event in fired:
            path = self._chroot.to_client(event.path)
            if path is not None:
                self._emit(WatchEvent(event.type, path, event.zxid))
        if lost_session_id and lost_session_id == self._session_id:
            self._session_lost.set()

    def _emit(self, event: QuorumEvent) -> None:
        try:
            if self._events_lost:
                self._send_events.send_nowait(
                    SessionEvent(SessionEventKind.EVENTS_LOST, self._session_id, self._session_id)
                )
                self._events_lost = False
            self._send_events.send_nowait(event)
        except trio.WouldBlock:
            self._events_lost = True
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    # -- proposing ----------------------------------------------------------------------

    def _next_request_id(self) -> str:
        return f"{self._request_prefix}{next(self._requests)}"

    async def _propose_once(
        self, entry: Entry, timeout_s: float
    ) -> tuple[Result | None, ProposalFailure | None, bool]:
        done = trio.Event()
        box: list[tuple[Result | None, ProposalFailure | None]] = []

        def deliver(result: Result | None, failure: ProposalFailure | None) -> None:
            box.append((result, failure))
            done.set()

        def callback(result: Result | None, failure: ProposalFailure | None) -> None:
            self._run_in_trio(lambda: deliver(result, failure))

        with trio.move_on_after(timeout_s):
            async with self._in_flight:
                proposed = time.perf_counter()
                self._transport.propose(entry, callback)
                await done.wait()
                observer = self.commit_observer
                if observer is not None and box and box[0][1] is None:
                    observer((time.perf_counter() - proposed) * 1000)
        if not box:
            return None, None, True
        return box[0][0], box[0][1], False

    async def _submit(
        self,
        op: Operation,
        *,
        use_session: bool = True,
        request_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> Result:
        """Propose until a result comes back; every failure is retried with the same id."""
        entry = Entry(
            request_id if request_id is not None else self._next_request_id(),
            self._session_id if use_session else 0,
            _wall_ms(),
            op,
        )
        # Refused before the log, not at the apply: a client's oversized value (a config, an
        # ACL) never costs a replicated entry, and the transport can replicate every entry.
        oversized = oversized_data(op)
        if oversized is not None:
            raise BadArgumentsError(oversized, f"data over {MAX_DATA_BYTES} bytes")
        size = entry_size(entry)
        if size > MAX_ENTRY_BYTES:
            raise BadArgumentsError("", f"entry of {size} bytes over {MAX_ENTRY_BYTES}")
        budget_s = (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms) / 1000
        deadline = trio.current_time() + budget_s
        backoff_s = 0.01
        while True:
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                raise OperationTimeoutError("", "outcome unknown")
            attempt_s = min(self.config.attempt_timeout_ms / 1000, remaining)
            result, failure, timed_out = await self._propose_once(entry, attempt_s)
            if result is not None and failure is None:
                return result
            logger.debug("proposal %s: %s", entry.request_id, failure or "timeout")
            if not timed_out:
                await trio.sleep(min(backoff_s, max(0.0, deadline - trio.current_time())))
                backoff_s = min(backoff_s * 2, 0.2)

    async def _write(self, op: Operation) -> Result:
        result = await self._submit(op)
        if isinstance(result, ErrorResult):
            raise error_for(result.code, self._client_path(result.path))
        return result

    # -- paths --------------------------------------------------------------------------

    def _server_path(self, path: str) -> str:
        return self._chroot.to_server(path)

    def _client_path(self, path: str) -> str:
        if not path:
            return path
        client = self._chroot.to_client(path)
        return path if client is None else client

    def _server_op(self, op: MultiOp) -> MultiOp:
        if isinstance(op, Create):
            return Create(self._server_path(op.path), op.data, op.ephemeral, op.sequential)
        if isinstance(op, Delete):
            return Delete(self._server_path(op.path), op.version)
        if isinstance(op, SetData):
            return SetData(self._server_path(op.path), op.data, op.version)
        return Check(self._server_path(op.path), op.version)

    def _client_result(self, result: OpResult) -> OpResult:
        if isinstance(result, CreateResult):
            return CreateResult(self._client_path(result.path))
        if isinstance(result, ErrorResult):
            return ErrorResult(result.code, self._client_path(result.path))
        return result

    # -- public writes ------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._session_id

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> str:
        """Create a node; returns its path (with the sequence suffix when sequential)."""
        result = await self._write(Create(self._server_path(path), data, ephemeral, sequential))
        assert isinstance(result, CreateResult), result
        return self._client_path(result.path)

    async def delete(self, path: str, version: int = -1) -> None:
        await self._write(Delete(self._server_path(path), version))

    async def set_data(self, path: str, data: bytes, version: int = -1) -> Stat:
        result = await self._write(SetData(self._server_path(path), data, version))
        assert isinstance(result, SetDataResult), result
        return result.stat

    async def multi(self, ops: Sequence[MultiOp]) -> list[OpResult]:
        """All or nothing. Raises MultiFailedError (with every op's result) on failure."""
        result = await self._write(Multi(tuple(self._server_op(op) for op in ops)))
        assert isinstance(result, MultiResult), result
        results = tuple(self._client_result(r) for r in result.results)
        if result.error_index >= 0:
            failed = results[result.error_index]
            assert isinstance(failed, ErrorResult)
            raise MultiFailedError(result.error_index, error_for(failed.code, failed.path), results)
        return list(results)

    async def create_recursive(self, path: str, data: bytes = b"") -> None:
        """Create `path` and any missing parents (persistent); NodeExists is not an error."""
        parts = [p for p in path.split("/") if p]
        for depth in range(1, len(parts) + 1):
            current = "/" + "/".join(parts[:depth])
            try:
                await self.create(current, data if depth == len(parts) else b"")
            except ZooKeeperError as error:
                if error.code != ErrorCode.NODE_EXISTS:
                    raise

    async def sync(self) -> int:
        """A write barrier: afterwards local reads see every write committed before the call."""
        # No request id: a barrier applied twice is harmless, and it keeps the window free.
        result = await self._submit(Noop(), use_session=False, request_id="")
        return getattr(result, "zxid", 0)

    # -- reads --------------------------------------------------------------------------

    def _read(self, reader: Callable[[ZNodeTree], T]) -> T:
        return self._transport.read(reader)

    def exists_local_server(self, server_path: str) -> Stat | None:
        """exists() on a server path (outside the chroot), no watch."""
        return self._read(lambda tree: tree.exists(server_path))

    def get_local(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        server = self._server_path(path)

        def reader(tree: ZNodeTree) -> tuple[bytes, Stat]:
            found = tree.get(server)
            if watch:
                self._watches.add_data_watch(server)
            return found

        return self._read(reader)

    def exists_local(self, path: str, *, watch: bool = False) -> Stat | None:
        server = self._server_path(path)

        def reader(tree: ZNodeTree) -> Stat | None:
            stat = tree.exists(server)
            if watch:
                self._watches.add_data_watch(server)
            return stat

        return self._read(reader)

    def children_local(self, path: str, *, watch: bool = False) -> list[str]:
        server = self._server_path(path)

        def reader(tree: ZNodeTree) -> list[str]:
            names = tree.children(server)
            if watch:
                self._watches.add_child_watch(server)
            return names

        return self._read(reader)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        await self.sync()
        return self.get_local(path, watch=watch)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        await self.sync()
        return self.exists_local(path, watch=watch)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        await self.sync()
        return self.children_local(path, watch=watch)

    def walk_local(self, path: str = "/") -> list[tuple[str, bytes, Stat]]:
        """Every node under `path` (client paths), depth first, from the local replica."""
        server = self._server_path(path)
        nodes = self._read(lambda tree: list(tree.walk(server)))
        return [(self._client_path(p), d, s) for p, d, s in nodes]

    def read_local(self, reader: Callable[[ZNodeTree], T]) -> T:
        """Run `reader` on the local replica, atomically w.r.t. applies. Do not keep the tree."""
        return self._read(reader)

    def force_snapshot(self) -> None:
        """Write a snapshot (`quorum.dump`) and compact the journal soon (pysyncobj's tick)."""
        self._transport.force_snapshot()

    def events(self) -> trio.MemoryReceiveChannel[QuorumEvent]:
        """The node's one stream of fired watches and session events (bounded)."""
        return self._receive_events

    def watch_events(self) -> trio.MemoryReceiveChannel[QuorumEvent]:
        """The same channel as `events()` (the name the issue uses)."""
        return self._receive_events

    def last_zxid(self) -> int:
        return self._read(lambda tree: tree.last_zxid)

    def tree_digest(self) -> str:
        return self._read(lambda tree: tree.digest())

    # -- status -------------------------------------------------------------------------

    def status(self) -> QuorumStatus:
        now_ms = _wall_ms()
        voters = self._transport.voter_states(now_ms)
        voter_ids = {v.node_id for v in self.config.voters}

        def reader(tree: ZNodeTree) -> tuple[str, list[int]]:
            cluster_id = ""
            try:
                cluster_id = ClusterId.from_json(tree.get(CLUSTER_ID)[0]).cluster_id
            except (ZooKeeperError, ZNodeFormatError):
                pass
            owners: list[int] = []
            for session in tree.sessions():
                name = session.owner
                if name.startswith("node-") and name[5:].isdigit():
                    owners.append(int(name[5:]))
            return cluster_id, owners

        cluster_id, owners = self._read(reader)
        observers = tuple(
            ReplicaState(node_id, -1, -1, -1, "Observer")
            for node_id in sorted(set(owners) - voter_ids)
        )
        return QuorumStatus(
            cluster_id=cluster_id,
            node_id=self.config.node_id,
            leader_id=self._transport.leader_id(),
            leader_epoch=self._transport.term(),
            high_watermark=self._transport.commit_index(),
            last_applied=self._transport.last_applied(),
            is_leader=self._transport.is_leader(),
            has_quorum=self._transport.has_quorum(),
            voters=voters,
            observers=observers,
            now_ms=now_ms,
        )

    # -- background tasks -----------------------------------------------------------------

    async def _watch_readiness(self) -> None:
        """onReady may never fire on a restarted single voter: poll isReady as well, and say
        why we are still waiting every few seconds (unbound port, no leader)."""
        started = trio.current_time()
        next_warning = started + 5.0
        while not self._raft_ready.is_set():
            if self._transport.is_ready():
                self._raft_ready.set()
                return
            now = trio.current_time()
            if now >= next_warning:
                next_warning = now + 5.0
                bound = getattr(self._transport, "is_bound", lambda: True)()
                me = self.config.self_voter
                logger.warning(
                    "metadata quorum not ready after %.0f s: %s, leader %s, voters %s",
                    now - started,
                    (f"port {me.address} bound" if bound else f"port {me.address} NOT bound")
                    if me
                    else "learner",
                    self._transport.leader_id(),
                    ",".join(f"{v.node_id}@{v.address}" for v in self.config.voters),
                )
            await trio.sleep(0.02)

    async def _open_session(self) -> int:
        while True:
            try:
                result = await self._submit(
                    OpenSession(self.config.session_timeout_ms, self.config.owner),
                    use_session=False,
                )
            except OperationTimeoutError:
                continue
            if isinstance(result, SessionResult):
                return result.session_id
            logger.warning("opening a quorum session failed: %s", result)
            await trio.sleep(0.1)

    async def _session_keeper(self) -> None:
        await self._raft_ready.wait()
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            old = self._session_id
            self._session_lost = trio.Event()
            self._session_id = await self._open_session()
            if old:
                self._emit(SessionEvent(SessionEventKind.EXPIRED, old, self._session_id))
            self._session_ready.set()
            while not self._session_lost.is_set():
                with trio.move_on_after(interval_s):
                    await self._session_lost.wait()
                if self._session_lost.is_set():
                    break
                try:
                    result = await self._submit(
                        Heartbeat(self._session_id),
                        use_session=False,
                        request_id="",
                        timeout_ms=self.config.heartbeat_interval_ms,
                    )
                except OperationTimeoutError:
                    continue  # no leader right now: keep trying; the leader decides expiry
                if isinstance(result, ErrorResult) and result.code == ErrorCode.SESSION_EXPIRED:
                    break
            logger.warning("quorum session %d expired; opening a new one", self._session_id)

    async def _expiry_loop(self) -> None:
        """On the leader only: commit ExpireSession for sessions past their deadline."""
        timeout_ms = self.config.session_timeout_ms
        interval_s = min(0.1, timeout_ms / 10_000)
        tracker = SessionTracker(pause_threshold_ms=max(500, timeout_ms // 2))
        # A new leader gives every session at least this long to reach it with a heartbeat.
        grace_ms = max(2 * self.config.heartbeat_interval_ms, self.config.election_timeout_ms)
        was_leader = False
        async with trio.open_nursery() as nursery:
            while True:
                await trio.sleep(interval_s)
                leader = self._transport.is_leader() and self._transport.has_quorum()
                sessions = self._read(lambda tree: tree.sessions())
                now_ms = _monotonic_ms()
                if not leader:
                    tracker.observe(sessions, now_ms)
                    was_leader = False
                    continue
                if not was_leader:
                    tracker.take_over(sessions, now_ms, grace_ms)
                    was_leader = True
                    logger.info("quorum leader: tracking %d session(s)", len(sessions))
                    continue
                for decision in tracker.expired(sessions, now_ms):
                    owner = next(
                        (s.owner for s in sessions if s.session_id == decision.session_id), ""
                    )
                    logger.info(
                        "expiring session %d (%s): no heartbeat for %d ms",
                        decision.session_id,
                        owner,
                        timeout_ms,
                    )
                    nursery.start_soon(
                        self._propose_expiry,
                        tracker,
                        decision.session_id,
                        decision.last_heartbeat_zxid,
                    )

    async def _propose_expiry(
        self, tracker: SessionTracker, session_id: int, last_heartbeat_zxid: int
    ) -> None:
        try:
            await self._submit(
                ExpireSession(session_id, last_heartbeat_zxid),
                use_session=False,
                request_id=f"expire:{session_id}:{last_heartbeat_zxid}",
                timeout_ms=self.config.attempt_timeout_ms,
            )
        except OperationTimeoutError:
            tracker.forget_proposals()


@asynccontextmanager
async def open_metadata_quorum(
    config: QuorumConfig,
    *,
    transport_factory: Callable[..., QuorumTransport] = RaftTransport,
) -> AsyncIterator[MetadataQuorum]:
    """Start a node's quorum member (voter or learner); stop it (session closed) on exit."""
    quorum = MetadataQuorum(config, transport_factory=transport_factory)
    try:
        async with trio.open_nursery() as nursery:
            await quorum.start(nursery)
            yield quorum
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await quorum.aclose()
