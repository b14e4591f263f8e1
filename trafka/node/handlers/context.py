"""What a handler gets besides its request: the request header and the node's services.

`NodeServices` holds one typed port per service of the node, built once by the broker
(`trafka.node.broker`, the composition root); a handler uses the few it needs and nothing
else. Every request gets its own `RequestContext` (header fields, its place in the
connection's order, and, once authentication lands, the authenticated principal).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trafka.net.server import RequestTurn
from trafka.node.config.service import ConfigService
from trafka.node.controller.service import ControllerService
from trafka.node.group_service import GroupService
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_cache import MetadataCache
from trafka.node.metadata_store import MetadataStore
from trafka.node.producer_ids import ProducerIdManager
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicManager
from trafka.node.txn_service import TransactionService


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
