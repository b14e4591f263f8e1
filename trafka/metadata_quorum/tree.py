"""The znode tree: a pure, deterministic state machine with ZooKeeper DataTree semantics.

Every replica of the metadata quorum holds one `ZNodeTree` and feeds it the same `Entry`
values in the same (Raft log) order; `apply` is a pure function of the tree and the entry,
so every replica ends in the same state and produces the same change stream (KR-01..KR-08
of SEEDS.md §19). Nothing here reads a clock, draws randomness, touches a thread or imports
pysyncobj/trio: time arrives as `Entry.now_ms`, stamped once by the proposer.

What the tree provides (ZooKeeper's rules unless said otherwise):

* create: persistent, ephemeral (owned by a session; no children allowed under it:
  NoChildrenForEphemerals), sequential (suffix = the parent's `cversion` before the create,
  formatted `%010d`, exactly as ZooKeeper's PrepRequestProcessor does), ephemeral-sequential.
  The parent must exist (NoNode); the node must not (NodeExists).
* delete with an expected version (-1 = any): BadVersion, NotEmpty, NoNode.
* set_data with an expected version: BadVersion, NoNode. Returns the new Stat.
* check (only inside multi), multi: all-or-nothing; on failure the per-op results are
  `ErrorResult(OK)` before the failing op, the failure itself, and
  `ErrorResult(RUNTIME_INCONSISTENCY)` after it (ZooKeeper's MultiResponse layout).
* Stat: czxid, mzxid, pzxid, ctime_ms, mtime_ms, version, cversion, ephemeral_owner,
  data_length, num_children. The zxid is the count of entries applied so far, so it is the
  same on every replica; Kafka's "broker epoch" is the czxid of `/brokers/ids/<id>`.
* sessions: open (with a timeout and an owner name), heartbeat, close, expire. Closing or
  expiring a session deletes its ephemeral nodes inside the same entry, so every replica sees
  them vanish at the same point of the log (KR-02). Expiry is *decided* outside the tree by
  the quorum leader (`sessions.SessionTracker`) and arrives as an `ExpireSession` entry that
  carries the last heartbeat zxid the leader had seen: if a heartbeat was applied after that,
  the expiry is stale and ignored.
  Deviation from ZooKeeper, on purpose: opening a session with a non-empty `owner` closes
  every older session of the same owner in the same entry (a restarted node `node-7`
  replaces its dead predecessor at once instead of waiting out the old session timeout).
* at-most-once: an entry with a non-empty `request_id` that was applied before returns the
  first result again and changes nothing; the table of remembered ids is FIFO-bounded to
  `REQUEST_ID_WINDOW` units (one per result, plus one per op of a multi's result). A retry
  older than that would apply twice: the bridge retries for seconds, and the window holds
  far more than seconds of writes.
* changes: each apply returns the `Change`s it made (NodeCreated/NodeDeleted/
  NodeDataChanged/NodeChildrenChanged with the path); `WatchManager` turns them into fired
  one-shot watch events. Watches are local to a replica (as in ZooKeeper, where they live on
  the server the client is connected to) and are not part of the replicated state.
* `Chroot` maps client paths to server paths (ZK-02).

Limits: node data <= `MAX_DATA_BYTES` (1 MiB, ZooKeeper's jute.maxbuffer), path depth <=
`MAX_PATH_DEPTH`, path length <= `MAX_PATH_BYTES`, at most `MAX_NODES` nodes,
`MAX_SESSIONS` sessions, `MAX_MULTI_OPS` ops per multi, `MAX_WATCHES` watches per replica,
`MAX_ENTRY_BYTES` per replicated entry (its pickled size: `entry_size`, checked by the bridge
before proposing, ZooKeeper's jute.maxbuffer on a whole request).

Not implemented: ACLs (every node is world-readable/writable; the quorum port is closed by
the cluster secret instead), quotas, containers/TTL nodes, persistent (non one-shot) watches,
`getEphemerals` filtering by prefix, the `aversion` Stat field.
"""

from __future__ import annotations

import enum
import hashlib
import pickle
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NewType

SessionId = NewType("SessionId", int)
Zxid = NewType("Zxid", int)

MAX_DATA_BYTES = 1_048_576
MAX_PATH_DEPTH = 64
MAX_PATH_BYTES = 1024
MAX_NODES = 1_000_000
MAX_SESSIONS = 100_000
MAX_MULTI_OPS = 10_000
MAX_WATCHES = 100_000
REQUEST_ID_WINDOW = 65_536
MAX_ENTRY_BYTES = 8 * 1024 * 1024
"""The largest entry the bridge proposes, pickled with protocol 2 as pysyncobj replicates it
(a `bytes` value pickles to up to twice its length there). The Raft transport sends every
entry below `appendEntriesBatchSizeBytes` (set above this) whole: pysyncobj's chunked
transfer of one larger entry marks the last chunk by the command's length instead of the
pickled entry's, so a follower unpickles a truncated entry (EOFError on its tick thread)
and can never append it (docs/reliability.md, "the quorum's large entries"). The largest
legitimate entries are the controller's multis (up to MAX_MULTI_OPS ops: a 4,000-partition
topic with a 249-character name pickles to 2.5 MB)."""
MAX_REQUEST_ID_BYTES = 128
SESSION_TIMEOUT_MIN_MS = 100
SESSION_TIMEOUT_MAX_MS = 3_600_000
NO_SESSION = SessionId(0)
ANY_VERSION = -1


class ErrorCode(enum.IntEnum):
    """ZooKeeper's KeeperException.Code values."""

    OK = 0
    SYSTEM_ERROR = -1
    RUNTIME_INCONSISTENCY = -2
    DATA_INCONSISTENCY = -3
    CONNECTION_LOSS = -4
    MARSHALLING_ERROR = -5
    UNIMPLEMENTED = -6
    OPERATION_TIMEOUT = -7
    BAD_ARGUMENTS = -8
    NO_NODE = -101
    BAD_VERSION = -103
    NO_CHILDREN_FOR_EPHEMERALS = -108
    NODE_EXISTS = -110
    NOT_EMPTY = -111
    SESSION_EXPIRED = -112


class EventType(enum.IntEnum):
    """ZooKeeper's Watcher.Event.EventType values."""

    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4


# ---------------------------------------------------------------------------------------
# Errors (raised by reads and by the bridge; results travel as ErrorResult data)


class ZooKeeperError(Exception):
    """A ZooKeeper-style failure of one operation on one path."""

    code: ErrorCode = ErrorCode.SYSTEM_ERROR

    def __init__(self, path: str = "", message: str = "") -> None:
        self.path = path
        super().__init__(f"{self.code.name} {path}" + (f": {message}" if message else ""))


class NoNodeError(ZooKeeperError):
    code = ErrorCode.NO_NODE


class NodeExistsError(ZooKeeperError):
    code = ErrorCode.NODE_EXISTS


class BadVersionError(ZooKeeperError):
    code = ErrorCode.BAD_VERSION


class NotEmptyError(ZooKeeperError):
    code = ErrorCode.NOT_EMPTY


class NoChildrenForEphemeralsError(ZooKeeperError):
    code = ErrorCode.NO_CHILDREN_FOR_EPHEMERALS


class SessionExpiredError(ZooKeeperError):
    code = ErrorCode.SESSION_EXPIRED


class BadArgumentsError(ZooKeeperError):
    code = ErrorCode.BAD_ARGUMENTS


class RuntimeInconsistencyError(ZooKeeperError):
    code = ErrorCode.RUNTIME_INCONSISTENCY


class OperationTimeoutError(ZooKeeperError):
    """The outcome is unknown: the write may or may not have been committed."""

    code = ErrorCode.OPERATION_TIMEOUT


class ConnectionLossError(ZooKeeperError):
    code = ErrorCode.CONNECTION_LOSS


class SystemError_(ZooKeeperError):
    code = ErrorCode.SYSTEM_ERROR


_ERROR_CLASSES: dict[ErrorCode, type[ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        NoNodeError,
        NodeExistsError,
        BadVersionError,
        NotEmptyError,
        NoChildrenForEphemeralsError,
        SessionExpiredError,
        BadArgumentsError,
        RuntimeInconsistencyError,
        OperationTimeoutError,
        ConnectionLossError,
        SystemError_,
    )
}


def error_for(code: ErrorCode, path: str = "", message: str = "") -> ZooKeeperError:
    """The exception instance for an error code."""
    return _ERROR_CLASSES.get(code, SystemError_)(path, message)


# ---------------------------------------------------------------------------------------
# Values: Stat, operations, entries, results, changes


@dataclass(frozen=True, slots=True)
class Stat:
    """ZooKeeper's Stat, minus aversion. Times are the proposer's wall clock in ms."""

    czxid: int
    mzxid: int
    pzxid: int
    ctime_ms: int
    mtime_ms: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """Multi-only: fails with BadVersion unless the node's version matches (NoNode if absent)."""

    path: str
    version: int


MultiOp = Create | Delete | SetData | Check


@dataclass(frozen=True, slots=True)
class Multi:
    ops: tuple[MultiOp, ...]


@dataclass(frozen=True, slots=True)
class OpenSession:
    timeout_ms: int
    owner: str = ""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    session_id: int


@dataclass(frozen=True, slots=True)
class CloseSession:
    session_id: int


@dataclass(frozen=True, slots=True)
class ExpireSession:
    """Proposed only by the quorum leader's session tracker."""

    session_id: int
    last_heartbeat_zxid: int


@dataclass(frozen=True, slots=True)
class Noop:
    """A write barrier: after it applies locally, local reads see every earlier commit."""


Operation = (
    Create
    | Delete
    | SetData
    | Check
    | Multi
    | OpenSession
    | Heartbeat
    | CloseSession
    | ExpireSession
    | Noop
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One command in the replicated log.

    `request_id` makes the command idempotent (empty = no deduplication); `session_id` is
    the proposer's session (0 = none; needed for ephemeral creates); `now_ms` is the
    proposer's wall clock, used only for ctime/mtime.
    """

    request_id: str
    session_id: int
    now_ms: int
    op: Operation


@dataclass(frozen=True, slots=True)
class CreateResult:
    path: str


@dataclass(frozen=True, slots=True)
class DeleteResult:
    pass


@dataclass(frozen=True, slots=True)
class SetDataResult:
    stat: Stat


@dataclass(frozen=True, slots=True)
class CheckResult:
    pass


@dataclass(frozen=True, slots=True)
class ErrorResult:
    code: ErrorCode
    path: str = ""

    def to_error(self) -> ZooKeeperError:
        return error_for(self.code, self.path)


OpResult = CreateResult | DeleteResult | SetDataResult | CheckResult | ErrorResult


@dataclass(frozen=True, slots=True)
class MultiResult:
    """`error_index` is -1 when every op succeeded."""

    results: tuple[OpResult, ...]
    error_index: int = -1


@dataclass(frozen=True, slots=True)
class SessionResult:
    session_id: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class NoopResult:
    zxid: int


Result = OpResult | MultiResult | SessionResult | NoopResult


@dataclass(frozen=True, slots=True)
class Change:
    type: EventType
    path: str


@dataclass(frozen=True, slots=True)
class ExpiredSession:
    """A session closed or expired by this entry, with the ephemerals it lost."""

    session_id: int
    owner: str
    expired: bool
    deleted_paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Applied:
    zxid: int
    result: Result
    changes: tuple[Change, ...]
    ended_sessions: tuple[ExpiredSession, ...] = ()
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: int
    timeout_ms: int
    owner: str
    last_heartbeat_zxid: int
    ephemerals: tuple[str, ...]


# ---------------------------------------------------------------------------------------
# Entry size


def _size_bound(op: object) -> int:
    """An upper bound of `op`'s pickled size (protocol 2: a str pickles to at most 4 bytes
    a character, bytes to at most 2 a byte), without pickling."""
    if isinstance(op, Multi):
        return 64 + sum(_size_bound(o) for o in op.ops)
    if isinstance(op, Create | SetData):
        return 320 + 4 * len(op.path) + 2 * len(op.data)
    if isinstance(op, Delete | Check):
        return 320 + 4 * len(op.path)
    return 4096


def oversized_data(op: object) -> str | None:
    """The path of a Create/SetData in `op` whose data is over MAX_DATA_BYTES (the apply
    would refuse it; the bridge refuses it before it reaches the log), else None."""
    ops = op.ops if isinstance(op, Multi) else (op,)
    for one in ops:
        if isinstance(one, Create | SetData) and len(one.data) > MAX_DATA_BYTES:
            return one.path
    return None


def entry_size(entry: Entry) -> int:
    """The entry's size as replicated (pickle protocol 2), or a bound of it well below
    `MAX_ENTRY_BYTES` when that is certain (no pickling for ordinary entries)."""
    bound = 512 + 4 * len(entry.request_id) + _size_bound(entry.op)
    if bound <= MAX_ENTRY_BYTES:
        return bound
    return len(pickle.dumps(entry, protocol=2))


# Paths


def validate_path(path: str, *, allow_trailing_slash: bool = False) -> None:
    """ZooKeeper's PathUtils.validatePath plus our size limits; raises BadArgumentsError."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(str(path), "path must start with /")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise BadArgumentsError(path[:64], f"path longer than {MAX_PATH_BYTES} bytes")
    if path == "/":
        return
    body = path[1:-1] if (allow_trailing_slash and path.endswith("/")) else path[1:]
    parts = body.split("/") if body else []
    if path.endswith("/") and not allow_trailing_slash:
        raise BadArgumentsError(path, "path must not end with /")
    if len(parts) > MAX_PATH_DEPTH:
        raise BadArgumentsError(path[:64], f"path deeper than {MAX_PATH_DEPTH}")
    for part in parts:
        if part in ("", ".", ".."):
            raise BadArgumentsError(path, "empty, '.' or '..' path component")
        if "\x00" in part or any("\ud800" <= ch <= "\uf8ff" for ch in part):
            raise BadArgumentsError(path, "invalid character in path")


def parent_of(path: str) -> str:
    index = path.rfind("/")
    return "/" if index == 0 else path[:index]


def name_of(path: str) -> str:
    return path[path.rfind("/") + 1 :]


def join_path(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


@dataclass(frozen=True, slots=True)
class Chroot:
    """A path prefix applied to every client path (ZK-02: `host:port/kafka`). "" = none."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if self.prefix:
            validate_path(self.prefix)
            if self.prefix == "/":
                object.__setattr__(self, "prefix", "")

    def to_server(self, path: str) -> str:
        if not self.prefix:
            return path
        return self.prefix if path == "/" else self.prefix + path

    def to_client(self, path: str) -> str | None:
        """The client's view of a server path, or None if it lies outside the chroot."""
        if not self.prefix:
            return path
        if path == self.prefix:
            return "/"
        if path.startswith(self.prefix + "/"):
            return path[len(self.prefix) :]
        return None


# ---------------------------------------------------------------------------------------
# The tree


class _Node:
    __slots__ = (
        "children",
        "ctime_ms",
        "cversion",
        "czxid",
        "data",
        "ephemeral_owner",
        "mtime_ms",
        "mzxid",
        "pzxid",
        "version",
    )

    def __init__(self, data: bytes, zxid: int, now_ms: int, ephemeral_owner: int) -> None:
        self.data = data
        self.czxid = zxid
        self.mzxid = zxid
        self.pzxid = zxid
        self.ctime_ms = now_ms
        self.mtime_ms = now_ms
        self.version = 0
        self.cversion = 0
        self.ephemeral_owner = ephemeral_owner
        self.children: set[str] = set()

    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _Node.__slots__)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(_Node.__slots__, state, strict=True):
            setattr(self, name, value)

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            ctime_ms=self.ctime_ms,
            mtime_ms=self.mtime_ms,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )


class _Session:
    __slots__ = ("ephemerals", "last_heartbeat_zxid", "owner", "session_id", "timeout_ms")

    def __init__(self, session_id: int, timeout_ms: int, owner: str, zxid: int) -> None:
        self.session_id = session_id
        self.timeout_ms = timeout_ms
        self.owner = owner
        self.last_heartbeat_zxid = zxid
        self.ephemerals: set[str] = set()

    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _Session.__slots__)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(_Session.__slots__, state, strict=True):
            setattr(self, name, value)

    def info(self) -> SessionInfo:
        return SessionInfo(
            session_id=self.session_id,
            timeout_ms=self.timeout_ms,
            owner=self.owner,
            last_heartbeat_zxid=self.last_heartbeat_zxid,
            ephemerals=tuple(sorted(self.ephemerals)),
        )


class _Failed(Exception):
    """Internal: one op failed; carries the result to return."""

    def __init__(self, result: ErrorResult) -> None:
        super().__init__(result)
        self.result = result


class _Txn:
    """Mutations of one entry, with an undo log so a failed multi leaves no trace."""

    def __init__(self, tree: ZNodeTree, zxid: int, entry: Entry) -> None:
        self.tree = tree
        self.zxid = zxid
        self.entry = entry
        self.changes: list[Change] = []
        self.undo: list[Callable[[], None]] = []
        self.ended_sessions: list[ExpiredSession] = []

    def fail(self, code: ErrorCode, path: str) -> _Failed:
        return _Failed(ErrorResult(code, path))

    def rollback(self) -> None:
        for action in reversed(self.undo):
            action()
        self.undo.clear()
        self.changes.clear()
        self.ended_sessions.clear()


def _result_units(result: Result) -> int:
    """Weight of a remembered result: a multi's counts per op, so big multis age out first."""
    return 1 + len(result.results) if isinstance(result, MultiResult) else 1


def _result_signature(result: Result) -> bytes:
    """A cheap canonical encoding of a result, for digests."""
    if isinstance(result, CreateResult):
        text = f"C{result.path}"
    elif isinstance(result, ErrorResult):
        text = f"E{int(result.code)}{result.path}"
    elif isinstance(result, SessionResult):
        text = f"S{result.session_id},{result.timeout_ms}"
    elif isinstance(result, SetDataResult):
        text = f"D{result.stat.mzxid},{result.stat.version}"
    elif isinstance(result, MultiResult):
        text = f"M{result.error_index}" + "".join(
            _result_signature(r).decode("utf-8", "surrogatepass") for r in result.results
        )
    elif isinstance(result, NoopResult):
        text = f"N{result.zxid}"
    else:
        text = type(result).__name__
    return (text + "\x00").encode("utf-8", "surrogatepass")


class ZNodeTree:
    """The replicated state: nodes, sessions, the request-id window and the zxid counter.

    Picklable (pysyncobj snapshots it). Reads are plain methods; `apply` is the only writer.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self._sessions: dict[int, _Session] = {}
        self._recent: dict[str, Result] = {}
        self._recent_units = 0  # sum of _result_units over _recent (bounds its memory)
        self._last_zxid = 0

    # -- reads ----------------------------------------------------------------------------

    @property
    def last_zxid(self) -> int:
        return self._last_zxid

    @property
    def node_count(self) -> int:
        return len(self._nodes)

    def get(self, path: str) -> tuple[bytes, Stat]:
        node = self._node_or_raise(path)
        return node.data, node.stat()

    def exists(self, path: str) -> Stat | None:
        validate_path(path)
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def children(self, path: str) -> list[str]:
        return sorted(self._node_or_raise(path).children)

    def session(self, session_id: int) -> SessionInfo | None:
        session = self._sessions.get(session_id)
        return None if session is None else session.info()

    def sessions(self) -> list[SessionInfo]:
        return [self._sessions[key].info() for key in sorted(self._sessions)]

    def walk(self, path: str = "/") -> Iterator[tuple[str, bytes, Stat]]:
        """Depth-first, children in sorted order: (path, data, stat) for every node."""
        stack = [path]
        self._node_or_raise(path)
        while stack:
            current = stack.pop()
            node = self._nodes[current]
            yield current, node.data, node.stat()
            for name in sorted(node.children, reverse=True):
                stack.append(join_path(current, name))

    def digest(self) -> str:
        """SHA-256 over the whole replicated state in a canonical order (for comparisons)."""
        hasher = hashlib.sha256()
        hasher.update(struct.pack("<q", self._last_zxid))
        for path in sorted(self._nodes):
            node = self._nodes[path]
            hasher.update(path.encode("utf-8", "surrogatepass") + b"\x00")
            hasher.update(
                struct.pack(
                    "<9q",
                    node.czxid,
                    node.mzxid,
                    node.pzxid,
                    node.ctime_ms,
                    node.mtime_ms,
                    node.version,
                    node.cversion,
                    node.ephemeral_owner,
                    len(node.data),
                )
            )
            hasher.update(node.data)
        for session_id in sorted(self._sessions):
            session = self._sessions[session_id]
            hasher.update(
                struct.pack("<3q", session_id, session.timeout_ms, session.last_heartbeat_zxid)
            )
            hasher.update(session.owner.encode("utf-8", "surrogatepass") + b"\x00")
            hasher.update("\x00".join(sorted(session.ephemerals)).encode("utf-8", "surrogatepass"))
        for request_id, result in self._recent.items():
            hasher.update(request_id.encode("utf-8", "surrogatepass") + b"\x00")
            hasher.update(_result_signature(result))
        return hasher.hexdigest()

    def _node_or_raise(self, path: str) -> _Node:
        validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    # -- apply ----------------------------------------------------------------------------

    def apply(self, entry: Entry) -> Applied:
        """Apply one log entry. Never raises on bad input: errors become ErrorResult."""
        self._last_zxid += 1
        zxid = self._last_zxid
        request_id = entry.request_id if isinstance(entry.request_id, str) else ""
        if request_id and request_id in self._recent:
            return Applied(zxid, self._recent[request_id], (), (), duplicate=True)
        txn = _Txn(self, zxid, entry)
        try:
            result = self._dispatch(txn, entry.op)
        except _Failed as failure:
            txn.rollback()
            result = failure.result
        except (TypeError, ValueError, AttributeError, UnicodeError):
            # Malformed command from a buggy or hostile proposer: no partial effect.
            txn.rollback()
            result = ErrorResult(ErrorCode.MARSHALLING_ERROR, "")
        except MemoryError:
            raise  # not deterministic across replicas: better to stop this one
        except Exception:
            # A bug in this module. It is deterministic, so every replica fails the same
            # way on the same entry: roll back and answer SystemError rather than let the
            # exception kill pysyncobj's tick thread (and with it the node's quorum member).
            txn.rollback()
            result = ErrorResult(ErrorCode.SYSTEM_ERROR, "")
        if request_id and len(request_id) <= MAX_REQUEST_ID_BYTES:
            self._remember(request_id, result)
        return Applied(zxid, result, tuple(txn.changes), tuple(txn.ended_sessions))

    def _remember(self, request_id: str, result: Result) -> None:
        self._recent[request_id] = result
        self._recent_units += _result_units(result)
        while self._recent_units > REQUEST_ID_WINDOW and len(self._recent) > 1:
            oldest = next(iter(self._recent))
            self._recent_units -= _result_units(self._recent.pop(oldest))

    def _dispatch(self, txn: _Txn, op: Operation) -> Result:
        if isinstance(op, Multi):
            return self._multi(txn, op)
        if isinstance(op, Create | Delete | SetData | Check):
            self._require_live_session(txn)
            return self._single(txn, op)
        if isinstance(op, OpenSession):
            return self._open_session(txn, op)
        if isinstance(op, Heartbeat):
            session = self._sessions.get(op.session_id)
            if session is None:
                raise txn.fail(ErrorCode.SESSION_EXPIRED, "")
            session.last_heartbeat_zxid = txn.zxid
            return SessionResult(session.session_id, session.timeout_ms)
        if isinstance(op, CloseSession):
            if op.session_id not in self._sessions:
                raise txn.fail(ErrorCode.SESSION_EXPIRED, "")
            timeout_ms = self._sessions[op.session_id].timeout_ms
            self._end_session(txn, op.session_id, expired=False)
            return SessionResult(op.session_id, timeout_ms)
        if isinstance(op, ExpireSession):
            session = self._sessions.get(op.session_id)
            if session is None or session.last_heartbeat_zxid > op.last_heartbeat_zxid:
                # Already gone, or heard from after the leader decided: the decision is stale.
                raise txn.fail(ErrorCode.SESSION_EXPIRED, "")
            timeout_ms = session.timeout_ms
            self._end_session(txn, op.session_id, expired=True)
            return SessionResult(op.session_id, timeout_ms)
        if isinstance(op, Noop):
            return NoopResult(txn.zxid)
        raise txn.fail(ErrorCode.UNIMPLEMENTED, "")

    def _require_live_session(self, txn: _Txn) -> None:
        session_id = txn.entry.session_id
        if session_id != NO_SESSION and session_id not in self._sessions:
            raise txn.fail(ErrorCode.SESSION_EXPIRED, "")

    def _single(self, txn: _Txn, op: MultiOp) -> OpResult:
        if isinstance(op, Check):
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, op.path)  # check exists only inside multi
        return self._apply_op(txn, op)

    def _multi(self, txn: _Txn, multi: Multi) -> MultiResult:
        ops = multi.ops
        if not isinstance(ops, tuple) or len(ops) > MAX_MULTI_OPS:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, "")
        self._require_live_session(txn)
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                if not isinstance(op, Create | Delete | SetData | Check):
                    raise txn.fail(ErrorCode.BAD_ARGUMENTS, "")
                results.append(self._apply_op(txn, op))
            except _Failed as failure:
                txn.rollback()
                failed = (
                    [ErrorResult(ErrorCode.OK, "")] * index
                    + [failure.result]
                    + [ErrorResult(ErrorCode.RUNTIME_INCONSISTENCY, "")] * (len(ops) - index - 1)
                )
                return MultiResult(tuple(failed), index)
        return MultiResult(tuple(results), -1)

    def _apply_op(self, txn: _Txn, op: MultiOp) -> OpResult:
        if isinstance(op, Create):
            return self._create(txn, op)
        if isinstance(op, Delete):
            self._delete(txn, op.path, op.version)
            return DeleteResult()
        if isinstance(op, SetData):
            return self._set_data(txn, op)
        return self._check(txn, op)

    def _validate(self, txn: _Txn, path: str, *, allow_trailing_slash: bool = False) -> None:
        try:
            validate_path(path, allow_trailing_slash=allow_trailing_slash)
        except BadArgumentsError as error:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, error.path) from None

    def _create(self, txn: _Txn, op: Create) -> CreateResult:
        self._validate(txn, op.path, allow_trailing_slash=op.sequential)
        if not isinstance(op.data, bytes) or len(op.data) > MAX_DATA_BYTES:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, op.path)
        if op.path == "/":
            raise txn.fail(ErrorCode.NODE_EXISTS, op.path)
        parent_path = op.path[:-1] if op.path.endswith("/") else parent_of(op.path)
        parent_path = parent_path or "/"
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise txn.fail(ErrorCode.NO_NODE, op.path)
        if parent.ephemeral_owner != NO_SESSION:
            raise txn.fail(ErrorCode.NO_CHILDREN_FOR_EPHEMERALS, op.path)
        path = f"{op.path}{parent.cversion:010d}" if op.sequential else op.path
        if op.sequential:
            self._validate(txn, path)
        if path in self._nodes:
            raise txn.fail(ErrorCode.NODE_EXISTS, path)
        if len(self._nodes) >= MAX_NODES:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, path)
        owner = NO_SESSION
        if op.ephemeral:
            owner = SessionId(txn.entry.session_id)
            if owner == NO_SESSION:
                raise txn.fail(ErrorCode.BAD_ARGUMENTS, path)
            if owner not in self._sessions:
                raise txn.fail(ErrorCode.SESSION_EXPIRED, path)
        nodes, name = self._nodes, name_of(path)
        old_cversion, old_pzxid = parent.cversion, parent.pzxid

        def undo_create() -> None:
            del nodes[path]
            parent.children.discard(name)
            parent.cversion, parent.pzxid = old_cversion, old_pzxid

        txn.undo.append(undo_create)
        nodes[path] = _Node(op.data, txn.zxid, txn.entry.now_ms, owner)
        parent.children.add(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        if owner != NO_SESSION:
            self._track_ephemeral(txn, owner, path, add=True)
        txn.changes.append(Change(EventType.NODE_CREATED, path))
        txn.changes.append(Change(EventType.NODE_CHILDREN_CHANGED, parent_path))
        return CreateResult(path)

    def _delete(self, txn: _Txn, path: str, version: int) -> None:
        self._validate(txn, path)
        if path == "/":
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, path)
        node = self._nodes.get(path)
        if node is None:
            raise txn.fail(ErrorCode.NO_NODE, path)
        if version != ANY_VERSION and version != node.version:
            raise txn.fail(ErrorCode.BAD_VERSION, path)
        if node.children:
            raise txn.fail(ErrorCode.NOT_EMPTY, path)
        self._remove(txn, path)

    def _remove(self, txn: _Txn, path: str) -> None:
        node = self._nodes[path]
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        nodes, name = self._nodes, name_of(path)
        old_cversion, old_pzxid = parent.cversion, parent.pzxid

        def undo_remove() -> None:
            nodes[path] = node
            parent.children.add(name)
            parent.cversion, parent.pzxid = old_cversion, old_pzxid

        txn.undo.append(undo_remove)
        del nodes[path]
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        if node.ephemeral_owner != NO_SESSION and node.ephemeral_owner in self._sessions:
            self._track_ephemeral(txn, node.ephemeral_owner, path, add=False)
        txn.changes.append(Change(EventType.NODE_DELETED, path))
        txn.changes.append(Change(EventType.NODE_CHILDREN_CHANGED, parent_path))

    def _track_ephemeral(self, txn: _Txn, session_id: int, path: str, *, add: bool) -> None:
        ephemerals = self._sessions[session_id].ephemerals
        if add:
            ephemerals.add(path)
            txn.undo.append(lambda: ephemerals.discard(path))
        else:
            ephemerals.discard(path)
            txn.undo.append(lambda: ephemerals.add(path))

    def _set_data(self, txn: _Txn, op: SetData) -> SetDataResult:
        self._validate(txn, op.path)
        if not isinstance(op.data, bytes) or len(op.data) > MAX_DATA_BYTES:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, op.path)
        node = self._nodes.get(op.path)
        if node is None:
            raise txn.fail(ErrorCode.NO_NODE, op.path)
        if op.version != ANY_VERSION and op.version != node.version:
            raise txn.fail(ErrorCode.BAD_VERSION, op.path)
        old = (node.data, node.version, node.mzxid, node.mtime_ms)

        def undo_set() -> None:
            node.data, node.version, node.mzxid, node.mtime_ms = old

        txn.undo.append(undo_set)
        node.data = op.data
        node.version += 1
        node.mzxid = txn.zxid
        node.mtime_ms = txn.entry.now_ms
        txn.changes.append(Change(EventType.NODE_DATA_CHANGED, op.path))
        return SetDataResult(node.stat())

    def _check(self, txn: _Txn, op: Check) -> CheckResult:
        self._validate(txn, op.path)
        node = self._nodes.get(op.path)
        if node is None:
            raise txn.fail(ErrorCode.NO_NODE, op.path)
        if op.version != ANY_VERSION and op.version != node.version:
            raise txn.fail(ErrorCode.BAD_VERSION, op.path)
        return CheckResult()

    def _open_session(self, txn: _Txn, op: OpenSession) -> SessionResult:
        if not isinstance(op.owner, str) or len(op.owner) > MAX_REQUEST_ID_BYTES:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, "")
        timeout_ms = min(max(int(op.timeout_ms), SESSION_TIMEOUT_MIN_MS), SESSION_TIMEOUT_MAX_MS)
        if op.owner:
            for session_id in sorted(self._sessions):
                if self._sessions[session_id].owner == op.owner:
                    self._end_session(txn, session_id, expired=False)
        if len(self._sessions) >= MAX_SESSIONS:
            raise txn.fail(ErrorCode.BAD_ARGUMENTS, "")
        session_id = txn.zxid  # unique, and the same on every replica
        self._sessions[session_id] = _Session(session_id, timeout_ms, op.owner, txn.zxid)
        sessions = self._sessions

        def undo_open() -> None:
            sessions.pop(session_id, None)

        txn.undo.append(undo_open)
        return SessionResult(session_id, timeout_ms)

    def _end_session(self, txn: _Txn, session_id: int, *, expired: bool) -> None:
        session = self._sessions[session_id]
        deleted = sorted(session.ephemerals)
        for path in deleted:
            if path in self._nodes:
                # An ephemeral never has children (NoChildrenForEphemerals), so this is safe.
                self._remove(txn, path)
        del self._sessions[session_id]
        sessions = self._sessions

        def restore() -> None:
            sessions[session_id] = session
            session.ephemerals.update(deleted)

        txn.undo.append(restore)
        txn.ended_sessions.append(
            ExpiredSession(session_id, session.owner, expired, tuple(deleted))
        )


# ---------------------------------------------------------------------------------------
# Watches (local to a replica)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A fired one-shot watch: ZooKeeper's WatchedEvent (type, path) plus the zxid."""

    type: EventType
    path: str
    zxid: int


class WatchManager:
    """One-shot data and child watches of one replica (ZooKeeper's WatchManager).

    * a data watch (set by get/exists) fires on NodeCreated, NodeDataChanged, NodeDeleted;
    * a child watch (set by children) fires on NodeChildrenChanged and NodeDeleted;
    * each fired watch is removed (KR-06, ZK-07): the client re-reads and re-registers.
    Given the same registrations at the same zxids, every replica fires the same events.
    """

    def __init__(self, max_watches: int = MAX_WATCHES) -> None:
        self._data: set[str] = set()
        self._child: set[str] = set()
        self._max_watches = max_watches

    @property
    def watch_count(self) -> int:
        return len(self._data) + len(self._child)

    def add_data_watch(self, path: str) -> None:
        self._bound(path)
        self._data.add(path)

    def add_child_watch(self, path: str) -> None:
        self._bound(path)
        self._child.add(path)

    def _bound(self, path: str) -> None:
        if self.watch_count >= self._max_watches:
            raise BadArgumentsError(path, f"more than {self._max_watches} watches")

    def trigger(self, zxid: int, changes: tuple[Change, ...]) -> list[WatchEvent]:
        fired: list[WatchEvent] = []
        for change in changes:
            path = change.path
            hit = False
            if change.type in (
                EventType.NODE_CREATED,
                EventType.NODE_DATA_CHANGED,
                EventType.NODE_DELETED,
            ) and (path in self._data):
                self._data.discard(path)
                hit = True
            if change.type in (EventType.NODE_CHILDREN_CHANGED, EventType.NODE_DELETED) and (
                path in self._child
            ):
                self._child.discard(path)
                hit = True
            if hit:
                fired.append(WatchEvent(change.type, path, zxid))
        return fired

    def fire_all(self, zxid: int) -> list[WatchEvent]:
        """Fire every watch (after a snapshot install skipped changes): clients re-read."""
        fired = [WatchEvent(EventType.NODE_DATA_CHANGED, p, zxid) for p in sorted(self._data)]
        fired += [WatchEvent(EventType.NODE_CHILDREN_CHANGED, p, zxid) for p in sorted(self._child)]
        self._data.clear()
        self._child.clear()
        return fired
