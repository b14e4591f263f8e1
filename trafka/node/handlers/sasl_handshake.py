"""SaslHandshake v0-1: pick the SASL mechanism of a connection (KIP-43, KIP-152).

* v0: the exchange continues with raw size-prefixed SASL tokens, no Kafka header (KIP-43;
  run by `trafka.net.security.ConnectionSession.evaluate_raw`; a failure closes the
  connection without an answer, as Kafka);
* v1: the exchange continues with SaslAuthenticate requests (KIP-152).

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 an authenticated
connection may start a new exchange with the same mechanism (v1); otherwise a second
handshake gets ILLEGAL_SASL_STATE.

On a SASL listener before authentication: an enabled mechanism starts its exchange
(`trafka.security.sasl`); any other gets UNSUPPORTED_SASL_MECHANISM with the enabled list
and the connection is closed after the answer (Kafka). On a PLAINTEXT or SSL listener, or a
second handshake: ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import random
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.sasl import create_server

_RANDOM = random.SystemRandom()


@register(api_key=ApiKey.SASL_HANDSHAKE, name="SaslHandshake", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    config = None if session is None else session.listener.sasl
    reauthentication = (
        session is not None
        and config is not None
        and session.authenticated
        and config.reauth_ms > 0
        and ctx.api_version >= 1
        and str(request.mechanism) == session.sasl_mechanism
    )
    if (
        session is None
        or config is None
        or ((session.sasl is not None or session.authenticated) and not reauthentication)
    ):
        return build(
            response_class(request),
            {"error_code": int(ErrorCode.illegal_sasl_state), "mechanisms": []},
        )
    mechanism = str(request.mechanism)
    if mechanism not in config.mechanisms:
        session.close_after_response = True
        return build(
            response_class(request),
            {
                "error_code": int(ErrorCode.unsupported_sasl_mechanism),
                "mechanisms": list(config.mechanisms),
            },
        )
    session.sasl = create_server(mechanism, config, _RANDOM)
    session.sasl_mechanism = mechanism
    session.reauthenticating = reauthentication
    # v0: the tokens follow as raw size-prefixed frames (the net server runs them).
    session.raw_tokens = ctx.api_version == 0
    return build(response_class(request), {"error_code": 0, "mechanisms": list(config.mechanisms)})
