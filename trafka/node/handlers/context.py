"""What a handler gets besides its request: the request header and the broker's services."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trafka.net.server import RequestTurn
from trafka.security.acl import authorized_operations_bits
from trafka.security.authorizer import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    Action,
    Requester,
    ResourceType,
)
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

    # ---- authorization (docs/security.md, "Authorization") -------------------------------
    # A handler asks once per resource it touches; the node's authorizer (allow-all without
    # authorizer.class.name) decides with Kafka's rules (trafka.security.acl).

    @property
    def requester(self) -> Requester:
        return Requester(
            self.principal, self.client_host, self.listener_name, self.security_protocol
        )

    def authorize(
        self,
        operation: AclOperation,
        resource_type: ResourceType = ResourceType.CLUSTER,
        name: str = CLUSTER_RESOURCE_NAME,
    ) -> bool:
        """May the sender perform `operation` on the resource (the cluster by default)?"""
        action = Action(operation, resource_type, name)
        return self.broker.authorizer.authorize(self.requester, [action])[0]

    def authorized_names(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names among `names` on which the sender may perform `operation`."""
        unique = sorted(set(names))
        decisions = self.broker.authorizer.authorize(
            self.requester, [Action(operation, resource_type, name) for name in unique]
        )
        return {name for name, allowed in zip(unique, decisions, strict=True) if allowed}

    def authorized_operations(
        self, resource_type: ResourceType, name: str = CLUSTER_RESOURCE_NAME
    ) -> int:
        """KIP-430's bit set of the operations the sender may perform on the resource."""
        return authorized_operations_bits(
            self.broker.authorizer, self.requester, resource_type, name
        )
