"""A listener's security and each connection's security session.

`ListenerSecurity` (one per listener, built by the node from its config): the security
protocol, the server `ssl.SSLContext` for SSL/SASL_SSL, the SASL server settings for
SASL_PLAINTEXT/SASL_SSL. `ConnectionSession` (one per connection): who the peer is
(`principal`), whether SASL authentication is still to be done, and whether the connection
must close once the pending response is written (a failed SASL authentication).

The server (`trafka.net.server`) enforces, before decoding a request body: on a SASL
listener, until authentication completes, only ApiVersions, SaslHandshake and
SaslAuthenticate are served; anything else closes the connection (Kafka's
SaslServerAuthenticator: "Unexpected Kafka request of type ... during SASL handshake").
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from trafka.net.api_keys import ApiKey
from trafka.security.principal import ANONYMOUS, KafkaPrincipal

PRE_AUTH_APIS: Final = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)
TLS_HANDSHAKE_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener secures its connections."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    principal_builder: Any = None
    """Maps an RFC 2253 subject to a principal name (`security.mapping.PrincipalMapper`)."""
    sasl: Any = None
    """`trafka.security.sasl.SaslServerConfig` on SASL listeners."""
    handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S
    ssl_context_source: Callable[[], ssl.SSLContext] | None = None
    """When set, the context of each new handshake (`trafka.net.tls.ReloadingContext`)."""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT: Final = ListenerSecurity()


@dataclass(slots=True, eq=False)
class ConnectionSession:
    """One connection's security state (mutable; only its connection's tasks touch it)."""

    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    sasl_required: bool = False
    authenticated: bool = True
    sasl: Any = None
    """The SASL exchange in progress (`trafka.security.sasl.create_server`), once handshaken."""
    sasl_mechanism: str = ""
    raw_tokens: bool = False
    """After SaslHandshake v0: the next frames are raw SASL tokens (KIP-43)."""
    close_after_response: bool = False
    """Set by SaslAuthenticate on failure: the server closes after writing the answer."""
    listener: ListenerSecurity = field(default_factory=ListenerSecurity)
    reauthenticating: bool = False
    """KIP-368: an authenticated session runs a new SASL exchange."""
    session_expires_s: float | None = None
    """KIP-368: when the authenticated session ends (trio clock; connections.max.reauth.ms):
    after it, only a re-authentication is served."""

    @classmethod
    def for_listener(cls, listener: ListenerSecurity) -> ConnectionSession:
        return cls(
            security_protocol=listener.security_protocol,
            sasl_required=listener.uses_sasl,
            authenticated=not listener.uses_sasl,
            listener=listener,
        )

    def evaluate_raw(self, token: bytes) -> bytes:
        """One raw SASL token after SaslHandshake v0 -> the raw answer; SaslError (or
        ValueError for an oversized token) ends the exchange (the server closes)."""
        limit = self.listener.sasl.max_receive_size if self.listener.sasl is not None else 0
        if len(token) > limit:
            raise ValueError(f"SASL token of {len(token)} bytes exceeds {limit}")
        answer: bytes = self.sasl.evaluate(token)
        if self.sasl.complete:
            # v0 clients cannot re-authenticate (KIP-368 needs SaslAuthenticate v1).
            self.authenticated_as(KafkaPrincipal.user(str(self.sasl.username)), 0.0, 0)
            self.raw_tokens = False
        return answer

    def admits(self, api_key: int, now_s: float) -> bool:
        """May a request of `api_key` be served now (before authentication, or after the
        session expired: only ApiVersions and a (re-)authentication)?"""
        if api_key in PRE_AUTH_APIS:
            return True
        if not self.authenticated:
            return False
        return self.session_expires_s is None or now_s < self.session_expires_s

    def unauthenticated_frame_limit(self) -> int | None:
        """The largest frame read before authentication (Kafka's sasl.server.max.receive.size);
        None once authenticated or on a listener without SASL."""
        if self.authenticated or self.listener.sasl is None:
            return None
        limit: int = self.listener.sasl.max_receive_size
        return limit

    def authenticated_as(self, principal: KafkaPrincipal, now_s: float, lifetime_ms: int) -> None:
        """An exchange completed: the principal, and the session's end (KIP-368)."""
        self.principal = principal
        self.authenticated = True
        self.reauthenticating = False
        self.session_expires_s = now_s + lifetime_ms / 1000 if lifetime_ms > 0 else None
