"""The quorum port, hardened: pysyncobj's TCP connection and transport, wrapped (not forked).

pysyncobj 0.3.17 reads a native-endian signed 32-bit frame length and then accumulates the
frame with `bytes +=` (quadratic), reading until the socket is drained, all on its one tick
thread, and only then decrypts it. Anyone who reaches the port could stall elections and
session expiry on every node with one 100 MB junk frame, or hold connections open forever.
The subclasses here change only the read path and the admission of connections; framing,
encryption (Fernet), key exchange and unpickling stay pysyncobj's own code:

* `FrameBuffer` (sans-I/O): frames accumulate in a `bytearray`; the length is checked as
  soon as its 4 bytes arrive, before anything is buffered: negative lengths and lengths over
  the cap close the connection. Until the peer has proven it holds the cluster secret the cap
  is `max_unauthenticated_frame_bytes` (16 KiB; the key-exchange frames are ~200 bytes);
  after that `max_frame_bytes` (256 MiB, far above pysyncobj's 64 KiB batches and one 1 MiB
  znode).
* "Authenticated" means a frame decrypted *and* carried this connection's fresh random key
  (pysyncobj's `recvRandKey` check): the first frame of an incoming connection can be a
  replayed capture, the second cannot.
* Reads per poll event are bounded (`read_budget_bytes`, 1 MiB); the poller is
  level-triggered, so the rest is read at the next tick and the tick thread never spends
  more than one budget on one connection.
* A connection that has not authenticated within `auth_deadline_s` (the quorum's connection
  timeout) is closed, whether it sends slowly or not at all, and at most
  `max_pending_connections` (32) not-yet-identified incoming connections are kept: further
  ones are closed at once (the voters' own connections are long-lived and reconnect every
  `connection_retry_ms`). The listen backlog is raised from pysyncobj's 5 to 128, so a burst
  of connections does not leave a voter's reconnect waiting for a SYN retransmit.
* Each refusal is logged as one WARNING line, at most one per reason every 10 s (with the
  count of refusals since).

`before_start` (a hook of `GuardedTCPTransport`) runs inside `SyncObj.__init__` after the
journal is opened and before the tick thread starts: transport.py uses it to make term and
vote durable before any vote can be answered.

The name-mangled attributes used (`_TcpConnection__socket`, `_TcpConnection__readBuffer`,
`_TcpConnection__tryReadBuffer`, `_TcpConnection__processParseMessage`,
`_TcpConnection__lastReadTime`) are pysyncobj 0.3.17's (pinned in pyproject.toml);
tests/metadata_quorum/test_guarded_port.py fails if an upgrade renames them.
"""

from __future__ import annotations

import functools
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.transport import TCPTransport

logger = logging.getLogger(__name__)

_LENGTH = struct.Struct("i")  # pysyncobj's frame header: native-endian signed 32-bit


@dataclass(frozen=True, slots=True)
class PortLimits:
    max_unauthenticated_frame_bytes: int = 16 * 1024
    max_frame_bytes: int = 256 * 1024 * 1024
    read_budget_bytes: int = 1024 * 1024
    auth_deadline_s: float = 3.0
    max_pending_connections: int = 32
    listen_backlog: int = 128


class FrameRefused(Exception):
    """A frame header that closes the connection (negative or over the cap)."""


class FrameBuffer:
    """Sans-I/O framing of pysyncobj's stream: `length (i32, native) | payload`."""

    def __init__(self, limits: PortLimits) -> None:
        self._limits = limits
        self._buffer = bytearray()
        self.authenticated = False

    def __len__(self) -> int:
        return len(self._buffer)

    @property
    def cap(self) -> int:
        if self.authenticated:
            return self._limits.max_frame_bytes
        return self._limits.max_unauthenticated_frame_bytes

    def feed(self, data: bytes) -> None:
        """Append received bytes; raise FrameRefused if the pending frame's header is bad."""
        self._buffer += data
        self.check()

    def check(self) -> None:
        if len(self._buffer) < _LENGTH.size:
            return
        (length,) = _LENGTH.unpack_from(self._buffer, 0)
        if length < 0:
            raise FrameRefused(f"negative frame length {length}")
        if length > self.cap:
            state = "" if self.authenticated else " before authentication"
            raise FrameRefused(f"frame of {length} bytes{state} (limit {self.cap})")

    def wanted(self) -> int:
        """Bytes still missing for the pending frame (at least 1)."""
        if len(self._buffer) < _LENGTH.size:
            return _LENGTH.size - len(self._buffer)
        length: int = _LENGTH.unpack_from(self._buffer, 0)[0]
        return max(1, _LENGTH.size + length - len(self._buffer))

    def pop_frame(self) -> bytes | None:
        """The next complete frame, header included (pysyncobj's parser wants it), or None."""
        if len(self._buffer) < _LENGTH.size:
            return None
        self.check()
        (length,) = _LENGTH.unpack_from(self._buffer, 0)
        end = _LENGTH.size + length
        if len(self._buffer) < end:
            return None
        frame = bytes(self._buffer[:end])
        del self._buffer[:end]  # amortized O(1): bytearray keeps a start offset
        return frame

    def clear(self) -> None:
        self._buffer = bytearray()
        self.authenticated = False


class RefusalLog:
    """One WARNING per reason per `interval_s`, with how many were refused meanwhile."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()
        self.total = 0

    def refused(self, reason: str, detail: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.total += 1
            last = self._last.get(reason)
            if last is not None and now - last < self._interval_s:
                self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
                return
            self._last[reason] = now
            suppressed = self._suppressed.pop(reason, 0)
        more = f" ({suppressed} more since the last report)" if suppressed else ""
        logger.warning("quorum port: closed a connection: %s%s", detail, more)


def _peer(sock: socket.socket | None) -> str:
    try:
        host, port = sock.getpeername()[:2] if sock is not None else ("?", 0)
    except OSError:
        return "?"
    return f"{host}:{port}"


class GuardedTcpConnection(TcpConnection):  # type: ignore[misc]
    """pysyncobj's TcpConnection with a bounded, linear read path (see the module doc)."""

    def __init__(self, *args: Any, limits: PortLimits, refusals: RefusalLog, **kwargs: Any) -> None:
        self._limits = limits
        self._refusals = refusals
        self._frames = FrameBuffer(limits)
        self._started = time.monotonic()
        self.peer = "?"
        super().__init__(*args, **kwargs)

    @classmethod
    def adopt(
        cls, plain: TcpConnection, *, limits: PortLimits, refusals: RefusalLog, **kwargs: Any
    ) -> GuardedTcpConnection:
        """Take over the socket of a connection pysyncobj's TcpServer just accepted (it
        re-subscribes the descriptor to this object's handler before any byte is read)."""
        sock = plain._TcpConnection__socket
        conn = cls(socket=sock, limits=limits, refusals=refusals, **kwargs)
        conn.peer = _peer(sock)
        return conn

    @property
    def authenticated(self) -> bool:
        return self._frames.authenticated

    def overdue(self, now: float) -> bool:
        """Not authenticated within the deadline (and still open)."""
        return (
            not self._frames.authenticated
            and self.state != CONNECTION_STATE.DISCONNECTED
            and now - self._started > self._limits.auth_deadline_s
        )

    def connect(self, host: str, port: int) -> bool:
        self._frames.clear()
        self._started = time.monotonic()
        self.peer = f"{host}:{port}"
        return bool(super().connect(host, port))

    def disconnect(self) -> None:
        self._frames.clear()
        super().disconnect()

    def refuse(self, reason: str, detail: str) -> None:
        self._refusals.refused(reason, f"{detail} from {self.peer}")
        self.disconnect()

    # -- pysyncobj's private read path, replaced ----------------------------------------

    def _TcpConnection__tryReadBuffer(self) -> None:
        sock = self._TcpConnection__socket
        budget = self._limits.read_budget_bytes
        while budget > 0 and sock is not None:
            try:
                chunk = sock.recv(min(budget, max(65_536, self._frames.wanted())))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.disconnect()
                return
            if not chunk:
                self.disconnect()
                return
            budget -= len(chunk)
            try:
                self._frames.feed(chunk)
            except FrameRefused as error:
                self.refuse("frame", str(error))
                return
        self._TcpConnection__lastReadTime = time.monotonic()

    def _TcpConnection__processParseMessage(self) -> Any:
        try:
            frame = self._frames.pop_frame()
        except FrameRefused as error:  # the cap shrank? (never: it only grows) be safe
            self.refuse("frame", str(error))
            return None
        if frame is None:
            return None
        key_checked = self.recvRandKey is not None
        was_authenticated = self._frames.authenticated
        # pysyncobj's own parser (decrypt, replay-timestamp and random-key checks, unpickle)
        # on exactly this one frame; on any failure it disconnects and returns None.
        self._TcpConnection__readBuffer = frame
        message = super()._TcpConnection__processParseMessage()
        if self.state == CONNECTION_STATE.DISCONNECTED:
            if not was_authenticated:
                self.refuse("auth", "a frame that failed authentication")
            return None
        if key_checked or self.encryptor is None:
            self._frames.authenticated = True
        return message


class GuardedTCPTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCPTransport whose connections are `GuardedTcpConnection`s, with a cap on
    not-yet-identified incoming connections and a deadline for their authentication."""

    def __init__(
        self,
        syncObj: Any,
        selfNode: Any,
        otherNodes: Any,
        *,
        limits: PortLimits,
        before_start: Callable[[Any], None] | None = None,
    ) -> None:
        self._limits = limits
        self.refusals = RefusalLog()
        if before_start is not None:
            before_start(syncObj)
        super().__init__(syncObj, selfNode, otherNodes)

    def _connection_options(self) -> dict[str, Any]:
        conf = self._syncObj.conf
        return {
            "poller": self._syncObj._poller,
            "timeout": conf.connectionTimeout,
            "sendBufferSize": conf.sendBufferSize,
            "recvBufferSize": conf.recvBufferSize,
        }

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        plain = self._connections.get(node)
        if plain is None or isinstance(plain, GuardedTcpConnection):
            return
        conn = GuardedTcpConnection(
            limits=self._limits,
            refusals=self.refusals,
            keepalive=self._syncObj.conf.tcp_keepalive,
            **self._connection_options(),
        )
        conn.encryptor = plain.encryptor
        conn.setOnConnectedCallback(functools.partial(self._onOutgoingConnected, conn))
        conn.setOnMessageReceivedCallback(functools.partial(self._onMessageReceived, node))
        conn.setOnDisconnectedCallback(functools.partial(self._onDisconnected, conn))
        self._connections[node] = conn

    def _onNewIncomingConnection(self, conn: Any) -> None:
        pending = len(self._unknownConnections)
        if pending >= self._limits.max_pending_connections:
            self.refusals.refused(
                "pending",
                f"{pending} connections already wait for authentication "
                f"(limit {self._limits.max_pending_connections}); refused "
                f"{_peer(conn._TcpConnection__socket)}",
            )
            conn.disconnect()
            return
        guarded = GuardedTcpConnection.adopt(
            conn, limits=self._limits, refusals=self.refusals, **self._connection_options()
        )
        super()._onNewIncomingConnection(guarded)

    def _maybeBind(self) -> None:
        was_ready = self._ready
        super()._maybeBind()
        if self._ready and not was_ready and self._server is not None:
            # pysyncobj listens with a backlog of 5: a burst of junk connections would make
            # a voter's reconnect wait for a SYN retransmit (1 s). Linux takes a new backlog
            # on a second listen().
            sock = getattr(self._server, "_TcpServer__socket", None)
            if sock is not None:
                try:
                    sock.listen(self._limits.listen_backlog)
                except OSError:
                    pass

    def _onTick(self) -> None:
        super()._onTick()
        now = time.monotonic()
        candidates = list(self._unknownConnections) + list(self._connections.values())
        for conn in candidates:
            if isinstance(conn, GuardedTcpConnection) and conn.overdue(now):
                conn.refuse(
                    "deadline",
                    f"not authenticated within {self._limits.auth_deadline_s:g} s",
                )

    def pending_connections(self) -> int:
        return len(self._unknownConnections)
