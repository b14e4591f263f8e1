"""What a handler gets besides its request: the request header and the broker's services."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trafka.net.server import RequestTurn
from trafka.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from trafka.node.broker import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""
    #: The request's place in its connection's order of side effects: a handler whose side
    #: effects are done before it finishes (Produce after appending, Fetch at once) calls
    #: `turn.release()` so the next request on the connection may start (net/server.py).
    turn: RequestTurn = field(default_factory=RequestTurn.first)
    #: Who sent the request (docs/security.md): User:ANONYMOUS on PLAINTEXT, the SASL user,
    #: or the mapped TLS subject. What an authorizer decides on.
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = ""
    security_protocol: str = "PLAINTEXT"
    #: The connection's security session (`trafka.net.sasl.session.ConnectionSession`):
    #: the SASL handlers drive its authentication; None outside a connection.
    session: Any = None
