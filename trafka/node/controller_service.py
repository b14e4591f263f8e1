"""The controller's shell: election, tree-change detection, multis, the broker channels.

The pure controller (`trafka.node.controller.machine.Controller`, docs/controller.md) decides;
this module performs, following its contract (`trafka.node.controller.effects`):

* **Election** (CTL-03, ZK-05): every node tries to create the ephemeral `/controller`
  (`{"version":1,"brokerid":N,"timestamp":..}`); the winner reads a `TreeSnapshot` and feeds
  `ControllerFailover`, whose first write is the conditional bump of `/controller_epoch`
  (KR-04). When `/controller` disappears (the winner's quorum session expired or it stopped),
  every node races again; a node whose `/controller` is gone or not its own feeds
  `ControllerResign`.
* **Events, one at a time** (CTL-10): one task owns the `Controller`. Watches are one-shot
  (KR-06: "re-read after the notification"). `wake(event)` routes each fired watch to the
  watched path it touched (`trafka.node.controller.watch_routes`), and `TreeWatcher` re-reads
  and re-arms only those paths, feeding an event for every path whose contents changed:
  `BrokerChange` (children of `/brokers/ids`, with each registration's czxid as broker
  epoch), `TopicChange` / `PartitionModifications` (`/brokers/topics`, one topic's data per
  changed topic, parsed again only when its mzxid moved), `TopicDeletion`
  (`/admin/delete_topics`), `PartitionReassignment` (`/admin/reassign_partitions`),
  `PreferredReplicaElection` (`/admin/preferred_replica_election`), `IsrChangeNotification`
  (`/isr_change_notification`). A change costs the re-read of the paths it touched. Every
  watched path is re-read at a new term, on a `SessionEvent` (events lost), every
  `FULL_REREAD_INTERVAL_S` as a safety net, and on every tick (at least every
  `POLL_INTERVAL_S`) while the node's wake-ups carry no event (`wake()` without one).
  Events from requests (ControlledShutdown, StopReplica answers, ElectLeaders) and timers
  arrive on a bounded channel and are handled between polls.
* **Configs** (Kafka's TopicConfigHandler -> `enableTopicUncleanLeaderElection`, the dynamic
  broker config -> `enableDefaultUncleanLeaderElection`): the controller does not watch
  `/config`; the node's config change listener (`trafka.node.config_changes`) tells it which
  topics a notification (or a full re-read) named (`topic_configs_changed`), and the shell
  re-reads those `/config/topics/<t>` and feeds `TopicConfigChange` for each that changed; a
  new topic's configs are read with the topic. The node's effective broker default arrives
  through `unclean_default_changed` (`UncleanLeaderElectionDefault`).
* **Writes**: `step.writes` -> `tree_ops.to_multis` -> the quorum's `multi`, in order; a failed
  multi feeds `WritesFailed(fresh snapshot)` before anything else.
* **Requests** (CTL-11, D8): one `BrokerChannel` per live broker: a bounded queue and one task
  with one `KafkaConnection`, sending LeaderAndIsr v4, UpdateMetadata v6, StopReplica v2, each
  carrying the controller id and epoch. A request that cannot be delivered is retried on a
  new connection while the broker stays registered (a lost request only delays: brokers also
  re-learn on the next request).

Not implemented: routing below a topic (partition states are learned through
`/isr_change_notification`, CTL-40); controller-side bounds on repeatedly conflicting
multis beyond `MAX_CONSECUTIVE_FAILED_STEPS` (then the controller resigns and the election
runs again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import WatchEvent
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.messages import leader_and_isr as lai
from trafka.net.messages import stop_replica as sr
from trafka.net.messages import update_metadata as um
from trafka.node.controller import tree_ops, watch_routes
from trafka.node.controller.effects import (
    ControllerStep,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from trafka.node.controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControllerEvent,
    ControllerFailover,
    ControllerResign,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaElection,
    StopReplicaResponse,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElectionDefault,
    WritesFailed,
)
from trafka.node.controller.machine import Controller, ControllerConfig
from trafka.node.controller.payloads import BrokerInfo, TreeSnapshot, Versioned
from trafka.node.controller.watch_routes import Dirty, PendingChanges, WatchedPath
from trafka.node.inter_broker import InterBrokerClient
from trafka.node.replication.ids import BrokerId, TopicPartition, ZkVersion

log = logging.getLogger("trafka.node.controller")

POLL_INTERVAL_S = 0.1
FULL_REREAD_INTERVAL_S = 5.0
CHANNEL_QUEUE_MAX = 1_000
EVENT_QUEUE_MAX = 1_000
REQUEST_TIMEOUT_S = 10.0
RECONNECT_BACKOFF_S = 0.2
MAX_CONSECUTIVE_FAILED_STEPS = 20


def _now_ms() -> int:
    return int(time.time() * 1000)


class _ClientView:
    """`tree_ops.TreeView` over the local replica (client paths)."""

    def __init__(self, quorum: Any) -> None:
        self._quorum = quorum

    def exists(self, path: str) -> object | None:
        stat: object | None = self._quorum.exists_local(path)
        return stat

    def children(self, path: str) -> list[str]:
        from trafka.metadata_quorum.tree import NoNodeError

        try:
            return list(self._quorum.children_local(path))
        except NoNodeError:
            return []


# ---- reading the tree ------------------------------------------------------------------------


def _get(quorum: Any, path: str, *, watch: bool = False) -> tuple[bytes, Any] | None:
    from trafka.metadata_quorum.tree import NoNodeError

    try:
        data, stat = quorum.get_local(path, watch=watch)
    except NoNodeError:
        if watch:
            quorum.exists_local(path, watch=True)
        return None
    return bytes(data), stat


def _children(quorum: Any, path: str, *, watch: bool = False) -> list[str]:
    from trafka.metadata_quorum.tree import NoNodeError

    try:
        return sorted(quorum.children_local(path, watch=watch))
    except NoNodeError:
        if watch:
            quorum.exists_local(path, watch=True)
        return []


def read_brokers(quorum: Any, *, watch: bool = False) -> tuple[BrokerInfo, ...]:
    brokers = []
    for child in _children(quorum, znodes.BROKER_IDS, watch=watch):
        found = _get(quorum, znodes.broker_path(int(child)) if child.isdigit() else "/-")
        if found is None:
            continue
        try:
            registration = znodes.BrokerRegistration.from_json(found[0], int(child))
        except znodes.ZNodeFormatError:
            continue
        brokers.append(BrokerInfo.from_registration(registration, found[1].czxid))
    return tuple(brokers)


def read_topics(
    quorum: Any, *, watch: bool = False
) -> dict[str, Versioned[znodes.TopicAssignment]]:
    topics = {}
    for name in _children(quorum, znodes.BROKER_TOPICS, watch=watch):
        found = _get(quorum, znodes.topic_path(name))
        if found is None:
            continue
        try:
            topics[name] = Versioned(
                znodes.TopicAssignment.from_json(found[0]), ZkVersion(found[1].version)
            )
        except znodes.ZNodeFormatError:
            continue
    return topics


def read_partition_state(
    quorum: Any, tp: TopicPartition
) -> Versioned[znodes.PartitionState] | None:
    found = _get(quorum, znodes.partition_state_path(tp.topic, tp.partition))
    if found is None or not found[0]:
        return None
    try:
        return Versioned(znodes.PartitionState.from_json(found[0]), ZkVersion(found[1].version))
    except znodes.ZNodeFormatError:
        return None


def read_reassignment(
    quorum: Any, *, watch: bool = False
) -> Versioned[znodes.ReassignPartitions] | None:
    found = _get(quorum, znodes.REASSIGN_PARTITIONS, watch=watch)
    if found is None or not found[0]:
        return None
    try:
        return Versioned(znodes.ReassignPartitions.from_json(found[0]), ZkVersion(found[1].version))
    except znodes.ZNodeFormatError:
        return None


def read_preferred(quorum: Any, *, watch: bool = False) -> znodes.PreferredReplicaElection | None:
    found = _get(quorum, znodes.PREFERRED_REPLICA_ELECTION, watch=watch)
    if found is None or not found[0]:
        return None
    try:
        return znodes.PreferredReplicaElection.from_json(found[0])
    except znodes.ZNodeFormatError:
        return None


def read_topic_config(quorum: Any, topic: str) -> dict[str, str]:
    """`/config/topics/<topic>`'s overrides; empty when it has none (or is malformed)."""
    found = _get(quorum, znodes.topic_config_path(topic))
    if found is None or not found[0]:
        return {}
    try:
        return dict(znodes.EntityConfig.from_json(found[0]).config)
    except znodes.ZNodeFormatError:
        log.warning("controller: ignoring the malformed config of topic %s", topic)
        return {}


def read_snapshot(quorum: Any) -> TreeSnapshot:
    """What the controller reads at failover (CTL-44 step 7), from the local replica."""
    found = _get(quorum, znodes.CONTROLLER_EPOCH)
    epoch = None
    if found is not None:
        epoch = Versioned(znodes.ControllerEpoch.from_json(found[0]), ZkVersion(found[1].version))
    topics = read_topics(quorum)
    states = {}
    configs = {}
    for name, assignment in topics.items():
        config = read_topic_config(quorum, name)
        if config:
            configs[name] = config
        for partition in assignment.data.partitions:
            tp = TopicPartition(name, partition)
            state = read_partition_state(quorum, tp)
            if state is not None:
                states[tp] = state
    return TreeSnapshot(
        controller_epoch=epoch,
        brokers=read_brokers(quorum),
        topics=topics,
        partition_states=states,
        reassignment=read_reassignment(quorum),
        preferred_election=read_preferred(quorum),
        topics_to_delete=tuple(_children(quorum, znodes.DELETE_TOPICS)),
        isr_change_notifications=tuple(_children(quorum, znodes.ISR_CHANGE_NOTIFICATION)),
        topic_configs=configs,
    )


def controller_id_in_tree(quorum: Any) -> int:
    """The broker id in `/controller`, -1 when there is none."""
    found = _get(quorum, znodes.CONTROLLER)
    if found is None:
        return -1
    try:
        return znodes.ControllerRegistration.from_json(found[0]).broker_id
    except znodes.ZNodeFormatError:
        return -1


# ---- encoding the controller's requests ------------------------------------------------------


def _endpoint(info: BrokerInfo, listener_name: str | None = None) -> tuple[str, int] | None:
    """The broker's endpoint on `listener_name` (the inter-broker listener); any when None."""
    for name, host, port, _ in _endpoints(info):
        if listener_name is None or name == listener_name:
            return host, port
    return None


def _endpoints(info: BrokerInfo) -> list[tuple[str, str, int, str]]:
    """(listener name, host, port, security protocol) of each parsable endpoint."""
    result = []
    protocols = list(info.security_protocols) + ["PLAINTEXT"] * len(info.endpoints)
    for text, protocol in zip(info.endpoints, protocols, strict=False):
        name, _, rest = text.partition("://")
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            result.append((name, host.strip("[]"), int(port), protocol))
    return result


_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _b(broker_id: int) -> Any:
    from kio.schema.types import BrokerId as KioBrokerId

    return KioBrokerId(int(broker_id))


def _bs(broker_ids: tuple[BrokerId, ...]) -> tuple[Any, ...]:
    return tuple(_b(b) for b in broker_ids)


def encode_request(request: Any) -> Any:
    """effects.* request -> the declared wire message (LeaderAndIsr v4, UpdateMetadata v6,
    StopReplica v2)."""
    from kio.static.primitive import i16, i32, i64

    if isinstance(request, LeaderAndIsrRequest):
        by_topic: dict[str, list[Any]] = {}
        for s in request.partition_states:
            by_topic.setdefault(s.tp.topic, []).append(
                lai.LeaderAndIsrPartitionStateV4(
                    partition_index=i32(s.tp.partition),
                    controller_epoch=i32(s.controller_epoch),
                    leader=_b(s.leader),
                    leader_epoch=i32(s.leader_epoch),
                    isr=_bs(s.isr),
                    zk_version=i32(s.zk_version),
                    replicas=_bs(s.replicas),
                    is_new=s.is_new,
                )
            )
        leaders = []
        for info in request.live_leaders:
            endpoint = _endpoint(info)
            if endpoint is not None:
                leaders.append(
                    lai.LeaderAndIsrLiveLeaderV4(
                        broker_id=_b(info.broker_id), host_name=endpoint[0], port=i32(endpoint[1])
                    )
                )
        return lai.LeaderAndIsrRequestV4(
            controller_id=_b(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            topic_states=tuple(
                lai.LeaderAndIsrTopicStateV4(topic_name=t, partition_states=tuple(p))  # type: ignore[arg-type]
                for t, p in sorted(by_topic.items())
            ),
            live_leaders=tuple(leaders),
        )
    if isinstance(request, UpdateMetadataRequest):
        um_topics: dict[str, list[Any]] = {}
        for u in request.partition_states:
            um_topics.setdefault(u.tp.topic, []).append(
                um.UpdateMetadataPartitionStateV6(
                    partition_index=i32(u.tp.partition),
                    controller_epoch=i32(u.controller_epoch),
                    leader=_b(u.leader),
                    leader_epoch=i32(u.leader_epoch),
                    isr=_bs(u.isr),
                    zk_version=i32(u.zk_version),
                    replicas=_bs(u.replicas),
                    offline_replicas=_bs(u.offline_replicas),
                )
            )
        brokers = []
        for info in request.live_brokers:
            endpoints = _endpoints(info)
            if not endpoints:
                continue
            brokers.append(
                um.UpdateMetadataBrokerV6(
                    id=_b(info.broker_id),
                    endpoints=tuple(
                        um.UpdateMetadataEndpointV6(
                            port=i32(port),
                            host=host,
                            listener=name,
                            security_protocol=i16(_SECURITY_PROTOCOL_IDS.get(protocol, 0)),
                        )
                        for name, host, port, protocol in endpoints
                    ),
                    rack=info.rack,
                )
            )
        return um.UpdateMetadataRequestV6(
            controller_id=_b(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            topic_states=tuple(
                um.UpdateMetadataTopicStateV6(topic_name=t, partition_states=tuple(p))  # type: ignore[arg-type]
                for t, p in sorted(um_topics.items())
            ),
            live_brokers=tuple(brokers),
        )
    assert isinstance(request, StopReplicaRequest)
    sr_topics: dict[str, list[int]] = {}
    for tp in request.partitions:
        sr_topics.setdefault(tp.topic, []).append(tp.partition)
    return sr.StopReplicaRequestV2(
        controller_id=_b(request.controller_id),
        controller_epoch=i32(request.controller_epoch),
        broker_epoch=i64(request.broker_epoch),
        delete_partitions=request.delete_partitions,
        topics=tuple(
            sr.StopReplicaTopicV2(name=t, partition_indexes=tuple(i32(p) for p in ps))  # type: ignore[arg-type]
            for t, ps in sorted(sr_topics.items())
        ),
    )


class BrokerChannel:
    """One broker's queue and sender task (ControllerChannelManager, CTL-11)."""

    def __init__(self, service: ControllerService, info: BrokerInfo) -> None:
        self.service = service
        self.info = info
        self.send_channel, self.receive_channel = trio.open_memory_channel[Any](CHANNEL_QUEUE_MAX)
        self.cancel_scope = trio.CancelScope()

    def enqueue(self, request: Any) -> None:
        try:
            self.send_channel.send_nowait(request)
        except trio.WouldBlock:
            log.warning(
                "controller channel to broker %d full: request dropped", self.info.broker_id
            )

    async def run(self) -> None:
        connection: KafkaConnection | None = None
        with self.cancel_scope:
            try:
                async for request in self.receive_channel:
                    while True:
                        inter_broker = self.service.inter_broker
                        endpoint = _endpoint(self.info, inter_broker.listener_name)
                        if endpoint is None:
                            break
                        try:
                            if connection is None or connection.closed:
                                connection = await inter_broker.connect(
                                    endpoint[0],
                                    endpoint[1],
                                    client_id=f"controller-{self.service.node_id}",
                                    request_timeout_s=REQUEST_TIMEOUT_S,
                                )
                            response = await connection.request(encode_request(request))
                        except (ClientError, OSError) as error:
                            log.info(
                                "controller -> broker %d: %s; retrying", self.info.broker_id, error
                            )
                            if connection is not None:
                                await connection.close()
                            connection = None
                            await trio.sleep(RECONNECT_BACKOFF_S)
                            continue
                        self._answered(request, response)
                        break
            finally:
                if connection is not None:
                    await connection.close()

    def _answered(self, request: Any, response: Any) -> None:
        if not isinstance(request, StopReplicaRequest) or not request.delete_partitions:
            return
        errors: dict[TopicPartition, ErrorCode] = {
            tp: ErrorCode(int(response.error_code)) for tp in request.partitions
        }
        for entry in response.partition_errors:
            errors[TopicPartition(str(entry.topic_name), int(entry.partition_index))] = ErrorCode(
                int(entry.error_code)
            )
        self.service.submit(StopReplicaResponse(self.info.broker_id, errors))


@dataclass(frozen=True, slots=True)
class _Reply:
    """An event whose step goes back to a waiting request handler (ElectLeaders, cancel)."""

    event: ControllerEvent
    reply: trio.MemorySendChannel[ControllerStep]


@dataclass(slots=True)
class _Seen:
    """The last contents fed to the controller, per watched path."""

    brokers: tuple[BrokerInfo, ...] | None = None
    topics: Mapping[str, Versioned[znodes.TopicAssignment]] | None = None
    deletions: tuple[str, ...] | None = None
    reassignment: Versioned[znodes.ReassignPartitions] | bool | None = False
    preferred: znodes.PreferredReplicaElection | bool | None = False
    isr_changes: tuple[str, ...] | None = None
    topic_configs: dict[str, Mapping[str, str]] | None = None
    """Overrides per topic that has any; None: not read in this term yet."""


class TreeWatcher:
    """The controller's watched paths (CTL-08) read from the local replica: re-reads only
    what a `Dirty` names (`watch_routes`), re-arms those watches, and returns one event per
    path whose contents changed since they were last fed to the controller.

    A topic's assignment is parsed again only when its znode's mzxid moved, so even a full
    re-read costs one lookup per topic, not one JSON parse.
    """

    def __init__(self, quorum: Any) -> None:
        self.quorum = quorum
        self.seen = _Seen()
        self._parsed: dict[str, tuple[int, Versioned[znodes.TopicAssignment]]] = {}
        self.reads = 0
        """Znode reads done by `changes` (for tests and logs)."""

    def reset(self) -> None:
        self.seen = _Seen()

    def remember(self, snapshot: TreeSnapshot) -> None:
        self.seen.brokers = snapshot.brokers
        self.seen.topics = snapshot.topics
        self.seen.deletions = snapshot.topics_to_delete
        self.seen.reassignment = snapshot.reassignment
        self.seen.preferred = snapshot.preferred_election
        self.seen.isr_changes = snapshot.isr_change_notifications
        self.seen.topic_configs = dict(snapshot.topic_configs)

    def _get(self, path: str, *, watch: bool = False) -> tuple[bytes, Any] | None:
        self.reads += 1
        return _get(self.quorum, path, watch=watch)

    def _children(self, path: str, *, watch: bool = False) -> list[str]:
        self.reads += 1
        return _children(self.quorum, path, watch=watch)

    def _topic(self, name: str) -> Versioned[znodes.TopicAssignment] | None:
        found = self._get(znodes.topic_path(name), watch=True)
        if found is None:
            self._parsed.pop(name, None)
            return None
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == found[1].mzxid:
            return cached[1]
        try:
            assignment = Versioned(
                znodes.TopicAssignment.from_json(found[0]), ZkVersion(found[1].version)
            )
        except znodes.ZNodeFormatError:
            self._parsed.pop(name, None)
            return None
        self._parsed[name] = (found[1].mzxid, assignment)
        return assignment

    def _topics(self, dirty: Dirty) -> dict[str, Versioned[znodes.TopicAssignment]]:
        previous = self.seen.topics or {}
        if dirty.wants(WatchedPath.TOPICS) or self.seen.topics is None:
            names = self._children(znodes.BROKER_TOPICS, watch=True)
            stale = set(names) if dirty.everything or self.seen.topics is None else set()
        else:
            names = list(previous)
            stale = set()
        stale |= {name for name in names if name not in previous}
        stale |= set(dirty.topics) & set(names)
        for gone in set(self._parsed) - set(names):
            del self._parsed[gone]
        topics: dict[str, Versioned[znodes.TopicAssignment]] = {}
        for name in sorted(names):
            assignment = self._topic(name) if name in stale else previous.get(name)
            if assignment is not None:
                topics[name] = assignment
        return topics

    def _brokers(self) -> tuple[BrokerInfo, ...]:
        brokers = []
        for child in self._children(znodes.BROKER_IDS, watch=True):
            if not child.isdigit():
                continue
            found = self._get(znodes.broker_path(int(child)), watch=True)
            if found is None:
                continue
            try:
                registration = znodes.BrokerRegistration.from_json(found[0], int(child))
            except znodes.ZNodeFormatError:
                continue
            brokers.append(BrokerInfo.from_registration(registration, found[1].czxid))
        return tuple(brokers)

    def changes(self, dirty: Dirty) -> list[ControllerEvent]:
        """Re-read what `dirty` names; one event per changed path (re-arming the watches)."""
        quorum = self.quorum
        seen = self.seen
        events: list[ControllerEvent] = []
        if dirty.wants(WatchedPath.BROKERS):
            brokers = self._brokers()
            if brokers != seen.brokers:
                seen.brokers = brokers
                events.append(BrokerChange(brokers))
        if dirty.wants(WatchedPath.TOPICS) or dirty.topics:
            previous = seen.topics or {}
            topics = self._topics(dirty)
            if set(topics) != set(previous):
                events.append(TopicChange(topics))
            for name, assignment in topics.items():
                if name in previous and previous[name] != assignment:
                    events.append(PartitionModifications(name, assignment))
            seen.topics = topics
            # A new topic's configs were written before it (and without a notification).
            events.extend(self._config_changes(sorted(set(topics) - set(previous)), set(topics)))
        if dirty.wants(WatchedPath.DELETIONS):
            deletions = tuple(self._children(znodes.DELETE_TOPICS, watch=True))
            if deletions != seen.deletions:
                seen.deletions = deletions
                events.append(TopicDeletion(deletions))
        if dirty.wants(WatchedPath.REASSIGNMENT):
            self.reads += 1
            reassignment = read_reassignment(quorum, watch=True)
            if reassignment != seen.reassignment:
                seen.reassignment = reassignment
                events.append(PartitionReassignment(reassignment))
        if dirty.wants(WatchedPath.PREFERRED):
            self.reads += 1
            preferred = read_preferred(quorum, watch=True)
            if preferred != seen.preferred:
                seen.preferred = preferred
                if preferred is not None:
                    events.append(
                        PreferredReplicaElection(
                            tuple(
                                TopicPartition(p.topic, p.partition) for p in preferred.partitions
                            )
                        )
                    )
        if dirty.wants(WatchedPath.ISR_CHANGES):
            isr_change = self._isr_changes()
            if isr_change is not None:
                events.append(isr_change)
        return events

    def config_changes(self, topics: Iterable[str] | None) -> list[ControllerEvent]:
        """Re-read `/config/topics/<t>` of `topics` (None: every known topic); one
        `TopicConfigChange` per topic whose overrides differ from what was fed."""
        known = set(self.seen.topics or {})
        names = sorted(known if topics is None else set(topics) & known)
        return self._config_changes(names, known)

    def _config_changes(self, names: list[str], known: set[str]) -> list[ControllerEvent]:
        if self.seen.topic_configs is None:
            self.seen.topic_configs = {}
        seen = self.seen.topic_configs
        for gone in set(seen) - known:
            del seen[gone]
        events: list[ControllerEvent] = []
        for name in names:
            self.reads += 1
            configs = read_topic_config(self.quorum, name)
            if configs == seen.get(name, {}):
                continue
            if configs:
                seen[name] = configs
            else:
                seen.pop(name, None)
            events.append(TopicConfigChange(name, configs))
        return events

    def _isr_changes(self) -> IsrChangeNotification | None:
        isr_changes = tuple(self._children(znodes.ISR_CHANGE_NOTIFICATION, watch=True))
        if not isr_changes or isr_changes == self.seen.isr_changes:
            self.seen.isr_changes = isr_changes
            return None
        self.seen.isr_changes = isr_changes
        states: dict[TopicPartition, Versioned[znodes.PartitionState]] = {}
        for child in isr_changes:
            found = self._get(f"{znodes.ISR_CHANGE_NOTIFICATION}/{child}")
            if found is None:
                continue
            try:
                notification = znodes.IsrChangeNotification.from_json(found[0])
            except znodes.ZNodeFormatError:
                continue
            for p in notification.partitions:
                tp = TopicPartition(p.topic, p.partition)
                self.reads += 1
                state = read_partition_state(self.quorum, tp)
                if state is not None:
                    states[tp] = state
        return IsrChangeNotification(isr_changes, states)


class ControllerService:
    """Runs the controller on this node when it wins `/controller` (see module docstring)."""

    def __init__(
        self,
        *,
        node_id: int,
        quorum: Any,
        config: ControllerConfig,
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self.node_id = node_id
        #: How to reach brokers: the inter-broker listener and its security (issue 12, 14).
        self.inter_broker = inter_broker or InterBrokerClient()
        self.quorum = quorum
        self.config = config
        self.controller: Controller | None = None
        self.channels: dict[BrokerId, BrokerChannel] = {}
        self.watcher = TreeWatcher(quorum)
        self._pending = PendingChanges()
        self._routed = False
        self._last_full_reread_s = 0.0
        self._send_events, self._receive_events = trio.open_memory_channel[Any](EVENT_QUEUE_MAX)
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._timer_scopes: list[trio.CancelScope] = []
        self._failed_steps = 0
        self.pending_answers: dict[BrokerId, list[trio.MemorySendChannel[Any]]] = {}
        self._config_topics: set[str] | None = set()
        """Topics whose configs to re-read on the next tick; None: all of them."""

    # ---- inputs from the rest of the node -----------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.controller is not None and self.controller.is_active

    @property
    def epoch(self) -> int:
        if self.controller is None or self.controller.epoch is None:
            return -1
        return int(self.controller.epoch)

    def _active(self) -> bool:
        return self.is_active

    def submit(self, event: ControllerEvent) -> None:
        """Queue an event from a request handler, a channel or a timer."""
        try:
            self._send_events.send_nowait(event)
        except trio.WouldBlock:
            log.warning("controller event queue full: %s dropped", type(event).__name__)
        self._wake.set()

    async def run_event(
        self, event: ControllerEvent, timeout_s: float = 30.0
    ) -> ControllerStep | None:
        """Feed `event` and return its step (after its writes committed); None if this node
        is not (or stops being) the controller or the step does not come in time."""
        if not self.is_active:
            return None
        send, receive = trio.open_memory_channel[ControllerStep](1)
        try:
            self._send_events.send_nowait(_Reply(event, send))
        except trio.WouldBlock:
            return None
        self._wake.set()
        with trio.move_on_after(timeout_s):
            try:
                return await receive.receive()
            except trio.EndOfChannel:
                return None
        return None

    def topic_configs_changed(self, topics: Iterable[str] | None) -> None:
        """The node applied a config change of `topics` (None: a full re-read of every
        entity): re-read their `/config/topics/<t>` soon (Kafka's TopicConfigHandler ->
        `enableTopicUncleanLeaderElection`)."""
        if topics is None:
            self._config_topics = None
        elif self._config_topics is not None:
            self._config_topics.update(topics)
            if len(self._config_topics) > watch_routes.MAX_DIRTY_TOPICS:
                self._config_topics = None
        self._wake.set()

    def unclean_default_changed(self, enabled: bool) -> None:
        """The node's effective `unclean.leader.election.enable` (its dynamic broker config
        or the cluster default changed): the default of every topic without an override."""
        if enabled == self.config.unclean_leader_election_enable:
            return
        self.config = replace(self.config, unclean_leader_election_enable=enabled)
        if self.is_active:  # otherwise the next term's Controller starts with it
            self.submit(UncleanLeaderElectionDefault(enabled))

    def wake(self, event: object | None = None) -> None:
        """A quorum event (`WatchEvent`/`SessionEvent`) for this node: re-read what it
        touched, soon. Without an event (a caller that does not pass it), re-read every
        watched path, as on a lost event stream."""
        if isinstance(event, WatchEvent):
            self._routed = True
            self._pending.mark_path(event.path)
        else:
            self._pending.mark_everything()
        self._wake.set()

    # ---- the one controller task --------------------------------------------------------------
    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                while True:
                    try:
                        await self._tick()
                    except Exception:
                        log.exception("controller tick failed")
                        await self._resign()
                    with trio.move_on_after(POLL_INTERVAL_S):
                        await self._wake.wait()
                    self._wake = trio.Event()
            finally:
                await self._resign_quietly()
                nursery.cancel_scope.cancel()

    async def _tick(self) -> None:
        holder = controller_id_in_tree(self.quorum)
        if self.is_active and holder != self.node_id:
            log.info("node %d: /controller is %d now: resigning", self.node_id, holder)
            await self._resign()
        if holder == -1:
            await self._elect()
            return
        if not self.is_active:
            _get(self.quorum, znodes.CONTROLLER, watch=True)
            return
        while True:
            try:
                event = self._receive_events.receive_nowait()
            except trio.WouldBlock:
                break
            if isinstance(event, _Reply):
                with event.reply:
                    step = await self._process(event.event)
                    if step is not None:
                        event.reply.send_nowait(step)
            else:
                await self._process(event)
            if not self._active():
                return
        for change in self._changes():
            await self._process(change)
            if not self._active():
                return

    def _changes(self) -> list[ControllerEvent]:
        """Re-read what the routed watches touched (everything on every poll while watch
        events arrive without their path; everything every `FULL_REREAD_INTERVAL_S`
        otherwise, as a safety net)."""
        now_s = time.monotonic()
        if not self._routed or now_s - self._last_full_reread_s >= FULL_REREAD_INTERVAL_S:
            self._pending.mark_everything()
        dirty = self._pending.take()
        if dirty.everything:
            self._last_full_reread_s = now_s
        events = [] if dirty.empty else self.watcher.changes(dirty)
        if any(isinstance(event, BrokerChange) for event in events):
            assert self.watcher.seen.brokers is not None
            self._sync_channels(self.watcher.seen.brokers)
        config_topics, self._config_topics = self._config_topics, set()
        if config_topics is None or config_topics:
            events.extend(self.watcher.config_changes(config_topics))
        return events

    async def _elect(self) -> None:
        from trafka.metadata_quorum.tree import ZooKeeperError

        registration = znodes.ControllerRegistration(self.node_id, _now_ms())
        try:
            await self.quorum.create(znodes.CONTROLLER, registration.to_json(), ephemeral=True)
        except ZooKeeperError:
            return  # somebody else won (or the quorum is unavailable): try again later
        await self.quorum.sync()
        self.controller = Controller(BrokerId(self.node_id), self.config)
        self.watcher.reset()
        self._pending.mark_everything()  # arm every watch of the new term
        # Drain stale events of a previous term.
        while True:
            try:
                self._receive_events.receive_nowait()
            except trio.WouldBlock:
                break
        self._config_topics = set()  # the snapshot reads every topic's configs
        snapshot = read_snapshot(self.quorum)
        self.watcher.remember(snapshot)
        self._sync_channels(snapshot.brokers)
        await self._process(ControllerFailover(snapshot, _now_ms()))
        if self.is_active:
            log.info("node %d is the controller, epoch %d", self.node_id, self.epoch)

    async def _process(self, event: ControllerEvent) -> ControllerStep | None:
        controller = self.controller
        if controller is None:
            return None
        step = controller.handle(event)
        while True:
            if await self._execute_writes(step):
                self._failed_steps = 0
                break
            self._failed_steps += 1
            if self._failed_steps > MAX_CONSECUTIVE_FAILED_STEPS:
                log.warning("controller: %d failed steps in a row: resigning", self._failed_steps)
                await self._resign()
                return None
            snapshot = read_snapshot(self.quorum)
            step = controller.handle(WritesFailed(snapshot))
        self._perform(step)
        if step.resigned or not controller.is_active:
            await self._resign()
        return step

    async def _execute_writes(self, step: ControllerStep) -> bool:
        from trafka.metadata_quorum.tree import ZooKeeperError

        if not step.writes:
            return True
        try:
            multis = tree_ops.to_multis(step.writes, _ClientView(self.quorum))
            for ops in multis:
                await self.quorum.multi(list(ops))
        except (ZooKeeperError, tree_ops.MultiTooLarge) as error:
            log.info("controller multi failed: %s", error)
            await self.quorum.sync()
            return False
        return True

    def _perform(self, step: ControllerStep) -> None:
        for send in step.requests:
            channel = self.channels.get(send.broker_id)
            if channel is not None:
                channel.enqueue(send.request)
        for timer in step.timers:
            self._arm_timer(timer.at_ms)
        for answer in step.answers:
            for waiter in self.pending_answers.pop(answer.broker_id, []):
                try:
                    waiter.send_nowait(answer)
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
        if step.elections:
            unclean = [r for r in step.elections if r.unclean]
            log.info(
                "controller %d: %d leader elections (%s%s)",
                self.node_id,
                len(step.elections),
                ", ".join(
                    f"{r.tp.topic}-{r.tp.partition}->{r.leader}@{r.leader_epoch}"
                    for r in step.elections[:5]
                ),
                ", ..." if len(step.elections) > 5 else "",
            )
            for report in unclean:
                log.warning(
                    "UNCLEAN leader election: %s-%d leader %d epoch %d",
                    report.tp.topic,
                    report.tp.partition,
                    report.leader,
                    report.leader_epoch,
                )

    def _arm_timer(self, at_ms: int) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._timer_scopes.append(scope)

        async def fire() -> None:
            with scope:
                await trio.sleep(max(0.0, (at_ms - _now_ms()) / 1000))
                self.submit(AutoPreferredReplicaLeaderElection(_now_ms()))

        self._nursery.start_soon(fire)

    def _sync_channels(self, brokers: tuple[BrokerInfo, ...]) -> None:
        assert self._nursery is not None
        wanted = {b.broker_id: b for b in brokers}
        for broker_id in list(self.channels):
            channel = self.channels[broker_id]
            if broker_id not in wanted or wanted[broker_id] != channel.info:
                channel.cancel_scope.cancel()
                del self.channels[broker_id]
        for broker_id, info in wanted.items():
            if broker_id not in self.channels:
                channel = BrokerChannel(self, info)
                self.channels[broker_id] = channel
                self._nursery.start_soon(channel.run)

    async def _resign(self) -> None:
        controller = self.controller
        if controller is not None and controller.is_active:
            controller.handle(ControllerResign())
        self.controller = None
        for channel in self.channels.values():
            channel.cancel_scope.cancel()
        self.channels.clear()
        for scope in self._timer_scopes:
            scope.cancel()
        self._timer_scopes.clear()
        self.watcher.reset()
        for waiters in self.pending_answers.values():
            for waiter in waiters:
                waiter.close()
        self.pending_answers.clear()
        # If /controller is still ours (e.g. too many failed steps), give it up.
        if controller_id_in_tree(self.quorum) == self.node_id:
            from trafka.metadata_quorum.tree import ZooKeeperError

            try:
                await self.quorum.delete(znodes.CONTROLLER)
            except ZooKeeperError:
                pass

    async def _resign_quietly(self) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(2):
                try:
                    await self._resign()
                except Exception:
                    log.exception("controller resign failed")
