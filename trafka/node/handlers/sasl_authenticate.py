"""SaslAuthenticate v0-2: one SASL token of the exchange the handshake started (KIP-152).

* v1: session_lifetime_ms (KIP-368: ``connections.max.reauth.ms``, 0 = none);
* v2: flexible (KIP-482).

Tokens go to the connection's mechanism server (`trafka.security.sasl`, PLAIN or SCRAM).
When the exchange completes, the connection's principal becomes ``User:<name>`` and every
API is served. A failure answers SASL_AUTHENTICATION_FAILED with Kafka's message (PLAIN:
"Authentication failed: Invalid username or password"; SCRAM: "Authentication failed during
authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"), delayed by
``connection.failed.authentication.delay.ms`` (a throttle on guessing), and the connection
is closed after the answer. A token larger than ``sasl.server.max.receive.size`` gets the
same failure. Without a handshake, or after completion: ILLEGAL_SASL_STATE, closed.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the answer that
completes an exchange carries that session lifetime; once it has passed, the connection
serves nothing but ApiVersions and a new exchange (anything else closes it, as Kafka); the new
exchange must authenticate the same principal ("Cannot change principals during
re-authentication ...", closed).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.errors import SaslError
from trafka.security.principal import KafkaPrincipal
from trafka.security.sasl import PLAIN, SaslFailed

log = logging.getLogger("trafka.node.sasl")

FAILED_AUTHENTICATION_DELAY_MS: Final = 100
"""Kafka's connection.failed.authentication.delay.ms default."""


def _failure(request: Any, code: ErrorCode, message: str) -> Any:
    return build(
        response_class(request),
        {
            "error_code": int(code),
            "error_message": message,
            "auth_bytes": b"",
            "session_lifetime": 0,
        },
    )


@register(api_key=ApiKey.SASL_AUTHENTICATE, name="SaslAuthenticate", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    if (
        session is None
        or session.sasl is None
        or (session.authenticated and not session.reauthenticating)
        or session.sasl.complete
    ):
        if session is not None:
            session.close_after_response = True
        return _failure(
            request,
            ErrorCode.illegal_sasl_state,
            "Unexpected SaslAuthenticate request: no SASL exchange in progress",
        )
    config = session.listener.sasl
    mechanism = session.sasl_mechanism or ""
    token = bytes(request.auth_bytes)
    try:
        if len(token) > config.max_receive_size:
            raise SaslFailed(
                f"SASL token of {len(token)} bytes exceeds sasl.server.max.receive.size"
            )
        answer = session.sasl.evaluate(token)
    except SaslError as error:
        log.info(
            "SASL %s authentication from %s on %s failed: %s",
            mechanism,
            ctx.client_host,
            ctx.listener_name,
            error,
        )
        session.close_after_response = True
        await trio.sleep(FAILED_AUTHENTICATION_DELAY_MS / 1000)
        if mechanism == PLAIN:
            message = str(error)
        else:
            message = (
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {mechanism}"
            )
        return _failure(request, ErrorCode.sasl_authentication_failed, message)
    if session.sasl.complete:
        principal = KafkaPrincipal.user(str(session.sasl.username))
        if session.reauthenticating and principal != session.principal:
            # KIP-368: a connection keeps its principal.
            session.close_after_response = True
            return _failure(
                request,
                ErrorCode.sasl_authentication_failed,
                f"Cannot change principals during re-authentication from {session.principal}: "
                f"{principal}",
            )
        session.authenticated_as(principal, trio.current_time(), config.reauth_ms)
    return build(
        response_class(request),
        {
            "error_code": 0,
            "error_message": None,
            "auth_bytes": answer,
            "session_lifetime": config.reauth_ms if session.sasl.complete else 0,
        },
    )
