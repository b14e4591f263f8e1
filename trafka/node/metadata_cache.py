"""The node's view of the cluster: the live brokers, the controller, and (through the topic
cache, `trafka.node.topics.TopicManager`) the partition states the controller announced.

Sources, freshest first: the local replica of the tree (`/brokers/ids`, `/controller`: it
is fresher than the controller's last UpdateMetadata, e.g. right after start-up), then the
controller's UpdateMetadata (`update_metadata`), then this node's own read of the
registrations (`refresh_brokers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trafka.metadata_quorum import znodes
from trafka.node.controller.tree_reads import controller_id_in_tree
from trafka.node.metadata_store import MetadataStore, NoNode
from trafka.node.topics import TopicManager


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None
    endpoints: tuple[tuple[str, str, int], ...] = ()
    """Every (listener name, host, port); host/port above are the first one's."""

    def on_listener(self, listener_name: str | None) -> BrokerInfo | None:
        """This broker as seen through `listener_name` (None: it has no such listener;
        a `listener_name` of None or no endpoints: as is)."""
        if not self.endpoints or listener_name is None:
            return self
        for name, host, port in self.endpoints:
            if name == listener_name:
                return BrokerInfo(self.node_id, host, port, self.rack, self.endpoints)
        return None


PartitionUpdate = tuple[str, int, tuple[int, ...], int, int, tuple[int, ...]]
"""topic, partition, replicas, leader, leader_epoch, isr (leader -2: being deleted)."""


class MetadataCache:
    """Live brokers and the controller id, read from the tree and UpdateMetadata."""

    def __init__(
        self,
        store: MetadataStore,
        topics: TopicManager,
        *,
        node_id: int,
        inter_broker_listener: str | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self.node_id = node_id
        self.inter_broker_listener = inter_broker_listener
        """The listener brokers reach each other on (docs/security.md); None: the first."""
        self.brokers: dict[int, BrokerInfo] = {}
        """The brokers of the controller's last UpdateMetadata (or of `refresh_brokers`)."""

    def live_broker_ids(self) -> list[int]:
        """The registered brokers: `/brokers/ids` in the local replica of the tree."""
        try:
            children = self._store.children_local(znodes.BROKER_IDS)
        except NoNode:
            return sorted(self.brokers)
        return sorted(int(child) for child in children if child.isdigit())

    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """The live brokers with their endpoint on `listener_name` (the listener a client
        came in on; brokers without it are left out, as Kafka does); None: inter-broker."""
        listener = listener_name or self.inter_broker_listener
        result = []
        for broker_id in self.live_broker_ids():
            info = self.brokers.get(broker_id) or self._registered(broker_id)
            shown = None if info is None else info.on_listener(listener)
            if shown is not None:
                result.append(shown)
        return result

    def racks(self) -> dict[int, str | None]:
        """Every live broker's `broker.rack` (from its registration), for replica placement."""
        racks: dict[int, str | None] = {}
        for broker_id in self.live_broker_ids():
            info = self._registered(broker_id) or self.brokers.get(broker_id)
            racks[broker_id] = None if info is None else info.rack
        return racks

    def controller_id(self) -> int:
        """The active controller: the broker id in `/controller` (-1 when there is none)."""
        return controller_id_in_tree(self._store)

    def endpoint_for(self, broker_id: int) -> tuple[str, int] | None:
        """host, port of a registered broker's inter-broker listener (from the local replica
        of the tree; the broker's clients - fetchers, controlled shutdown - use it)."""
        info = self._registered(broker_id) or self.brokers.get(broker_id)
        shown = None if info is None else info.on_listener(self.inter_broker_listener)
        return None if shown is None else (shown.host, shown.port)

    def broker_epoch(self, broker_id: int) -> int:
        """The czxid of the broker's registration (Kafka's broker epoch); -1 if absent."""
        stat = self._store.exists_local(znodes.broker_path(broker_id))
        return -1 if stat is None else int(stat.czxid)

    def _registered(self, broker_id: int) -> BrokerInfo | None:
        try:
            raw, _ = self._store.get_local(znodes.broker_path(broker_id))
            registration = znodes.BrokerRegistration.from_json(bytes(raw), broker_id)
        except (NoNode, znodes.ZNodeFormatError):
            return None
        if not registration.endpoints:
            return None
        endpoint = registration.endpoints[0]
        return BrokerInfo(
            broker_id,
            endpoint.host,
            endpoint.port,
            registration.rack,
            tuple((e.listener_name, e.host, e.port) for e in registration.endpoints),
        )

    async def refresh_brokers(self) -> None:
        """Read every registration (after start-up, before the first UpdateMetadata)."""
        brokers: dict[int, BrokerInfo] = {}
        for child in await self._store.children(znodes.BROKER_IDS):
            if child.isdigit():
                info = self._registered(int(child))
                if info is not None:
                    brokers[info.node_id] = info
        self.brokers = brokers

    def update_metadata(
        self, live_brokers: Sequence[BrokerInfo], partitions: Sequence[PartitionUpdate]
    ) -> list[str]:
        """UpdateMetadata: the live brokers and partition states. Returns the topics this
        node does not know yet (the handler reads them from the tree)."""
        if live_brokers:
            self.brokers = {b.node_id: b for b in live_brokers}
        unknown: list[str] = []
        for topic, partition, replicas, leader, leader_epoch, isr in partitions:
            if leader == -2:
                self._topics.forget(topic)
                continue
            if self._topics.get(topic) is None:
                if topic not in unknown:
                    unknown.append(topic)
                continue
            self._topics.apply_partition_state(
                topic,
                partition,
                replicas=replicas,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=isr,
            )
        return unknown
