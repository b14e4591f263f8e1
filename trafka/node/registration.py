"""A node's entries in the tree: its cluster id and its broker registration.

* `/cluster/id` (`{"version":"1","id":...}`): read, or created by the first node of a new
  cluster (`cluster.id` if configured, else a random id in Kafka's Uuid text form);
* `/brokers/ids/<id>`: Kafka's registration JSON (endpoints, rack, timestamp), ephemeral in
  the node's quorum session, so it goes away when the node stops or its session expires;
  the broker registers again after a session loss (`follow_quorum_events`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence

import trio

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.bridge import QuorumEvent, SessionEvent, SessionEventKind
from trafka.metadata_quorum.tree import SessionExpiredError
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import MetadataStore, NodeExists
from trafka.node.security.listeners import ListenerSpec, resolve_listeners
from trafka.node.topics import topic_id_text

log = logging.getLogger("trafka.node.broker")

#: Registration attempts when the quorum session expires meanwhile (a loaded start).
REGISTER_ATTEMPTS = 40
REGISTER_RETRY_S = 0.25


async def load_cluster_id(store: MetadataStore, configured: str | None) -> str:
    raw = await store.get(znodes.CLUSTER_ID)
    if raw:
        return znodes.ClusterId.from_json(raw).cluster_id
    cluster_id = configured or topic_id_text(uuid.uuid4())
    try:
        await store.create(znodes.CLUSTER_ID, znodes.ClusterId(cluster_id).to_json())
    except NodeExists:
        raw = await store.get(znodes.CLUSTER_ID)
        assert raw is not None
        return znodes.ClusterId.from_json(raw).cluster_id
    return cluster_id


async def register(
    store: MetadataStore,
    config: BrokerConfig,
    *,
    now_ms: int,
    listeners: Sequence[ListenerSpec] | None = None,
) -> None:
    """Create (or, if it survived, replace) this node's `/brokers/ids/<id>`.

    A session that expires meanwhile (a start on a loaded machine can miss heartbeats) is
    replaced by the quorum bridge: retry on the new one instead of failing the node's start,
    as a Kafka broker re-registers on a new ZooKeeper session.
    """
    specs = resolve_listeners(config) if listeners is None else listeners
    registration = znodes.BrokerRegistration(
        broker_id=config.node_id,
        # Every listener with its security protocol (Kafka's ZK registration: endpoints
        # + listener_security_protocol_map).
        endpoints=tuple(
            znodes.Endpoint(s.name, s.advertised_host, s.advertised_port, s.security_protocol)
            for s in specs
        ),
        timestamp_ms=now_ms,
        rack=config.get("broker.rack"),
    )
    path = znodes.broker_path(config.node_id)
    for attempt in range(REGISTER_ATTEMPTS):
        try:
            try:
                await store.create(path, registration.to_json(), ephemeral=True)
            except NodeExists:
                await store.set_data(path, registration.to_json())
            return
        except SessionExpiredError:
            if attempt + 1 == REGISTER_ATTEMPTS:
                raise
            log.warning("quorum session expired while registering; retrying")
            await trio.sleep(REGISTER_RETRY_S)


async def follow_quorum_events(
    store: MetadataStore,
    listeners: Sequence[Callable[[QuorumEvent], None]],
    after_session_loss: Callable[[], Awaitable[None]],
) -> None:
    """The node's one quorum event stream: after an expired session or a lost event stream
    `after_session_loss` (register again, re-read), then every event to every listener."""
    async for event in store.events():
        if isinstance(event, SessionEvent) and event.kind in (
            SessionEventKind.EXPIRED,
            SessionEventKind.EVENTS_LOST,
        ):
            log.warning("quorum session event %s: registering again", event.kind.value)
            try:
                await after_session_loss()
            except Exception:
                log.exception("re-registration failed")
        for listener in list(listeners):
            try:
                listener(event)
            except Exception:
                log.exception("quorum event listener failed")
