"""What a handler gets besides its request: the request header and the node's services.

`NodeServices` holds one typed port per service of the node, built once by the broker
(`trafka.node.broker`, the composition root); a handler uses the few it needs and nothing
else. Every request gets its own `RequestContext` (header fields, its place in the
connection's order, the principal, the listener and its security protocol).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from trafka.net.security import ConnectionSession
from trafka.net.server import ChannelThrottle, RequestTurn
from trafka.node.config.service import ConfigService
from trafka.node.controller.service import ControllerService
from trafka.node.fetch_sessions import DEFAULT_SLOTS, FetchSessionCache
from trafka.node.group_service import GroupService
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_cache import MetadataCache
from trafka.node.metadata_store import MetadataStore
from trafka.node.producer_ids import ProducerIdManager
from trafka.node.quota.service import MutationCharge, QuotaService
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.security.acls import AclService
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicManager
from trafka.node.txn_service import TransactionService
from trafka.security.acl import authorized_operations_bits
from trafka.security.authorizer import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    Action,
    AllowAllAuthorizer,
    Authorizer,
    Requester,
    ResourceType,
)
from trafka.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True, slots=True)
class NodeServices:
    """The node's services, as handlers see them."""

    node_id: int
    cluster_id: str
    store: MetadataStore
    """The metadata tree (DescribeZNodes, DescribeQuorum, reassignment reads and writes)."""
    metadata: MetadataCache
    """Live brokers, the controller id, UpdateMetadata."""
    topics: TopicManager
    """The topic cache (and the tree writes of topic admin, through `topic_admin`)."""
    topic_admin: TopicAdmin
    configs: ConfigService
    producer_ids: ProducerIdManager
    groups: GroupService
    transactions: TransactionService
    replicas: ReplicaManager
    logs: LocalLogs
    controller: ControllerService | None
    """None on a broker-only node (process.roles=broker), which never runs the controller."""
    authorizer: Authorizer = field(default_factory=AllowAllAuthorizer)
    """What a principal may do (allow-all: Kafka without authorizer.class.name)."""
    acls: AclService | None = None
    """The ACL store and change listener when `authorizer` is an ACL authorizer
    (`trafka.node.security.acls`); None: the ACL APIs answer SECURITY_DISABLED."""
    fetch_sessions: FetchSessionCache = field(
        default_factory=lambda: FetchSessionCache(DEFAULT_SLOTS, rng=random.Random())
    )
    """Incremental fetch sessions (KIP-227, `max.incremental.fetch.session.cache.slots`)."""
    quotas: QuotaService | None = None
    """Client quotas (`trafka.node.quota`): AlterClientQuotas / DescribeClientQuotas and the
    broker's throttling."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    services: NodeServices
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
    #: or the mapped TLS subject. What an authorizer decides on (`NodeServices.authorizer`).
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = ""
    security_protocol: str = "PLAINTEXT"
    #: The connection's security session (`trafka.net.security.ConnectionSession`): the
    #: SASL handlers drive its authentication; None outside a connection.
    session: ConnectionSession | None = None
    #: The connection's mute (KIP-219; None outside a connection): a handler that hands out
    #: a throttle time of its own (the controller mutation quota) mutes it for that time.
    channel: ChannelThrottle | None = None

    # ---- quotas (trafka.node.quota) -------------------------------------------------------
    def controller_mutations(self, *, strict_since_version: int) -> MutationCharge:
        """This request's controller mutation quota (KIP-599): strict from the API version
        that knows THROTTLING_QUOTA_EXCEEDED, permissive (throttle only) before it."""
        quotas = self.services.quotas
        if quotas is None:
            return MutationCharge.unbounded()
        return quotas.controller_mutations(
            self.principal.name,
            self.client_id or "",
            strict=self.api_version >= strict_since_version,
        )

    def mute_for(self, throttle_ms: int) -> None:
        """Mute the connection after this response (Kafka's throttled channel)."""
        if self.channel is not None and throttle_ms > 0:
            self.channel.mute_for(throttle_ms)

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
        return self.services.authorizer.authorize(self.requester, [action])[0]

    def authorized_names(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names among `names` on which the sender may perform `operation`."""
        unique = sorted(set(names))
        decisions = self.services.authorizer.authorize(
            self.requester, [Action(operation, resource_type, name) for name in unique]
        )
        return {name for name, allowed in zip(unique, decisions, strict=True) if allowed}

    def authorized_operations(
        self, resource_type: ResourceType, name: str = CLUSTER_RESOURCE_NAME
    ) -> int:
        """KIP-430's bit set of the operations the sender may perform on the resource."""
        return authorized_operations_bits(
            self.services.authorizer, self.requester, resource_type, name
        )
