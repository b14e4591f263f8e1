"""Which of the controller's watched paths a fired watch makes stale (CTL-08, KR-06).

The controller shell keeps the last contents it fed the `Controller` for each watched path
(the seeds' listeners, CTL-08):

    path                                   watch     listener (CTL-08)              WatchedPath
    /brokers/ids                           children  BrokerChangeListener           BROKERS
    /brokers/topics                        children  TopicChangeListener            TOPICS
    /brokers/topics/<t>                    data      AddPartitionListener, one/topic TOPIC (+ t)
    /admin/delete_topics                   children  DeleteTopicsListener           DELETIONS
    /admin/reassign_partitions             data      PartitionsReassignedListener   REASSIGNMENT
    /admin/preferred_replica_election      data      PreferredReplicaElectionL.     PREFERRED
    /isr_change_notification               children  IsrChangeNotificationListener  ISR_CHANGES

A fired watch names a path (ZooKeeper's WatchedEvent: type, path); `route(path)` says which
of those the shell must re-read, so one change costs a re-read of the paths it touched, not
of the whole set (a changed topic re-reads that topic's assignment only). Events on paths
the controller does not watch (partition states, `/config`, other components' watches on
the same node) route to nothing. `/controller` is not routed: the shell reads it on every
tick anyway.

`PendingChanges` accumulates routes between two re-reads, bounded: past `MAX_DIRTY_TOPICS`
distinct topics it collapses into "everything" (one full re-read is cheaper than a huge
set). "Everything" is also what a lost event stream (`SessionEvent` EVENTS_LOST or EXPIRED),
a new controller term (the watches must all be armed) and the legacy un-routed wake-up
ask for.

Pure: no trio, no clock, no quorum. What is NOT here: routing below a topic (partition
state changes reach the controller through `/isr_change_notification`, CTL-40).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from trafka.metadata_quorum import znodes

MAX_DIRTY_TOPICS = 10_000


class WatchedPath(enum.Enum):
    """One of the controller's watched paths (one seeds' listener each, CTL-08)."""

    BROKERS = "brokers"
    TOPICS = "topics"
    TOPIC = "topic"
    DELETIONS = "deletions"
    REASSIGNMENT = "reassignment"
    PREFERRED = "preferred"
    ISR_CHANGES = "isr_changes"


@dataclass(frozen=True, slots=True)
class Dirty:
    """What must be re-read: everything, or some watched paths and some topics' data."""

    everything: bool = False
    paths: frozenset[WatchedPath] = frozenset()
    topics: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.everything and not self.paths and not self.topics

    def wants(self, path: WatchedPath) -> bool:
        return self.everything or path in self.paths


EVERYTHING = Dirty(everything=True)
NOTHING = Dirty()

_PREFIXED_CHILDREN: tuple[tuple[str, WatchedPath], ...] = (
    (znodes.BROKER_IDS, WatchedPath.BROKERS),
    (znodes.DELETE_TOPICS, WatchedPath.DELETIONS),
    (znodes.ISR_CHANGE_NOTIFICATION, WatchedPath.ISR_CHANGES),
)
_DATA: dict[str, WatchedPath] = {
    znodes.REASSIGN_PARTITIONS: WatchedPath.REASSIGNMENT,
    znodes.PREFERRED_REPLICA_ELECTION: WatchedPath.PREFERRED,
}


def route(path: str) -> Dirty:
    """The watched paths a fired watch on `path` (a client path) makes stale."""
    if path in _DATA:
        return Dirty(paths=frozenset({_DATA[path]}))
    for parent, watched in _PREFIXED_CHILDREN:
        # the parent (children changed, created, deleted) or one child (its own data watch)
        if path == parent or (path.startswith(parent + "/") and "/" not in path[len(parent) + 1 :]):
            return Dirty(paths=frozenset({watched}))
    topics = znodes.BROKER_TOPICS
    if path == topics:
        return Dirty(paths=frozenset({WatchedPath.TOPICS}))
    if path.startswith(topics + "/"):
        name = path[len(topics) + 1 :]
        if name and "/" not in name:
            # a topic's data changed, or it was created/deleted: the child list may change too
            return Dirty(paths=frozenset({WatchedPath.TOPICS}), topics=frozenset({name}))
    if path in ("/brokers", "/admin", "/"):
        return EVERYTHING  # a parent of watched paths vanished or appeared
    return NOTHING


class PendingChanges:
    """Routes accumulated between two re-reads (bounded by `MAX_DIRTY_TOPICS`)."""

    def __init__(self, max_dirty_topics: int = MAX_DIRTY_TOPICS) -> None:
        self._everything = False
        self._paths: set[WatchedPath] = set()
        self._topics: set[str] = set()
        self._max_dirty_topics = max_dirty_topics

    @property
    def empty(self) -> bool:
        return not self._everything and not self._paths and not self._topics

    def mark_path(self, path: str) -> None:
        """A watch fired on `path`."""
        self.mark(route(path))

    def mark(self, dirty: Dirty) -> None:
        if self._everything:
            return
        if dirty.everything:
            self.mark_everything()
            return
        self._paths.update(dirty.paths)
        self._topics.update(dirty.topics)
        if len(self._topics) > self._max_dirty_topics:
            self.mark_everything()

    def mark_everything(self) -> None:
        self._everything = True
        self._paths.clear()
        self._topics.clear()

    def take(self) -> Dirty:
        """What is stale now; resets to nothing."""
        if self._everything:
            taken = EVERYTHING
        else:
            taken = Dirty(paths=frozenset(self._paths), topics=frozenset(self._topics))
        self._everything = False
        self._paths.clear()
        self._topics.clear()
        return taken
