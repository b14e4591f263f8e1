"""The authorizer port: may this principal perform these actions? (Kafka's `Authorizer`).

A handler (or the node's dispatch) asks ``authorizer.authorize(session, actions)`` and gets
one decision per action, in order. The only implementation here is `AllowAllAuthorizer`,
Kafka's behaviour without ``authorizer.class.name``: everything is allowed. An ACL authorizer
(issue 14 items 3 and 5) implements the same protocol; the node holds one instance.

Codes are Kafka's (`AclOperation`, `ResourceType`), so ACL requests can carry them as is.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from trafka.security.principal import KafkaPrincipal

CLUSTER_RESOURCE_NAME: Final = "kafka-cluster"


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


@dataclass(frozen=True, slots=True)
class Action:
    """One thing to authorize: an operation on a named resource."""

    operation: AclOperation
    resource_type: ResourceType
    resource_name: str

    @classmethod
    def cluster(cls, operation: AclOperation) -> Action:
        return cls(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asks, and through which listener (Kafka's AuthorizableRequestContext)."""

    principal: KafkaPrincipal
    client_host: str
    listener_name: str
    security_protocol: str


class Authorizer(Protocol):
    def authorize(self, requester: Requester, actions: Sequence[Action]) -> list[bool]:
        """One decision per action, in order (True = ALLOWED)."""
        ...


class AllowAllAuthorizer:
    """No ``authorizer.class.name``: every action of every principal is allowed (Kafka)."""

    def authorize(self, requester: Requester, actions: Sequence[Action]) -> list[bool]:
        return [True] * len(actions)
