"""The client side of a secured listener: TLS, then SASL (SaslHandshake v1 +
SaslAuthenticate v2), for the broker's own inter-broker client and for tools.

`secure(stream, host, security)` returns the transport the `KafkaConnection` uses; then
`authenticate(connection, security)` runs the SASL exchange (PLAIN or SCRAM-SHA-256/512).
A refused authentication raises `AuthenticationFailed` with the broker's error message.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from kio.schema.errors import ErrorCode

from trafka.security.scram import MECHANISMS as SCRAM_MECHANISMS
from trafka.security.scram import ScramClient, ScramError


class _Requester(Protocol):
    async def request(self, request: Any) -> Any: ...


class AuthenticationFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to reach a secured listener (Kafka's client keys: security.protocol,
    sasl.mechanism, the JAAS username/password, the ssl.* context)."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    ssl_context_source: Callable[[], ssl.SSLContext] | None = None
    """When set, the context of each new connection (`trafka.net.tls.ReloadingContext`)."""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


async def secure(
    stream: trio.SocketStream, host: str, security: ClientSecurity, timeout_s: float
) -> Any:
    """The transport for a connection: the raw socket or a TLS transport."""
    if not security.uses_tls:
        return stream.socket
    from .tls import client_transport

    context = security.ssl_context
    if security.ssl_context_source is not None:
        context = security.ssl_context_source()
    assert context is not None
    return await client_transport(stream, context, host, timeout_s)


async def authenticate(connection: _Requester, security: ClientSecurity) -> None:
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    mechanism = security.sasl_mechanism or "PLAIN"
    handshake = await connection.request(SaslHandshakeRequest(mechanism=mechanism))
    if handshake.error_code != ErrorCode.none:
        raise AuthenticationFailed(
            f"SASL mechanism {mechanism} not enabled: broker offers "
            f"{', '.join(handshake.mechanisms)}"
        )

    async def exchange(token: bytes) -> bytes:
        response = await connection.request(SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != ErrorCode.none:
            raise AuthenticationFailed(response.error_message or response.error_code.name)
        return bytes(response.auth_bytes)

    if mechanism == "PLAIN":
        await exchange(
            b"\0" + security.username.encode("utf-8") + b"\0" + security.password.encode("utf-8")
        )
        return
    if mechanism in SCRAM_MECHANISMS:
        nonce = base64.b64encode(os.urandom(18)).decode("ascii")
        client = ScramClient(mechanism, security.username, security.password, nonce)
        try:
            server_first = await exchange(client.first_message())
            server_final = await exchange(client.final_message(server_first))
            client.verify_server_final(server_final)
        except ScramError as error:
            raise AuthenticationFailed(str(error)) from None
        return
    raise AuthenticationFailed(f"SASL mechanism {mechanism} is not implemented")
