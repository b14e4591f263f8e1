"""An async (trio) Kafka client connection: pipelined requests, correlation ids, timeouts.

Used by ktool, the follower fetchers and the controller channel. No background task: the
caller that is waiting for a response and holds the read lock reads the next frame and hands
it to whichever request it answers (responses arrive in request order, PROTO-03), so the
connection needs no nursery and several tasks may pipeline requests on it.

    conn = await KafkaConnection.connect("localhost", 9092, client_id="ktool")
    versions = await conn.negotiate_api_versions()       # {api_key: ApiVersionRange}
    response = await conn.request(MetadataRequest(...))  # version from the message class
    await conn.close()

A timeout, a cancelled read or a protocol violation (response for an unexpected correlation
id, undecodable bytes) breaks the connection: later calls raise `ConnectionBroken`, as the
Java client disconnects on request timeout.

Security: `connect(..., security=ClientSecurity(...))` runs TLS and SASL (PLAIN,
SCRAM-SHA-256/512) before returning (trafka.net.client_security).

NOT implemented: reconnects (callers open a new connection), client-side
throttling (throttle_time_ms is returned to the caller, not obeyed).
"""

from __future__ import annotations

import collections
import itertools
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode

from . import codec, headers, protocol
from .client_security import AuthenticationFailed, ClientSecurity, authenticate, secure
from .framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES, FrameError, FrameReader, send_buffers

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION_BYTES: Final = struct.pack(">h", int(ErrorCode.unsupported_version))
CLIENT_SOFTWARE_NAME: Final = "trafka"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"


class ClientError(Exception):
    """Base class of client connection failures."""


class ConnectionBroken(ClientError):
    """The connection is closed or unusable; open a new one."""


class RequestTimedOut(ClientError):
    pass


class UnsupportedByBroker(ClientError):
    """No version of an API both sides support."""


@dataclass(slots=True, eq=False)
class _Waiter:
    correlation_id: int
    api_key: int
    api_version: int
    done: trio.Event = field(default_factory=trio.Event)
    response: Any = None
    error: BaseException | None = None


def choose_version(
    broker: Mapping[int, protocol.ApiVersionRange], api_key: int, our_min: int, our_max: int
) -> int:
    """The highest version in both [our_min, our_max] and the broker's advertised range."""
    entry = broker.get(api_key)
    if entry is None:
        raise UnsupportedByBroker(f"broker does not offer {codec.api_name(api_key)}")
    high = min(our_max, entry.max_version)
    if high < max(our_min, entry.advertised_min):
        raise UnsupportedByBroker(
            f"{codec.api_name(api_key)}: ours {our_min}-{our_max}, "
            f"broker's {entry.advertised_min}-{entry.max_version}"
        )
    return high


class _QuickLock:
    """A trio.Lock whose uncontended acquisition is no checkpoint (trio's always is: with
    one for sending and one for reading, each request waited two scheduling passes more)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = trio.Lock()

    async def __aenter__(self) -> None:
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()


class KafkaConnection:
    """One TCP connection to a Kafka broker."""

    def __init__(
        self,
        stream: trio.SocketStream,
        *,
        client_id: str | None,
        max_frame_bytes: int,
        request_timeout_s: float,
        transport: Any = None,
    ) -> None:
        self._stream = stream
        #: The raw socket, or a TLS transport with the same methods (trafka.net.tls).
        self._socket = stream.socket if transport is None else transport
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self._reader = FrameReader(self._socket, max_frame_bytes=max_frame_bytes)
        self._send_lock = _QuickLock()
        self._read_lock = _QuickLock()
        self._correlation_ids = itertools.count(1)
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._broken: BaseException | None = None
        self.broker_versions: dict[int, protocol.ApiVersionRange] = {}

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = "trafka",
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
        max_frame_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES,
        security: ClientSecurity | None = None,
    ) -> KafkaConnection:
        """Connect; with `security`, also the TLS handshake and SASL authentication."""
        try:
            with trio.fail_after(connect_timeout_s):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as error:
            raise ConnectionBroken(f"cannot connect to {host}:{port}: {error!r}") from error
        transport = None
        if security is not None and security.uses_tls:
            try:
                transport = await secure(stream, host, security, connect_timeout_s)
            except (OSError, trio.TooSlowError, trio.BrokenResourceError) as error:
                await stream.aclose()
                raise ConnectionBroken(f"TLS with {host}:{port} failed: {error!r}") from error
        connection = cls(
            stream,
            client_id=client_id,
            max_frame_bytes=max_frame_bytes,
            request_timeout_s=request_timeout_s,
            transport=transport,
        )
        if security is not None and security.uses_sasl:
            try:
                await authenticate(connection, security)
            except AuthenticationFailed as error:
                await connection.close()
                raise ConnectionBroken(f"SASL with {host}:{port} failed: {error}") from error
            except BaseException:
                await connection.close()
                raise
        return connection

    @property
    def closed(self) -> bool:
        return self._broken is not None

    async def close(self) -> None:
        self._break(ConnectionBroken("connection closed"))
        with trio.CancelScope(shield=True):
            await self._stream.aclose()

    def _break(self, error: BaseException) -> None:
        if self._broken is None:
            self._broken = error
        while self._waiting:
            waiter = self._waiting.popleft()
            waiter.error = self._broken
            waiter.done.set()

    async def request(
        self, request: Any, api_version: int | None = None, *, timeout_s: float | None = None
    ) -> Any:
        """Send `request` and return the decoded response (None for Produce acks=0).

        `api_version` defaults to the message class's ``__version__``; the class must be the
        one `trafka.net.codec` maps (api_key, api_version) to.
        """
        api_key = int(type(request).__api_key__)
        version = int(type(request).__version__) if api_version is None else api_version
        if codec.request_class(api_key, version) is not type(request):
            raise ValueError(
                f"{type(request).__qualname__} is not {codec.api_name(api_key)} v{version}"
            )
        expects_response = not (api_key == 0 and int(request.acks) == 0)
        return await self._round_trip(
            api_key, version, codec.encode_request(request), expects_response, timeout_s
        )

    async def request_encoded(
        self, api_key: int, api_version: int, body: bytes, *, timeout_s: float | None = None
    ) -> Any:
        """`request` of a body the caller encoded itself (a hot path's own encoder, e.g.
        a follower's Fetch); the response is decoded as for `request`."""
        if codec.response_class(api_key, api_version) is None:
            raise ValueError(f"no response of api key {api_key} v{api_version} to decode")
        return await self._round_trip(api_key, api_version, body, True, timeout_s)

    async def _round_trip(
        self,
        api_key: int,
        version: int,
        body: bytes,
        expects_response: bool,
        timeout_s: float | None,
    ) -> Any:
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            with trio.fail_after(timeout):
                waiter = await self._send(body, api_key, version, expects_response)
                if waiter is None:
                    return None
                await self._wait(waiter)
        except trio.TooSlowError as error:
            self._break(RequestTimedOut(f"{codec.api_name(api_key)} timed out after {timeout}s"))
            raise RequestTimedOut(str(self._broken)) from error
        if waiter.error is not None:
            raise ConnectionBroken(str(waiter.error)) from waiter.error
        return waiter.response

    async def _send(
        self, body: bytes, api_key: int, version: int, expects_response: bool
    ) -> _Waiter | None:
        if self._broken is not None:
            raise ConnectionBroken(str(self._broken))
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        header = headers.encode_request_header(
            api_key,
            version,
            correlation_id,
            self.client_id,
            protocol.request_header_version(api_key, version),
        )
        waiter = _Waiter(correlation_id, api_key, version) if expects_response else None
        async with self._send_lock:
            if waiter is not None:
                self._waiting.append(waiter)
            try:
                await send_buffers(
                    self._socket, [_SIZE.pack(len(header) + len(body)), header, body]
                )
            except BaseException as error:
                self._break(ConnectionBroken(f"send failed: {error!r}"))
                raise ConnectionBroken(str(self._broken)) from error
        return waiter

    async def _wait(self, waiter: _Waiter) -> None:
        while not waiter.done.is_set():
            async with self._read_lock:
                if waiter.done.is_set():
                    return
                try:
                    frame = await self._reader.next_frame()
                    if frame is None:
                        raise ConnectionBroken("broker closed the connection")
                    self._dispatch(frame)
                except BaseException as error:
                    # A cancelled or failed read leaves the stream mid-frame: unusable.
                    self._break(ConnectionBroken(f"read failed: {error!r}"))
                    if isinstance(error, (ClientError, FrameError, OSError, codec.CodecError)):
                        return
                    raise

    def _dispatch(self, frame: bytes | memoryview) -> None:
        if not self._waiting:
            raise ConnectionBroken("response without a request")
        waiter = self._waiting[0]
        header_version = protocol.response_header_version(waiter.api_key, waiter.api_version)
        correlation_id, offset = headers.parse_response_header(frame, header_version)
        if correlation_id != waiter.correlation_id:
            raise ConnectionBroken(
                f"correlation id {correlation_id}, expected {waiter.correlation_id}"
            )
        version = waiter.api_version
        if (
            waiter.api_key == protocol.API_VERSIONS_KEY
            and frame[offset : offset + 2] == _UNSUPPORTED_VERSION_BYTES
        ):
            # KIP-511: a broker that does not know our ApiVersions version answers in the
            # v0 layout (as Kafka's ApiVersionsResponse.parse falls back to v0).
            version = 0
        response = codec.decode_response(waiter.api_key, version, frame, offset)
        self._waiting.popleft()
        waiter.response = response
        waiter.done.set()

    async def negotiate_api_versions(
        self, ours: Mapping[int, tuple[int, int]] | None = None
    ) -> dict[int, protocol.ApiVersionRange]:
        """Ask for the broker's ranges (ApiVersions v3, falling back as KIP-511 says).

        Stores them in `broker_versions`; with `ours` ({api_key: (min, max)}) also checks
        that every listed API has a common version (raises UnsupportedByBroker).
        """
        response = await self.request(
            ApiVersionsRequestV3(
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            )
        )
        if response.error_code == ErrorCode.unsupported_version:
            entry = next((e for e in response.api_keys if e.api_key == 18), None)
            retry_version = 0 if entry is None else min(int(entry.max_version), 3)
            retry_class = codec.request_class(18, retry_version)
            assert retry_class is not None
            fields: dict[str, str] = {}
            if retry_version >= 3:
                fields["client_software_name"] = CLIENT_SOFTWARE_NAME
                fields["client_software_version"] = CLIENT_SOFTWARE_VERSION
            retry = retry_class(**fields)
            response = await self.request(retry)
        if response.error_code != ErrorCode.none:
            raise ClientError(f"ApiVersions failed: {response.error_code!r}")
        self.broker_versions = {
            int(e.api_key): protocol.ApiVersionRange(
                int(e.api_key), int(e.min_version), int(e.max_version)
            )
            for e in response.api_keys
            if 0 <= e.min_version <= e.max_version
        }
        for api_key, (low, high) in (ours or {}).items():
            choose_version(self.broker_versions, api_key, low, high)
        return self.broker_versions

    def version_for(self, api_key: int, our_min: int = 0, our_max: int | None = None) -> int:
        """Highest common version after `negotiate_api_versions`."""
        known = codec.known_versions(api_key)
        if not known:
            raise UnsupportedByBroker(f"no schema for {codec.api_name(api_key)}")
        high = known[-1] if our_max is None else our_max
        return choose_version(self.broker_versions, api_key, our_min, high)
