"""The trio Kafka server: listeners, connections, pipelining, limits. No business logic.

Per connection (NET-01..NET-11 re-expressed in trio; PROTO-03):

* a *reader* task reads frames (`FrameReader`, size checked before allocating), parses the
  request header, checks the (api_key, api_version) against the node's `SupportedApis`,
  decodes the body and starts one *handler* task per request - so the next request is read
  while earlier ones are processed (pipelining);
* side effects happen in arrival order: each request carries a `RequestTurn` and its
  handler starts only once the request before it on the connection has *released* its
  turn - when its handler returns, or earlier where the handler says its side effects are
  done (Produce after its appends, before waiting for replication; Fetch at once). Kafka
  mutes the channel for the whole request; releasing early keeps acks=all produce and
  long-poll fetch pipelined without letting a later request's append overtake an earlier
  one's (per-partition order, MSG-05);
* at most `max_in_flight_requests` requests per connection are between "read" and "response
  written"; when the bound is reached the reader stops reading (TCP back-pressure);
* one *writer* task writes the responses strictly in request order (a slow Fetch holds back
  the responses behind it, as in Kafka), with ``sendmsg`` for bytes and ``os.sendfile`` for
  `FileRegion` chunks;
* a *watchdog* closes the connection once it has been idle (no bytes read or written, no
  request in flight) for ``connections.max.idle.ms``.

Bad input (DESIGN decision 6) closes only that connection, with one log line:
oversize/negative size prefix, truncated frame, malformed header or body, unknown API key,
unsupported version (Kafka closes here too: its broker logs "Received request for api with
key N and unsupported version V" and drops the connection). The exception is ApiVersions
with a version above ours (KIP-511): answered with UNSUPPORTED_VERSION in the v0 body layout
and response header v0, and the connection stays open so the client can retry.

A handler returns a message object (encoded with `trafka.net.codec`), an `EncodedResponse`
(pre-encoded body chunks, may include `FileRegion`), or None for "no response" (Produce
acks=0). A handler that raises is logged and its connection closed; others are unaffected.

Limits (Kafka's names, all finite by default; issue 12): ``socket.request.max.bytes`` (per
frame, and per connection for the bytes of requests read but not yet answered),
``queued.max.request.bytes`` (the same over all connections; 512 MiB, Kafka: unbounded),
``max.connections`` (10,000, Kafka: unbounded) and ``listener.name.<l>.max.connections``
(at the limit the listener stops accepting until a connection closes, as Kafka's acceptor
blocks; the inter-broker listener is exempt from the broker-wide limit and closes the least
recently used client connection instead, KIP-402: `trafka.net.connection_limits`),
``max.connections.per.ip`` (1,000, Kafka: unbounded) with
``max.connections.per.ip.overrides`` (a connection over it is accepted and closed at once),
``connections.max.idle.ms`` (10 minutes; also for a partial
frame, and for a peer that stops reading its responses: the writer's send makes no
progress, as Kafka expires a muted channel). A frame's first 8 bytes (api key and version)
are checked before its body is reserved or read, and its buffer grows with the bytes
received (`FrameReader`), so a size prefix alone costs no memory. Memory per connection is
thus bounded by about 2 x socket.request.max.bytes of requests plus the responses of at
most `max_in_flight_requests` requests.

Security (trafka.net.security, trafka.net.tls): an SSL/SASL_SSL listener completes the TLS
handshake before the first frame (bounded by a timeout) and serves through a TLS transport
(FileRegions are read and encrypted instead of sendfile'd); on a SASL listener only
ApiVersions/SaslHandshake/SaslAuthenticate are served until the session is authenticated;
a failed authentication is answered and then the connection closes.

Quotas (KIP-219): the server knows no quota, it offers two mechanisms the node uses
(`trafka.node.quota`): a handler may *mute* its connection (`RequestContext.channel`,
`ChannelThrottle.mute_for`) after answering at once with its throttle time: no further frame
is read, and no request already read starts, until the time has passed (Kafka 2.0+ mutes the
channel the same way); and a `ConnectionPolicy` given to the server decides per new
connection how long the listener waits before accepting more (the broker-wide and
per-listener `max.connection.creation.rate`, KIP-612: Kafka's acceptor sleeps the throttle
time) and whether it is accepted or closed after a delay (the per-IP
`connection_creation_rate`, KIP-612).

The limits follow dynamic broker configs: `KafkaServer.reconfigure`.

NOT implemented: muting a channel while a request is handled (we pipeline instead, with side
effects in arrival order: RequestTurn).
"""

from __future__ import annotations

import errno
import logging
import math
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from trafka.metrics.errors import error_codes

from . import codec, headers, large_requests, protocol
from .connection_limits import ConnectionCounts, ConnectionLimits
from .framing import (
    CHECKPOINT_EVERY,
    DEFAULT_SOCKET_REQUEST_MAX_BYTES,
    Chunk,
    FrameError,
    FrameReader,
    chunks_size,
    send_chunks,
)
from .security import PLAINTEXT, ConnectionSession, ListenerSecurity

if TYPE_CHECKING:
    from trafka.metrics.registry import NodeMetrics

    from .tls import TlsTransport

log = logging.getLogger("trafka.net.server")

_SIZE = struct.Struct(">i")
UNLIMITED: Final = 2**31 - 1
DEFAULT_MAX_CONNECTIONS: Final = 10_000
"""``max.connections``: Kafka's default is unlimited (2^31-1); a finite one keeps a flood of
connections within the process's file descriptors and memory (issue 12)."""
DEFAULT_MAX_CONNECTIONS_PER_IP: Final = 1_000
"""``max.connections.per.ip``: Kafka's default is unlimited."""
DEFAULT_QUEUED_MAX_REQUEST_BYTES: Final = 512 * 1024 * 1024
"""``queued.max.request.bytes``: Kafka's default is unbounded (-1)."""
_MAX_WRITE_BATCH: Final = 64
_MAX_WRITE_BATCH_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Network limits, with Kafka's defaults."""

    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    #: ``max.connections.per.ip.overrides``: per-IP limits replacing the one above.
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    connections_max_idle_ms: int = 600_000
    #: Requests per connection read but not yet answered (Kafka bounds this broker-wide with
    #: queued.max.requests=500; per connection is what keeps one client from hogging it).
    max_in_flight_requests: int = 64
    receive_buffer_bytes: int = 64 * 1024
    #: ``queued.max.request.bytes``: request bytes read but not yet answered, over all
    #: connections; 0 or negative = unbounded (Kafka's default -1; ours is finite). Each
    #: connection is also bounded by ``socket.request.max.bytes`` of such bytes.
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    #: ``listener.name.<l>.max.connections``: (listener name, limit).
    max_connections_per_listener: tuple[tuple[str, int], ...] = ()
    #: ``inter.broker.listener.name``: exempt from max.connections when there are others.
    inter_broker_listener: str = ""

    def limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            max_connections=self.max_connections,
            max_connections_per_listener=dict(self.max_connections_per_listener),
            max_connections_per_ip=self.max_connections_per_ip,
            max_connections_per_ip_overrides=dict(self.max_connections_per_ip_overrides),
            inter_broker_listener=self.inter_broker_listener,
        )

    def connection_limit_for(self, ip: str) -> int:
        """`max.connections.per.ip`, or the override for `ip`."""
        for host, limit in self.max_connections_per_ip_overrides:
            if host == ip:
                return limit
        return self.max_connections_per_ip

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_connections_per_ip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in (
            "socket_request_max_bytes",
            "connections_max_idle_ms",
            "max_in_flight_requests",
            "receive_buffer_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


def parse_connection_overrides(text: str) -> tuple[tuple[str, int], ...]:
    """``max.connections.per.ip.overrides`` ("host:count,host:count", Kafka's format) ->
    ((host, count), ...); ValueError on a malformed entry."""
    overrides: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: bad entry {item!r}")
        overrides.append((host.strip(), int(count)))
    return tuple(overrides)


@dataclass(frozen=True, slots=True)
class Listener:
    """A listener to bind: Kafka's listener name (e.g. "PLAINTEXT"), host and port (0 = any)."""

    name: str
    host: str
    port: int
    security: ListenerSecurity = PLAINTEXT


@dataclass(frozen=True, slots=True)
class BoundListener:
    name: str
    host: str
    port: int


class RequestTurn:
    """A request's place in its connection's order of side effects.

    `wait()` returns once every earlier request on the connection has released its turn;
    `release()` (idempotent) lets the next request start. The server waits before calling
    the handler and releases after it returns; a handler may release earlier, once its side
    effects are done and only waiting remains.
    """

    __slots__ = ("_previous", "released", "released_at")

    def __init__(self, previous: trio.Event | None) -> None:
        self._previous = previous
        self.released = trio.Event()
        self.released_at = 0.0
        """`time.perf_counter()` at the first release (RequestMetrics' local/remote split)."""

    @classmethod
    def first(cls) -> RequestTurn:
        """A turn with nothing before it (the first request, or a request served alone)."""
        return cls(None)

    async def wait(self) -> None:
        """Until the previous request released its turn (no checkpoint if it did)."""
        if self._previous is not None:
            if not self._previous.is_set():
                await self._previous.wait()
            self._previous = None

    def release(self) -> None:
        if not self.released_at:
            self.released_at = time.perf_counter()
        self.released.set()


class ChannelThrottle:
    """A connection's mute (KIP-219): `mute_for(ms)` stops reading frames and starting the
    requests already read until the time has passed. A longer mute replaces a shorter one;
    never longer than `MAX_MUTE_MS`."""

    __slots__ = ("muted_until",)

    MAX_MUTE_MS: Final = 60_000

    def __init__(self) -> None:
        self.muted_until = 0.0
        """trio.current_time() until which the connection is muted."""

    def mute_for(self, duration_ms: int) -> None:
        if duration_ms > 0:
            until = trio.current_time() + min(duration_ms, self.MAX_MUTE_MS) / 1000
            self.muted_until = max(self.muted_until, until)

    async def wait_unmuted(self) -> None:
        while self.muted_until > trio.current_time():
            await trio.sleep_until(self.muted_until)


class ConnectionPolicy(Protocol):
    """Decides about each new connection (the node's connection-creation quotas)."""

    def throttle_accept(self, listener_name: str, protected: bool) -> int:
        """A connection was accepted on `listener_name`: count it against the broker-wide
        (unless `protected`) and the listener's creation rates; the ms the listener waits
        before accepting the next one (0: none)."""
        ...

    def admit(self, ip: str, listener_name: str, protected: bool) -> int:
        """0: serve the connection; else close it after this many ms (at most 10 s): the
        per-IP rate (a refused connection is taken back from the broker and listener
        rates)."""
        ...


MAX_REFUSAL_DELAY_MS: Final = 10_000
CLOSE_NOTIFY_S: Final = 1.0
"""How long a closing TLS connection may take to send its close_notify."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler gets: the parsed header, the decoded request, who sent it and where,
    and its turn in the connection's order of side effects."""

    header: headers.RequestHeader
    request: Any
    peer_host: str
    peer_port: int
    listener_name: str
    turn: RequestTurn = field(default_factory=RequestTurn.first)
    #: The connection's security session: principal, SASL state (trafka.net.security).
    session: ConnectionSession | None = None
    large: bool = False
    """Decoded in slices (`trafka.net.large_requests`); the GC pause ends with its handler."""
    size: int = 0
    """The request frame's size in bytes (what a produce byte-rate quota counts)."""
    channel: ChannelThrottle | None = None
    """The connection's mute (quota throttling, KIP-219)."""

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded (without size prefix and response header)."""

    chunks: tuple[Chunk, ...]


RequestHandler = Callable[[RequestContext], Awaitable[Any]]
"""Returns a response message object, an EncodedResponse, or None (no response)."""


class ByteBudget:
    """Bytes of request frames between "read" and "answered".

    A reader reserves a frame's size after reading its size prefix and before reading or
    allocating its body, waiting while the reservation would exceed the limit (a single
    frame is always admitted when nothing is reserved, so progress is guaranteed).
    """

    __slots__ = ("_freed", "limit", "used")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._freed = trio.Event()

    async def reserve(self, size: int) -> None:
        while self.limit is not None and self.used > 0 and self.used + size > self.limit:
            await self._freed.wait()
        self.used += size

    def give_back(self, size: int) -> None:
        if size:
            self.used -= size
            self._freed.set()
            self._freed = trio.Event()


class _CloseConnection(Exception):
    """Raised inside a connection to close it after logging."""


@dataclass(slots=True, eq=False)
class _Pending:
    """One request's slot in the connection's response order."""

    request_bytes: int
    done: trio.Event = field(default_factory=trio.Event)
    chunks: list[Chunk] | None = None
    failed: bool = False
    #: RequestMetrics (`KafkaServer.metrics` set): perf_counter() times and the response.
    received_s: float = 0.0
    started_s: float = 0.0
    handled_s: float = 0.0
    context: RequestContext | None = None
    response: Any = None


async def _release_gc_pause_soon() -> None:
    try:
        for _ in range(3):
            await trio.sleep(0)
    finally:
        large_requests.gc_pause.release()


def frame_response(correlation_id: int, header_version: int, body: Sequence[Chunk]) -> list[Chunk]:
    """Size prefix + response header + body chunks."""
    header = headers.encode_response_header(correlation_id, header_version)
    size = len(header) + chunks_size(body)
    return [_SIZE.pack(size) + header, *body]


class _Connection:
    """State of one client connection; lives inside its own nursery."""

    def __init__(
        self,
        server: KafkaServer,
        stream: trio.SocketStream,
        listener_name: str,
        peer: tuple[str, int],
        transport: Any = None,
        session: ConnectionSession | None = None,
    ) -> None:
        self.server = server
        self.stream = stream
        #: The raw socket, or a TLS transport with the same methods (trafka.net.tls).
        self.socket = stream.socket if transport is None else transport
        self.session = session or ConnectionSession()
        self.listener_name = listener_name
        self.peer_host, self.peer_port = peer
        self.in_flight = 0
        self.sending = False
        """A response is being written: a peer that stops reading leaves this set."""
        self.last_activity = trio.current_time()
        config = server.config
        self.slots = trio.Semaphore(config.max_in_flight_requests)
        self.budget = ByteBudget(config.socket_request_max_bytes)
        self.in_flight_bytes = 0
        self.order_send, self.order_receive = trio.open_memory_channel[_Pending](math.inf)
        #: Released when the latest request's side effects are done (see RequestTurn).
        self.last_released: trio.Event | None = None
        self.throttle = ChannelThrottle()
        self.cancel_scope = trio.CancelScope()
        self.reader = FrameReader(
            self.socket,
            max_frame_bytes=config.socket_request_max_bytes,
            receive_buffer_bytes=config.receive_buffer_bytes,
        )

    def describe(self) -> str:
        return f"{self.peer_host}:{self.peer_port} on {self.listener_name}"

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            # Frames read but never answered (connection closed) free the shared budget.
            self.server.budget.give_back(self.in_flight_bytes)
            self.in_flight_bytes = 0

    def close_soon(self) -> None:
        """Close this connection (idle too long, or the broker is over max.connections)."""
        self.cancel_scope.cancel()

    async def _run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.cancel_scope = nursery.cancel_scope
            nursery.start_soon(self._write_loop, nursery.cancel_scope)
            try:
                await self._read_loop(nursery)
            except (FrameError, headers.MalformedHeader, _CloseConnection) as error:
                log.warning("closing connection from %s: %s", self.describe(), error)
                nursery.cancel_scope.cancel()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                log.debug("connection from %s ended: %r", self.describe(), error)
                nursery.cancel_scope.cancel()
            # Reader done (EOF or error): the writer flushes responses to earlier requests.
            self.order_send.close()

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        frames = 0
        while True:
            frames += 1
            if frames % CHECKPOINT_EVERY == 0:
                await trio.lowlevel.checkpoint()  # reading frames never waits otherwise
            try:
                self.slots.acquire_nowait()
            except trio.WouldBlock:
                await self.slots.acquire()
            await self.throttle.wait_unmuted()
            frame = await self.reader.next_frame(self._reserve, self._check_header)
            if frame is None:
                self.slots.release()
                return
            self.last_activity = trio.current_time()
            size = len(frame)
            received_s = time.perf_counter() if self.server.metrics is not None else 0.0
            prepared = await self._prepare(frame)
            pending = _Pending(request_bytes=size, received_s=received_s)
            self.in_flight += 1
            self.order_send.send_nowait(pending)
            if isinstance(prepared, RequestContext):
                nursery.start_soon(self._handle, prepared, pending)
            else:
                pending.chunks = prepared
                pending.done.set()

    def _check_header(self, prefix: bytes) -> None:
        """Refuse a frame on its first 8 bytes, before its body is reserved or read: an
        unknown API key or an unsupported version closes the connection (ApiVersions above
        our range is answered, KIP-511)."""
        api_key, api_version, _ = headers.peek_request_prefix(prefix)
        if api_key == protocol.API_VERSIONS_KEY:
            return
        entry = self.server.supported.get(api_key)
        if entry is None:
            raise _CloseConnection(f"unknown or unsupported API key {api_key}")
        if not entry.accepts(api_version):
            raise _CloseConnection(
                f"received request for api with key {api_key} "
                f"({codec.api_name(api_key)}) and unsupported version {api_version}"
            )

    async def _reserve(self, size: int) -> None:
        """Admit a frame of `size` bytes against the connection's and the server's budget."""
        limit = self.session.unauthenticated_frame_limit()
        if limit is not None and size > limit:
            # Kafka reads nothing larger before SASL authentication completes.
            raise _CloseConnection(
                f"frame of {size} bytes before SASL authentication "
                f"(sasl.server.max.receive.size {limit})"
            )
        await self.budget.reserve(size)
        await self.server.budget.reserve(size)
        self.in_flight_bytes += size

    async def _prepare(self, frame: bytes | memoryview) -> RequestContext | list[Chunk]:
        """Parse and check one request; raise _CloseConnection (or a header/codec error) to
        close the connection; return the ApiVersions fallback response directly."""
        if self.session.raw_tokens and not self.session.authenticated:
            return self._raw_sasl_token(frame)
        api_key, api_version, correlation_id = headers.peek_request_prefix(frame)
        if not self.session.admits(api_key, trio.current_time()):
            raise _CloseConnection(
                f"unexpected {codec.api_name(api_key)} request before SASL authentication "
                "or after the session expired (connections.max.reauth.ms)"
            )
        supported = self.server.supported
        if api_key == protocol.API_VERSIONS_KEY:
            entry = supported.get(api_key)
            if entry is not None and api_version > entry.max_version:
                # KIP-511: v0 body layout, header v0; keep the connection.
                body = protocol.api_versions_v0_error_body(supported)
                return frame_response(correlation_id, 0, [body])
        entry = supported.get(api_key)
        if entry is None:
            raise _CloseConnection(f"unknown or unsupported API key {api_key}")
        if not entry.accepts(api_version):
            raise _CloseConnection(
                f"received request for api with key {api_key} "
                f"({codec.api_name(api_key)}) and unsupported version {api_version}"
            )
        header_version = protocol.request_header_version(api_key, api_version)
        header, offset = headers.parse_request_header(frame, header_version)
        paused = False
        try:
            slices = large_requests.slice_decoder(api_key, len(frame) - offset)
            if slices is not None:  # many elements: decoded in slices, yielding to the loop
                large_requests.gc_pause.acquire()  # released by _handle (or below)
                try:
                    request = await slices(api_version, frame, offset)
                except BaseException:
                    large_requests.gc_pause.release()
                    raise
            else:
                request = codec.decode_request(api_key, api_version, frame, offset)
                if large_requests.pauses_gc(api_key, len(frame) - offset):
                    large_requests.gc_pause.acquire()  # released by _handle
                    paused = True
        except (large_requests.LargeRequestError, UnicodeDecodeError) as error:
            raise _CloseConnection(
                f"malformed {codec.api_name(api_key)} v{api_version} request "
                f"(correlation id {correlation_id}): {error}"
            ) from error
        except codec.CodecError as error:
            raise _CloseConnection(
                f"malformed {codec.api_name(api_key)} v{api_version} request "
                f"(correlation id {correlation_id}): {error}"
            ) from error
        turn = RequestTurn(self.last_released)
        self.last_released = turn.released
        return RequestContext(
            header=header,
            request=request,
            peer_host=self.peer_host,
            peer_port=self.peer_port,
            listener_name=self.listener_name,
            turn=turn,
            session=self.session,
            large=slices is not None or paused,
            size=len(frame),
            channel=self.throttle,
        )

    def _raw_sasl_token(self, frame: bytes | memoryview) -> list[Chunk]:
        """A raw SASL token after SaslHandshake v0 (KIP-43): answered raw; a failure closes."""
        from trafka.security.errors import SaslError

        try:
            answer = self.session.evaluate_raw(bytes(frame))
        except (SaslError, ValueError) as error:
            raise _CloseConnection(f"SASL authentication failed: {error}") from None
        return [_SIZE.pack(len(answer)) + answer]

    async def _handle(self, context: RequestContext, pending: _Pending) -> None:
        try:
            await context.turn.wait()
            await self.throttle.wait_unmuted()
            if pending.received_s:
                pending.started_s = time.perf_counter()
            response = await self.server.handler(context)
            if pending.received_s:
                pending.handled_s = time.perf_counter()
                pending.context, pending.response = context, response
            if response is not None:
                pending.chunks = self._encode(context, response)
        except Exception:
            log.exception(
                "handler for %s v%d from %s failed; closing the connection",
                codec.api_name(context.api_key),
                context.api_version,
                self.describe(),
            )
            pending.failed = True
        finally:
            context.turn.release()
            pending.done.set()
            if context.large:
                # Resume the collector once this task (and the request it holds) is gone,
                # so the first collection does not scan the whole request.
                self.nursery.start_soon(_release_gc_pause_soon)

    def _encode(self, context: RequestContext, response: Any) -> list[Chunk]:
        header_version = protocol.response_header_version(context.api_key, context.api_version)
        if isinstance(response, EncodedResponse):
            body: Sequence[Chunk] = response.chunks
        else:
            expected = codec.response_class(context.api_key, context.api_version)
            if type(response) is not expected:
                raise TypeError(
                    f"handler returned {type(response).__qualname__} for "
                    f"{codec.api_name(context.api_key)} v{context.api_version}"
                )
            body = [codec.encode_response(response)]
        return frame_response(context.correlation_id, header_version, body)

    async def _write_loop(self, cancel_scope: trio.CancelScope) -> None:
        """Write responses in request order; responses that are already complete when the
        writer gets to them go out together in one send (fewer syscalls when pipelining)."""
        carry: _Pending | None = None
        rounds = 0
        try:
            while True:
                rounds += 1
                if rounds % CHECKPOINT_EVERY == 0:
                    await trio.lowlevel.checkpoint()  # as in _read_loop
                if carry is None:
                    try:
                        carry = self.order_receive.receive_nowait()
                    except trio.WouldBlock:
                        try:
                            carry = await self.order_receive.receive()
                        except trio.EndOfChannel:
                            break
                    except trio.EndOfChannel:
                        break
                if not carry.done.is_set():
                    await carry.done.wait()
                batch = [carry]
                carry = None
                batch_bytes = 0
                while len(batch) < _MAX_WRITE_BATCH and batch_bytes < _MAX_WRITE_BATCH_BYTES:
                    try:
                        following = self.order_receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    if not following.done.is_set():
                        carry = following
                        break
                    batch.append(following)
                    batch_bytes += chunks_size(following.chunks or ())
                chunks: list[Chunk] = []
                for pending in batch:
                    if pending.failed:
                        # Answer what came before the failed request, then close.
                        if chunks:
                            await send_chunks(self.socket, chunks)
                        cancel_scope.cancel()
                        return
                    if pending.chunks is not None:
                        chunks.extend(pending.chunks)
                if chunks:
                    self.sending = True
                    await send_chunks(self.socket, chunks)
                    self.sending = False
                    self.last_activity = trio.current_time()
                if self.session.close_after_response:
                    # A failed SASL authentication: answered, then closed (Kafka).
                    break
                if self.server.metrics is not None:
                    self._record(batch)
                for pending in batch:
                    self.in_flight -= 1
                    self.slots.release()
                    self.in_flight_bytes -= pending.request_bytes
                    self.budget.give_back(pending.request_bytes)
                    self.server.budget.give_back(pending.request_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            log.debug("write to %s failed: %r", self.describe(), error)
        cancel_scope.cancel()

    def _record(self, batch: list[_Pending]) -> None:
        """RequestMetrics of answered requests: counts, error codes, the five times (ms)."""
        metrics = self.server.metrics
        assert metrics is not None
        sent_s = time.perf_counter()
        for pending in batch:
            context = pending.context
            if context is None or not pending.handled_s:
                continue
            released = context.turn.released_at
            split = released if pending.started_s <= released <= pending.handled_s else 0.0
            response = pending.response
            codes: list[int] | None = (
                [] if response is None or isinstance(response, EncodedResponse) else None
            )
            metrics.request_done(
                codec.api_name(context.api_key),
                error_codes(response) if codes is None else codes,
                queue_ms=(pending.started_s - pending.received_s) * 1000,
                local_ms=((split or pending.handled_s) - pending.started_s) * 1000,
                remote_ms=((pending.handled_s - split) * 1000) if split else 0.0,
                send_ms=(sent_s - pending.handled_s) * 1000,
                response=response,
            )
            pending.context = pending.response = None


class KafkaServer:
    """Serves the Kafka protocol on one or more listeners and calls `handler` per request."""

    def __init__(
        self,
        handler: RequestHandler,
        supported: protocol.SupportedApis,
        config: ServerConfig | None = None,
        connection_policy: ConnectionPolicy | None = None,
    ) -> None:
        self.handler = handler
        self.connection_policy = connection_policy
        self.supported = supported
        self.config = config or ServerConfig()
        self.counts = ConnectionCounts(self.config.limits())
        self._slots_changed = trio.Event()
        self._live: set[_Connection] = set()
        limit = self.config.queued_max_request_bytes
        self.budget = ByteBudget(limit if limit > 0 else None)
        self.metrics: NodeMetrics | None = None
        """RequestMetrics and connection counts go here when set (trafka.metrics)."""

    @property
    def connection_count(self) -> int:
        return self.counts.total

    def reconfigure(self, config: ServerConfig) -> None:
        """New connection limits (dynamic broker configs): waiting listeners re-check, and
        connections over a lowered max.connections are closed, least recently used first."""
        self.config = config
        self.counts.update(config.limits())
        self._wake_listeners()
        self._close_excess()

    def _wake_listeners(self) -> None:
        self._slots_changed.set()
        self._slots_changed = trio.Event()

    def _close_excess(self) -> None:
        excess = self.counts.excess()
        if not excess:
            return
        candidates = sorted(
            (c for c in self._live if not self.counts.protected(c.listener_name)),
            key=lambda c: c.last_activity,
        )
        for connection in candidates[:excess]:
            log.warning(
                "max.connections (%d) exceeded; closing %s (least recently used)",
                self.counts.limits.max_connections,
                connection.describe(),
            )
            connection.close_soon()

    async def serve(
        self,
        listeners: Sequence[Listener],
        *,
        task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Bind every listener, report the bound ports through `task_status`, serve forever."""
        bound: list[BoundListener] = []
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                # An empty host binds every interface, as Kafka's "PLAINTEXT://:9092" does.
                sockets = await trio.open_tcp_listeners(listener.port, host=listener.host or None)
                port = sockets[0].socket.getsockname()[1]
                bound.append(BoundListener(listener.name, listener.host, port))
                self.counts.add_listener(listener.name)
                for socket_listener in sockets:
                    nursery.start_soon(
                        self._accept_loop, socket_listener, listener.name, listener.security
                    )
            nursery.start_soon(self._expire_idle)
            task_status.started(bound)

    async def _expire_idle(self) -> None:
        """Close every connection that has gone `connections.max.idle.ms` without a complete
        request read or a response written, when nothing is in flight (a partial frame
        counts as idle) or when a response has been waiting that long for the peer to read
        it (Kafka mutes such a channel and expires it). One task for the whole server, not
        one per connection: a connection waiting for its peer holds no task but its
        reader's and writer's (S2, issue 19). A connection is closed at most a tenth of the
        idle time after its deadline; the sweep runs at most ten times per idle time."""
        while True:
            idle_s = self.config.connections_max_idle_ms / 1000
            now = trio.current_time()
            wake = now + idle_s
            for connection in tuple(self._live):
                deadline = connection.last_activity + idle_s
                if now < deadline:
                    wake = min(wake, deadline)
                elif connection.cancel_scope.cancel_called:
                    continue  # closing already
                elif connection.in_flight == 0 or connection.sending:
                    reason = "does not read its responses" if connection.sending else "is idle"
                    log.info("closing connection from %s: it %s", connection.describe(), reason)
                    connection.close_soon()
                else:
                    wake = min(wake, now + idle_s / 10)  # a request is being handled
            await trio.sleep_until(max(wake, now + idle_s / 10))

    async def _accept_loop(
        self,
        socket_listener: trio.SocketListener,
        listener_name: str,
        security: ListenerSecurity = PLAINTEXT,
    ) -> None:
        """Kafka's Acceptor: accept, wait for a slot (listener and broker-wide
        max.connections) and the creation-rate throttle, count, serve; meanwhile further
        clients wait in the listen backlog."""
        async with socket_listener, trio.open_nursery() as nursery:
            while True:
                try:
                    stream = await socket_listener.accept()
                except OSError as error:
                    if error.errno not in _ACCEPT_RESOURCE_ERRORS:
                        raise
                    log.error("accept on %s failed: %s; retrying", listener_name, error)
                    await trio.sleep(0.1)
                    continue
                try:
                    await self._wait_for_slot(listener_name)
                except BaseException:
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
                    raise
                try:
                    ip = stream.socket.getpeername()[0]
                except OSError:
                    await stream.aclose()
                    continue
                within_ip_limit = self.counts.add(listener_name, ip)
                if self.counts.protected(listener_name):
                    self._close_excess()
                nursery.start_soon(
                    self._serve_connection, stream, listener_name, security, ip, within_ip_limit
                )

    async def _wait_for_slot(self, listener_name: str) -> None:
        """Kafka's `waitForConnectionSlot`: the creation-rate throttle, then until the
        listener (and, unless protected, the broker) is under max.connections."""
        policy = self.connection_policy
        protected = self.counts.protected(listener_name)
        throttle_ms = 0 if policy is None else policy.throttle_accept(listener_name, protected)
        if throttle_ms > 0:
            log.debug("connection creation on %s throttled %d ms", listener_name, throttle_ms)
            await trio.sleep(min(throttle_ms, MAX_REFUSAL_DELAY_MS) / 1000)
        if not self.counts.slot_available(listener_name):
            log.warning(
                "max.connections reached on %s (%d open); waiting for a connection to close",
                listener_name,
                self.counts.total,
            )
        while not self.counts.slot_available(listener_name):
            await self._slots_changed.wait()

    async def _serve_connection(
        self,
        stream: trio.SocketStream,
        listener_name: str,
        security: ListenerSecurity,
        ip: str,
        within_ip_limit: bool,
    ) -> None:
        """Serve one counted connection; it is forgotten (and a waiting listener woken)
        when it ends."""
        try:
            await self._serve_counted(stream, listener_name, security, ip, within_ip_limit)
        finally:
            self.counts.remove(listener_name, ip)
            self._wake_listeners()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve_counted(
        self,
        stream: trio.SocketStream,
        listener_name: str,
        security: ListenerSecurity,
        ip: str,
        within_ip_limit: bool,
    ) -> None:
        if not within_ip_limit:
            log.warning(
                "max.connections.per.ip (%d) reached for %s; closing",
                self.counts.limits.ip_limit(ip),
                ip,
            )
            return
        protected = self.counts.protected(listener_name)
        policy = self.connection_policy
        delay_ms = 0 if policy is None else policy.admit(ip, listener_name, protected)
        if delay_ms > 0:
            # Kafka's ConnectionThrottledException: closed after the throttle time (counted
            # against max.connections meanwhile, so refused connections stay bounded).
            log.info("connection from %s throttled; closing in %d ms", ip, delay_ms)
            await trio.sleep(min(delay_ms, MAX_REFUSAL_DELAY_MS) / 1000)
            return
        try:
            port = stream.socket.getpeername()[1]
        except OSError:
            return
        metrics = self.metrics
        if metrics is not None:
            metrics.connection_opened(listener_name)
        connection: _Connection | None = None
        transport: TlsTransport | None = None
        try:
            session = ConnectionSession.for_listener(security)
            if security.uses_tls:
                from .tls import TlsHandshakeFailed, server_transport

                try:
                    transport = await server_transport(stream, security, session)
                except TlsHandshakeFailed as error:
                    log.info("TLS handshake with %s on %s failed: %s", ip, listener_name, error)
                    return
            connection = _Connection(self, stream, listener_name, (ip, port), transport, session)
            self._live.add(connection)
            await connection.run()
        except Exception:
            # A bug in one connection must not take the listener (and every client) down.
            log.exception("connection from %s:%d failed unexpectedly", ip, port)
        finally:
            if transport is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_NOTIFY_S):
                    await transport.close_notify()
            if connection is not None:
                self._live.discard(connection)
            if metrics is not None:
                metrics.connection_closed(listener_name)


_ACCEPT_RESOURCE_ERRORS: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.ECONNABORTED}
)
"""accept() failures that are not the listener's fault (trio.serve_listeners' list)."""
