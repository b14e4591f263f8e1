"""Stray partition logs: local logs the metadata tree no longer assigns to this broker.

A broker that is down while a reassignment moves a replica away from it never receives the
StopReplica(delete) of step 9 (CTL-33; requests to unregistered brokers are dropped, CTL-11),
and nothing later names the partition again: the directory would stay on disk forever.
Kafka's KRaft brokers remove such "stray" logs at start-up (KAFKA-14616,
`LogManager.findStrayReplicas`); this module is that decision, as a pure function over the
local logs and a view of the tree. `Broker` runs it once per start, after the broker has
registered and passed a write barrier through the quorum leader (`MetadataQuorum.sync()`, so
its replica of the tree holds every write committed before), and deletes what it returns
through the same path as StopReplica(delete) (`ReplicaManager.stop_replicas`, then
`LogManager.delete`: rename to `<dir>.<uuid>-delete`, then remove).

A local log `<topic>-<partition>` is stray when, in the tree:

* `/brokers/topics/<topic>` does not exist (TOPIC_DELETED), or
* the topic has no partition `<partition>` (PARTITION_DELETED: Kafka never shrinks a topic,
  so this is an older incarnation of a topic re-created with fewer partitions), or
* the partition's replicas (`partitions`, which holds OAR + RAR while a reassignment runs,
  plus `adding_replicas`, KIP-455) do not include this broker (NOT_A_REPLICA).

Never stray (the function errs on the side of keeping data):

* anything, when the tree view has no topics at all while local logs exist: that looks like a
  wiped or unloaded tree, not a real cluster state (`StrayDecision.skipped_empty_view`);
* internal topics (`__consumer_offsets`, `__transaction_state`) whose topic node is missing:
  only an assignment that exists and leaves this broker out removes them;
* a topic whose node the caller could not decode (`unreadable`): nothing is known about it;
* a partition whose replicas include this broker but whose topic id differs from the local
  `partition.metadata` (`StrayDecision.ambiguous`): the topic may have been re-created, or the
  log was labelled from a stale metadata cache (the replica manager does not compare ids);
  deleting would be a guess, so it is left alone and reported;
* partitions the caller marks `protected`: the broker passes every partition a LeaderAndIsr
  has named since start, because such a log may be newer than the tree the caller read.

Topic deletion is the controller's: a topic queued in `/admin/delete_topics` keeps its node
(with this broker in its replicas) until every replica answered StopReplica(delete), so its
logs here are never stray and the controller's resumed deletion (CTL-30) deletes them and
counts the answers. Only once the node is gone (after that accounting) would a leftover be
TOPIC_DELETED, and with deletion waiting for offline brokers none is left.

Not implemented: Kafka's `-stray` rename step (the log is deleted at once), logs in offline
log dirs (not loaded, so never seen).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from trafka.metadata_quorum import znodes

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class StrayReason(enum.Enum):
    TOPIC_DELETED = "the topic no longer exists"
    PARTITION_DELETED = "the topic has no such partition"
    NOT_A_REPLICA = "this broker is not in the partition's replicas"


@dataclass(frozen=True, slots=True)
class LocalPartition:
    """A partition log on this broker's disks; `topic_id` from `partition.metadata`."""

    topic: str
    partition: int
    topic_id: str | None


@dataclass(frozen=True, slots=True)
class TreeTopic:
    """`/brokers/topics/<t>` as the stray check needs it: partition -> every replica
    (assigned plus adding), and the topic id (Kafka's base64 text) when the node has one."""

    topic_id: str | None
    replicas: Mapping[int, frozenset[int]]


@dataclass(frozen=True, slots=True)
class StrayLog:
    partition: LocalPartition
    reason: StrayReason


@dataclass(frozen=True, slots=True)
class StrayDecision:
    stray: tuple[StrayLog, ...]
    ambiguous: tuple[LocalPartition, ...] = ()
    """Assigned to this broker but with another topic id: kept, worth a warning."""
    skipped_empty_view: bool = False
    """True when the tree view had no topics at all: nothing was decided."""


def find_stray_logs(
    node_id: int,
    local: Iterable[LocalPartition],
    tree: Mapping[str, TreeTopic],
    *,
    protected: frozenset[tuple[str, int]] = frozenset(),
    unreadable: frozenset[str] = frozenset(),
) -> StrayDecision:
    """Which of `local` are stray for broker `node_id` given the tree view `tree`."""
    local_partitions = sorted(local, key=lambda p: (p.topic, p.partition))
    if not tree and not unreadable:
        return StrayDecision((), (), skipped_empty_view=bool(local_partitions))
    stray: list[StrayLog] = []
    ambiguous: list[LocalPartition] = []
    for log in local_partitions:
        if (log.topic, log.partition) in protected or log.topic in unreadable:
            continue
        topic = tree.get(log.topic)
        if topic is None:
            if log.topic not in INTERNAL_TOPICS:
                stray.append(StrayLog(log, StrayReason.TOPIC_DELETED))
            continue
        replicas = topic.replicas.get(log.partition)
        if replicas is None:
            stray.append(StrayLog(log, StrayReason.PARTITION_DELETED))
        elif node_id not in replicas:
            stray.append(StrayLog(log, StrayReason.NOT_A_REPLICA))
        elif log.topic_id is not None and topic.topic_id not in (None, log.topic_id):
            ambiguous.append(log)
    return StrayDecision(tuple(stray), tuple(ambiguous))


def tree_topic(
    topic_id: str | None,
    partitions: Mapping[int, Iterable[int]],
    adding_replicas: Mapping[int, Iterable[int]],
) -> TreeTopic:
    """A `TreeTopic` from a decoded `/brokers/topics/<t>` (`znodes.TopicAssignment`)."""
    replicas = {
        partition: frozenset(members) | frozenset(adding_replicas.get(partition, ()))
        for partition, members in partitions.items()
    }
    return TreeTopic(topic_id, replicas)


def read_tree_view(
    children: Callable[[str], list[str]],
    data: Callable[[str], bytes | None],
) -> tuple[dict[str, TreeTopic], frozenset[str]]:
    """(topics, unreadable topic names) from `/brokers/topics`.

    `children(path)` and `data(path)` read the node's replica of the tree (`[]` / None for a
    missing node). A topic whose node is gone between the two reads is left out (deleted:
    the tree only moves forward); one whose JSON does not decode is `unreadable`.
    """
    topics: dict[str, TreeTopic] = {}
    unreadable: set[str] = set()
    for name in children(znodes.BROKER_TOPICS):
        raw = data(znodes.topic_path(name))
        if raw is None:
            continue
        try:
            assignment = znodes.TopicAssignment.from_json(raw)
        except znodes.ZNodeFormatError:
            unreadable.add(name)
            continue
        topics[name] = tree_topic(
            assignment.topic_id, assignment.partitions, assignment.adding_replicas
        )
    return topics, frozenset(unreadable)
