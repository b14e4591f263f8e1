"""TLS for listeners and for the broker's own client: contexts, handshake, a transport.

`TlsSettings` carries Kafka's PEM keys as plain values (the node builds it from
``ssl.keystore.*``, ``ssl.truststore.*``, ``ssl.client.auth``, ``ssl.enabled.protocols``,
``ssl.cipher.suites``, ``ssl.endpoint.identification.algorithm``, per listener);
`server_context` / `client_context` turn it into an `ssl.SSLContext`.

`TlsTransport` runs Python's ``ssl.SSLObject`` over memory BIOs on the trio socket and has
the socket methods the framing code uses (``recv_into``, ``send``, ``sendmsg``) plus
``send_chunks``: sendfile cannot go through TLS, so file regions are read (``os.preadv``
into one reusable buffer, no per-chunk allocation) and written with the bytes around them in
large TLS writes. The PLAINTEXT path keeps sendfile. (trio's ``SSLStream`` was the first
version: its per-record overhead made it 5x slower than this on the same machine.)

`server_transport` runs the handshake (bounded by the listener's timeout: garbage instead of
a ClientHello fails it and closes the connection) and sets the session's principal from the
client certificate's subject through ``ssl.principal.mapping.rules`` (SSL listeners; on
SASL_SSL the SASL exchange decides the principal).

`ReloadingContext` is certificate reload without a restart (KIP-226's effect, triggered by
the files instead of AlterConfigs): at most once per `RELOAD_CHECK_INTERVAL_S`, when a new
connection needs the context, it compares the PEM files' (``ssl.keystore.location``,
``ssl.truststore.location``) size, mtime and inode with the last seen ones; on a change it
builds a new context and uses it for every later handshake (connections already open keep
theirs). As Kafka's defaults (``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` false),
a keystore whose certificate has another subject or other subject alternative names is
refused, and so is one that does not load (a half-written file, a key that does not match):
the old context stays and a warning is logged; the next change of the files is tried again.
Inline PEM values (``ssl.keystore.certificate.chain``, ``ssl.truststore.certificates``) change
only with the configuration: a restart.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from .framing import Chunk, FileRegion
from .security import ConnectionSession, ListenerSecurity

_WRITE_BUFFER_BYTES: Final = 256 * 1024
_PROTOCOLS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsHandshakeFailed(Exception):
    pass


class TlsConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Kafka's PEM TLS keys for one listener (or the broker's client), as values."""

    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification: bool = True


def _versions(context: ssl.SSLContext, settings: TlsSettings) -> None:
    versions = [_PROTOCOLS[p] for p in settings.enabled_protocols if p in _PROTOCOLS]
    if not versions:
        raise TlsConfigError(
            "ssl.enabled.protocols: none of "
            + ",".join(settings.enabled_protocols)
            + " is supported (TLSv1.2, TLSv1.3)"
        )
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    if settings.cipher_suites:
        try:
            context.set_ciphers(":".join(settings.cipher_suites))
        except ssl.SSLError as error:
            raise TlsConfigError(f"ssl.cipher.suites: {error}") from None


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Load the key and certificate chain; False when none is configured."""
    password = settings.key_password
    try:
        if settings.keystore_location:
            context.load_cert_chain(settings.keystore_location, password=password)
            return True
        if settings.keystore_certificate_chain and settings.keystore_key:
            # ssl loads keys from files only: a private temporary file, removed at once.
            with tempfile.TemporaryDirectory(prefix="trafka-tls-") as directory:
                path = Path(directory) / "keystore.pem"
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w", encoding="ascii") as handle:
                    handle.write(settings.keystore_key.strip() + "\n")
                    handle.write(settings.keystore_certificate_chain.strip() + "\n")
                context.load_cert_chain(str(path), password=password)
            return True
    except (OSError, ssl.SSLError, ValueError) as error:
        raise TlsConfigError(f"cannot load the keystore: {error}") from None
    return False


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    try:
        if settings.truststore_location:
            context.load_verify_locations(cafile=settings.truststore_location)
            return True
        if settings.truststore_certificates:
            context.load_verify_locations(cadata=settings.truststore_certificates)
            return True
    except (OSError, ssl.SSLError, ValueError) as error:
        raise TlsConfigError(f"cannot load the truststore: {error}") from None
    return False


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    if not _load_keystore(context, settings):
        raise TlsConfigError(
            "an SSL listener needs ssl.keystore.location or ssl.keystore.certificate.chain "
            "and ssl.keystore.key"
        )
    has_trust = _load_truststore(context, settings)
    if settings.client_auth == "required":
        if not has_trust:
            raise TlsConfigError("ssl.client.auth=required needs a truststore")
        context.verify_mode = ssl.CERT_REQUIRED
    elif settings.client_auth == "requested":
        context.verify_mode = ssl.CERT_OPTIONAL if has_trust else ssl.CERT_NONE
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    context.check_hostname = settings.endpoint_identification
    if not _load_truststore(context, settings):
        context.load_default_certs()
    _load_keystore(context, settings)
    return context


RELOAD_CHECK_INTERVAL_S: Final = 1.0
_CERTIFICATE_BLOCK: Final = re.compile(
    rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL
)
_log = logging.getLogger(__name__)

_FileStamp = tuple[str, int, int, int] | tuple[str, None]


def _stamp(path: str) -> _FileStamp:
    try:
        stat = os.stat(path)
    except OSError:
        return (path, None)
    return (path, stat.st_mtime_ns, stat.st_size, stat.st_ino)


def keystore_identity(settings: TlsSettings) -> tuple[str, tuple[str, ...]] | None:
    """The subject (RFC 2253) and the sorted subject alternative names of the keystore's
    first certificate; None without a keystore. TlsConfigError when it cannot be read."""
    from cryptography import x509

    if settings.keystore_location:
        try:
            data = Path(settings.keystore_location).read_bytes()
        except OSError as error:
            raise TlsConfigError(f"cannot read the keystore: {error}") from None
    elif settings.keystore_certificate_chain:
        data = settings.keystore_certificate_chain.encode()
    else:
        return None
    found = _CERTIFICATE_BLOCK.search(data)
    if found is None:
        raise TlsConfigError("the keystore has no certificate")
    try:
        cert = x509.load_pem_x509_certificate(found.group(0))
    except ValueError as error:
        raise TlsConfigError(f"cannot read the keystore's certificate: {error}") from None
    try:
        extension = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = tuple(sorted(str(name.value) for name in extension.value))
    except x509.ExtensionNotFound:
        names = ()
    return cert.subject.rfc4514_string(), names


class ReloadingContext:
    """An `ssl.SSLContext` rebuilt when its PEM files change (module docstring). Calling it
    returns the context for the next handshake."""

    def __init__(
        self,
        settings: TlsSettings,
        build: Callable[[TlsSettings], ssl.SSLContext],
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = RELOAD_CHECK_INTERVAL_S,
    ) -> None:
        self._settings = settings
        self._build = build
        self._clock = clock
        self._interval_s = interval_s
        self._context = build(settings)
        self._identity = keystore_identity(settings)
        self._paths = tuple(
            path for path in (settings.keystore_location, settings.truststore_location) if path
        )
        self._stamps = self._stamp_files()
        self._next_check = clock() + interval_s
        self.reloads = 0
        """How many times a changed file gave a new context."""
        self.last_refusal: str | None = None
        """Why the last change was not taken (None once one is)."""

    def _stamp_files(self) -> tuple[_FileStamp, ...]:
        return tuple(_stamp(path) for path in self._paths)

    def __call__(self) -> ssl.SSLContext:
        if not self._paths:
            return self._context
        now = self._clock()
        if now < self._next_check:
            return self._context
        self._next_check = now + self._interval_s
        stamps = self._stamp_files()
        if stamps == self._stamps:
            return self._context
        self._stamps = stamps
        try:
            context = self._build(self._settings)
            identity = keystore_identity(self._settings)
        except TlsConfigError as error:
            return self._refuse(str(error))
        if identity != self._identity:
            return self._refuse(
                f"the new keystore's certificate is for {identity}, not {self._identity} "
                "(Kafka refuses subject and SAN changes)"
            )
        self._context = context
        self.reloads += 1
        self.last_refusal = None
        _log.info("TLS files %s changed: new handshakes use them", ", ".join(self._paths))
        return context

    def _refuse(self, reason: str) -> ssl.SSLContext:
        self.last_refusal = reason
        _log.warning("TLS files %s changed but were not taken: %s", ", ".join(self._paths), reason)
        return self._context


_RAW_READ_BYTES: Final = 256 * 1024


class TlsTransport:
    """TLS over a trio socket with the socket methods `trafka.net.framing` calls
    (``recv_into``, ``send``, ``sendmsg``, ``send_chunks``).

    Python's ``ssl.SSLObject`` over two ``MemoryBIO``s, driven directly: one socket read of
    up to 256 KiB feeds many TLS records, and ``recv_into`` decrypts as many of them as fit
    into the caller's buffer in one call. (trio's ``SSLStream`` goes through its retry
    machinery once per 16 KiB record: 5x slower here, bench/tls.py.) One reader task and one
    writer task may use a transport at once; the bytes TLS produces - application data from
    the writer, post-handshake messages from the reader - go out under one lock, in order.
    A broken connection raises OSError (ConnectionResetError), like a socket.
    """

    def __init__(
        self,
        socket: trio.socket.SocketType,
        ssl_object: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
    ) -> None:
        self._socket = socket
        self._ssl = ssl_object
        self._incoming = incoming
        self._outgoing = outgoing
        self._send_lock = trio.Lock()
        self._raw = bytearray(_RAW_READ_BYTES)
        self._raw_view = memoryview(self._raw)
        self._file_buffer: bytearray | None = None

    @classmethod
    async def handshake(
        cls,
        socket: trio.socket.SocketType,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
    ) -> TlsTransport:
        """Run the TLS handshake (ssl.SSLError / OSError on failure; no timeout here)."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        ssl_object = context.wrap_bio(
            incoming, outgoing, server_side=server_side, server_hostname=server_hostname
        )
        transport = cls(socket, ssl_object, incoming, outgoing)
        while True:
            try:
                ssl_object.do_handshake()
                break
            except ssl.SSLWantReadError:
                await transport._flush()
                if not await transport._fill():
                    raise ConnectionResetError(
                        "connection closed during the TLS handshake"
                    ) from None
        await transport._flush()
        return transport

    async def _fill(self) -> bool:
        """One socket read into the TLS engine; False at end of stream."""
        received: int = await self._socket.recv_into(self._raw_view)
        if received == 0:
            self._incoming.write_eof()
            return False
        self._incoming.write(self._raw_view[:received])
        return True

    async def _flush(self) -> None:
        async with self._send_lock:
            data = self._outgoing.read()
            view = memoryview(data)
            while view:
                sent: int = await self._socket.send(view)
                view = view[sent:]

    async def recv_into(self, view: memoryview | bytearray) -> int:
        """Decrypted bytes into `view` (as many records as fit); 0 at end of stream."""
        target = memoryview(view).cast("B")
        while True:
            total = 0
            closed = False
            try:
                while total < len(target):
                    # With a buffer, read() returns a count (typeshed says bytes).
                    count: int = self._ssl.read(  # type: ignore[assignment]
                        len(target) - total,
                        target[total:],
                    )
                    if count == 0:
                        # The peer's close_notify: the end of the stream (it was read as
                        # "nothing yet", and a client that closed TLS cleanly but kept its
                        # socket open held the connection until the idle timeout).
                        closed = True
                        break
                    total += count
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return total
            except ssl.SSLError as error:
                raise ConnectionResetError(f"TLS error: {error}") from error
            if self._outgoing.pending:
                await self._flush()  # TLS 1.3 session tickets, key updates
            if total or closed:
                return total
            if not await self._fill():
                return 0

    async def send(self, data: bytes | bytearray | memoryview) -> int:
        await self._send_all(data)
        return len(data)

    async def close_notify(self) -> None:
        """Send TLS's close_notify before the socket closes, as Kafka's SslTransportLayer
        does (a client that closes TLS cleanly waits for it: Python's asyncio, under
        aiokafka, up to its 30 s `ssl_shutdown_timeout`). The peer's own close_notify is not
        waited for; errors are ignored (the connection is going away)."""
        try:
            self._ssl.unwrap()
        except (ssl.SSLError, ValueError, OSError):
            pass  # SSLWantReadError: ours is written, the peer's has not come
        try:
            await self._flush()
        except OSError:
            pass

    async def sendmsg(self, buffers: Sequence[bytes | bytearray | memoryview]) -> int:
        joined = b"".join(buffers)
        await self._send_all(joined)
        return len(joined)

    async def _send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._ssl.write(data)
        except ssl.SSLError as error:
            raise ConnectionResetError(f"TLS error: {error}") from error
        await self._flush()

    async def send_chunks(self, chunks: Sequence[Chunk]) -> None:
        """Bytes and file regions, in order, in writes of up to 256 KiB."""
        pending: list[bytes | bytearray | memoryview] = []
        pending_size = 0
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                await self._send_region(chunk, pending)
                pending, pending_size = [], 0
                continue
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size >= _WRITE_BUFFER_BYTES:
                await self._send_all(b"".join(pending))
                pending, pending_size = [], 0
        if pending:
            await self._send_all(b"".join(pending))

    async def _send_region(
        self, region: FileRegion, head: list[bytes | bytearray | memoryview]
    ) -> None:
        if self._file_buffer is None:
            self._file_buffer = bytearray(_WRITE_BUFFER_BYTES)
        buffer = memoryview(self._file_buffer)
        fd = os.open(region.path, os.O_RDONLY)
        try:
            offset, end = region.position, region.position + region.length
            prefix = b"".join(head)
            if len(prefix) > len(buffer) // 2:
                await self._send_all(prefix)
                prefix = b""
            while offset < end or prefix:
                room = len(buffer) - len(prefix)
                buffer[: len(prefix)] = prefix
                want = min(room, end - offset)
                got = os.preadv(fd, [buffer[len(prefix) : len(prefix) + want]], offset)
                if want and got == 0:
                    raise OSError(f"{region.path} ended before {end}")
                offset += got
                await self._send_all(buffer[: len(prefix) + got])
                prefix = b""
        finally:
            os.close(fd)

    def peer_certificate(self) -> bytes | None:
        der = self._ssl.getpeercert(binary_form=True)
        return der if der else None


def subject_of(der: bytes) -> str:
    """A certificate's subject in RFC 2253 form (as Java's X500Principal.getName())."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


async def server_transport(
    stream: trio.SocketStream, security: ListenerSecurity, session: ConnectionSession
) -> TlsTransport:
    """Handshake (bounded) and the session's principal from the client certificate."""
    context = security.ssl_context
    if security.ssl_context_source is not None:
        context = security.ssl_context_source()
    assert context is not None
    try:
        with trio.fail_after(security.handshake_timeout_s):
            transport = await TlsTransport.handshake(stream.socket, context, server_side=True)
    except trio.TooSlowError:
        raise TlsHandshakeFailed("no TLS handshake within the timeout") from None
    except OSError as error:  # ssl.SSLError is one
        raise TlsHandshakeFailed(str(error)) from None
    der = transport.peer_certificate()
    if der is not None and not security.uses_sasl and security.principal_builder is not None:
        from trafka.security.mapping import NoMatchingRule
        from trafka.security.principal import KafkaPrincipal

        try:
            name = security.principal_builder.name(subject_of(der))
        except (NoMatchingRule, ValueError) as error:
            raise TlsHandshakeFailed(f"no principal for the client certificate: {error}") from None
        session.principal = KafkaPrincipal.user(name)
    return transport


async def client_transport(
    stream: trio.SocketStream, context: ssl.SSLContext, host: str, timeout_s: float
) -> TlsTransport:
    with trio.fail_after(timeout_s):
        return await TlsTransport.handshake(
            stream.socket, context, server_side=False, server_hostname=host
        )
