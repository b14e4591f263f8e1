"""TLS for listeners and for the broker's own client: contexts, handshake, a transport.

`TlsSettings` carries Kafka's PEM keys as plain values (the node builds it from
``ssl.keystore.*``, ``ssl.truststore.*``, ``ssl.client.auth``, ``ssl.enabled.protocols``,
``ssl.cipher.suites``, ``ssl.endpoint.identification.algorithm``, per listener);
`server_context` / `client_context` turn it into an `ssl.SSLContext`.

`TlsTransport` wraps a trio `SSLStream` in the socket methods the framing code uses
(``recv_into``, ``send``, ``sendmsg``) plus ``send_chunks``: sendfile cannot go through
TLS, so file regions are read (``os.preadv`` into one reusable buffer, no per-chunk
allocation) and written with the bytes around them in large TLS writes. The PLAINTEXT path
keeps sendfile.

`server_transport` runs the handshake (bounded by the listener's timeout: garbage instead of
a ClientHello fails it and closes the connection) and sets the session's principal from the
client certificate's subject through ``ssl.principal.mapping.rules`` (SSL listeners; on
SASL_SSL the SASL exchange decides the principal).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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


@contextlib.contextmanager
def _as_os_errors() -> Iterator[None]:
    """A broken TLS stream fails like a broken socket (OSError), which every caller of the
    framing code handles (the client closes the connection, the server drops it)."""
    try:
        yield
    except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
        raise ConnectionResetError(f"TLS connection broken: {error.__cause__ or error}") from error


class TlsTransport:
    """A trio SSLStream with the socket methods `trafka.net.framing` calls."""

    def __init__(self, stream: trio.SSLStream[Any]) -> None:
        self.stream = stream
        self._file_buffer: bytearray | None = None

    async def recv_into(self, view: memoryview | bytearray) -> int:
        with _as_os_errors():
            data = await self.stream.receive_some(len(view))
        size = len(data)
        view[:size] = data
        return size

    async def send(self, data: bytes | bytearray | memoryview) -> int:
        await self._send_all(data)
        return len(data)

    async def sendmsg(self, buffers: Sequence[bytes | bytearray | memoryview]) -> int:
        joined = b"".join(buffers)
        await self._send_all(joined)
        return len(joined)

    async def _send_all(self, data: bytes | bytearray | memoryview) -> None:
        with _as_os_errors():
            await self.stream.send_all(data)

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
        der = self.stream.getpeercert(binary_form=True)
        return der if der else None


def subject_of(der: bytes) -> str:
    """A certificate's subject in RFC 2253 form (as Java's X500Principal.getName())."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


async def server_transport(
    stream: trio.SocketStream, security: ListenerSecurity, session: ConnectionSession
) -> TlsTransport:
    """Handshake (bounded) and the session's principal from the client certificate."""
    assert security.ssl_context is not None
    ssl_stream = trio.SSLStream(stream, security.ssl_context, server_side=True)
    try:
        with trio.fail_after(security.handshake_timeout_s):
            await ssl_stream.do_handshake()
    except trio.TooSlowError:
        raise TlsHandshakeFailed("no TLS handshake within the timeout") from None
    except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, OSError) as error:
        raise TlsHandshakeFailed(str(error.__cause__ or error)) from None
    transport = TlsTransport(ssl_stream)
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
    ssl_stream = trio.SSLStream(stream, context, server_hostname=host)
    with trio.fail_after(timeout_s):
        await ssl_stream.do_handshake()
    return TlsTransport(ssl_stream)
