"""TLS listeners in-process (trafka.net.tls): mTLS principal, file regions over TLS,
refused handshakes, and a broken TLS stream failing like a socket."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.metadata.v1.request import MetadataRequest

from tests.net.toy import SUPPORTED, ToyBroker
from tests.support.certs import CertificateAuthority
from trafka.net import codec
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.client_security import ClientSecurity
from trafka.net.framing import FileRegion
from trafka.net.security import ListenerSecurity
from trafka.net.server import EncodedResponse, KafkaServer, Listener, RequestContext
from trafka.net.tls import TlsConfigError, TlsSettings, client_context, server_context
from trafka.security.mapping import PrincipalMapper
from trafka.security.principal import ANONYMOUS, KafkaPrincipal


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "certs")


def _listener(ca: CertificateAuthority, client_auth: str) -> ListenerSecurity:
    broker = ca.issue("broker", "localhost")
    settings = TlsSettings(
        keystore_location=str(broker.chain),
        truststore_location=str(ca.ca_file),
        client_auth=client_auth,
    )
    return ListenerSecurity(
        security_protocol="SSL",
        ssl_context=server_context(settings),
        principal_builder=PrincipalMapper.from_rules("RULE:^CN=(.*?),OU=Clients.*$/$1/L,DEFAULT"),
        handshake_timeout_s=2.0,
    )


async def _serve(nursery: trio.Nursery, security: ListenerSecurity, handler: Any) -> int:
    server = KafkaServer(handler, SUPPORTED)
    bound = await nursery.start(server.serve, [Listener("TLS", "127.0.0.1", 0, security)])
    return int(bound[0].port)


def _client(ca: CertificateAuthority, with_cert: bool) -> ClientSecurity:
    settings = TlsSettings(truststore_location=str(ca.ca_file))
    if with_cert:
        alice = ca.issue("alice", "Alice", "Clients")
        settings = TlsSettings(
            truststore_location=str(ca.ca_file),
            keystore_certificate_chain=alice.cert.read_text(),
            keystore_key=alice.key.read_text(),
        )
    return ClientSecurity("SSL", client_context(settings))


async def test_mtls_principal_and_file_regions_over_tls(
    nursery: trio.Nursery, ca: CertificateAuthority, tmp_path: Path
) -> None:
    toy = ToyBroker()
    principals: list[KafkaPrincipal] = []
    body_file = tmp_path / "body.bin"

    async def handler(ctx: RequestContext) -> Any:
        assert ctx.session is not None
        principals.append(ctx.session.principal)
        response = await toy.handle(ctx)
        if ctx.api_key != 3:
            return response
        body = codec.encode_response(response)
        body_file.write_bytes(b"JUNK" + body[10:] + b"MORE")
        return EncodedResponse((body[:10], FileRegion(str(body_file), 4, len(body) - 10)))

    port = await _serve(nursery, _listener(ca, "requested"), handler)
    toy.port = port
    for with_cert, expected in ((True, KafkaPrincipal.user("alice")), (False, ANONYMOUS)):
        connection = await KafkaConnection.connect(
            "localhost", port, security=_client(ca, with_cert)
        )
        try:
            response = await connection.request(MetadataRequest(topics=None))
        finally:
            await connection.close()
        assert response.brokers[0].port == port
        assert principals[-1] == expected


async def test_required_client_certificate_and_garbage_close_the_connection(
    nursery: trio.Nursery, ca: CertificateAuthority
) -> None:
    toy = ToyBroker()
    port = await _serve(nursery, _listener(ca, "required"), toy.handle)
    connection: KafkaConnection | None = None
    with pytest.raises(ClientError):
        # TLS 1.3: the client may finish its handshake before the server refuses it.
        connection = await KafkaConnection.connect(
            "localhost", port, security=_client(ca, False), request_timeout_s=5
        )
        await connection.request(MetadataRequest(topics=None))
    if connection is not None:
        await connection.close()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"\x00\x00\x00\x05hello" * 100)
    with trio.fail_after(10):
        try:
            while await stream.receive_some(1024):
                pass
        except trio.BrokenResourceError:
            pass
    await stream.aclose()
    assert toy.seen == []


async def test_a_reset_tls_connection_is_a_client_error_not_a_crash(
    nursery: trio.Nursery, ca: CertificateAuthority
) -> None:
    async def slam(ctx: RequestContext) -> Any:
        raise RuntimeError("handler failure closes the connection")

    port = await _serve(nursery, _listener(ca, "none"), slam)
    connection = await KafkaConnection.connect("localhost", port, security=_client(ca, False))
    with pytest.raises(ClientError):
        await connection.request(MetadataRequest(topics=None))
    await connection.close()


def test_bad_tls_settings_are_one_line_errors(ca: CertificateAuthority) -> None:
    with pytest.raises(TlsConfigError, match=r"needs ssl\.keystore\.location"):
        server_context(TlsSettings())
    with pytest.raises(TlsConfigError, match=r"ssl\.enabled\.protocols"):
        server_context(TlsSettings(enabled_protocols=("TLSv1",)))
    with pytest.raises(TlsConfigError, match="cannot load the keystore"):
        server_context(TlsSettings(keystore_location="/nonexistent.pem"))
    with pytest.raises(TlsConfigError, match=r"ssl\.client\.auth=required needs a truststore"):
        broker = ca.issue("b", "localhost")
        server_context(TlsSettings(keystore_location=str(broker.chain), client_auth="required"))
    context = server_context(
        TlsSettings(
            keystore_location=str(ca.issue("c", "localhost").chain),
            enabled_protocols=("TLSv1.3",),
        )
    )
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


async def test_a_closing_tls_connection_gets_close_notify(
    nursery: trio.Nursery, ca: CertificateAuthority
) -> None:
    """The client's close_notify is answered with the broker's (Kafka's SslTransportLayer
    does): asyncio clients (aiokafka) otherwise wait 30 s on every close."""
    import socket

    port = await _serve(nursery, _listener(ca, "none"), ToyBroker().handle)
    context = client_context(TlsSettings(truststore_location=str(ca.ca_file)))

    def connect_and_close() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            tls = context.wrap_socket(raw, server_hostname="localhost")
            # unwrap sends ours and waits for the peer's: SSLEOFError if the peer only
            # closed the socket.
            tls.unwrap().close()

    await trio.to_thread.run_sync(connect_and_close)
