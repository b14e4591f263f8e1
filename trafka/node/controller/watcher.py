"""The controller's watched paths (CTL-08): re-read what a fired watch touched, one event per
path whose contents changed (see `TreeWatcher`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import Stat
from trafka.node.controller.events import (
    BrokerChange,
    ControllerEvent,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaElection,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
)
from trafka.node.controller.payloads import BrokerInfo, TreeSnapshot, Versioned
from trafka.node.controller.tree_reads import (
    get_children,
    get_node,
    read_partition_state,
    read_preferred,
    read_reassignment,
    read_topic_config,
)
from trafka.node.controller.watch_routes import Dirty, WatchedPath
from trafka.node.metadata_store import LocalTreeReads
from trafka.node.replication.ids import TopicPartition, ZkVersion


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

    def __init__(self, tree: LocalTreeReads) -> None:
        self.tree = tree
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

    def _get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat] | None:
        self.reads += 1
        return get_node(self.tree, path, watch=watch)

    def _children(self, path: str, *, watch: bool = False) -> list[str]:
        self.reads += 1
        return get_children(self.tree, path, watch=watch)

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
        tree = self.tree
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
            reassignment = read_reassignment(tree, watch=True)
            if reassignment != seen.reassignment:
                seen.reassignment = reassignment
                events.append(PartitionReassignment(reassignment))
        if dirty.wants(WatchedPath.PREFERRED):
            self.reads += 1
            preferred = read_preferred(tree, watch=True)
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
            configs = read_topic_config(self.tree, name)
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
                state = read_partition_state(self.tree, tp)
                if state is not None:
                    states[tp] = state
        return IsrChangeNotification(isr_changes, states)
