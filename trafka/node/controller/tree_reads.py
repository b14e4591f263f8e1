"""The controller's reads of the local replica of the tree (client paths).

Each reader parses one znode (or a family of them) into the controller's payloads
(`trafka.node.controller.payloads`); a missing or malformed znode reads as absent, never
raises. `watch=True` arms a one-shot watch with the read (on the node itself when it exists,
on its existence otherwise), as the controller's `TreeWatcher` needs. The handlers of the
reassignment APIs and the replica manager read the same way.
"""

from __future__ import annotations

import logging

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import Stat
from trafka.node.controller.payloads import BrokerInfo, TreeSnapshot, Versioned
from trafka.node.metadata_store import LocalTreeReads, NoNode
from trafka.node.replication.ids import TopicPartition, ZkVersion

log = logging.getLogger("trafka.node.controller")


class ClientTreeView:
    """`tree_ops.TreeView` over the local replica (client paths)."""

    def __init__(self, tree: LocalTreeReads) -> None:
        self._tree = tree

    def exists(self, path: str) -> object | None:
        stat: object | None = self._tree.exists_local(path)
        return stat

    def children(self, path: str) -> list[str]:
        try:
            return list(self._tree.children_local(path))
        except NoNode:
            return []


def get_node(tree: LocalTreeReads, path: str, *, watch: bool = False) -> tuple[bytes, Stat] | None:
    try:
        data, stat = tree.get_local(path, watch=watch)
    except NoNode:
        if watch:
            tree.exists_local(path, watch=True)
        return None
    return bytes(data), stat


def get_children(tree: LocalTreeReads, path: str, *, watch: bool = False) -> list[str]:
    try:
        return sorted(tree.children_local(path, watch=watch))
    except NoNode:
        if watch:
            tree.exists_local(path, watch=True)
        return []


def read_brokers(tree: LocalTreeReads, *, watch: bool = False) -> tuple[BrokerInfo, ...]:
    brokers = []
    for child in get_children(tree, znodes.BROKER_IDS, watch=watch):
        found = get_node(tree, znodes.broker_path(int(child)) if child.isdigit() else "/-")
        if found is None:
            continue
        try:
            registration = znodes.BrokerRegistration.from_json(found[0], int(child))
        except znodes.ZNodeFormatError:
            continue
        brokers.append(BrokerInfo.from_registration(registration, found[1].czxid))
    return tuple(brokers)


def read_topics(
    tree: LocalTreeReads, *, watch: bool = False
) -> dict[str, Versioned[znodes.TopicAssignment]]:
    topics = {}
    for name in get_children(tree, znodes.BROKER_TOPICS, watch=watch):
        found = get_node(tree, znodes.topic_path(name))
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
    tree: LocalTreeReads, tp: TopicPartition
) -> Versioned[znodes.PartitionState] | None:
    found = get_node(tree, znodes.partition_state_path(tp.topic, tp.partition))
    if found is None or not found[0]:
        return None
    try:
        return Versioned(znodes.PartitionState.from_json(found[0]), ZkVersion(found[1].version))
    except znodes.ZNodeFormatError:
        return None


def read_reassignment(
    tree: LocalTreeReads, *, watch: bool = False
) -> Versioned[znodes.ReassignPartitions] | None:
    found = get_node(tree, znodes.REASSIGN_PARTITIONS, watch=watch)
    if found is None or not found[0]:
        return None
    try:
        return Versioned(znodes.ReassignPartitions.from_json(found[0]), ZkVersion(found[1].version))
    except znodes.ZNodeFormatError:
        return None


def read_preferred(
    tree: LocalTreeReads, *, watch: bool = False
) -> znodes.PreferredReplicaElection | None:
    found = get_node(tree, znodes.PREFERRED_REPLICA_ELECTION, watch=watch)
    if found is None or not found[0]:
        return None
    try:
        return znodes.PreferredReplicaElection.from_json(found[0])
    except znodes.ZNodeFormatError:
        return None


def read_topic_config(tree: LocalTreeReads, topic: str) -> dict[str, str]:
    """`/config/topics/<topic>`'s overrides; empty when it has none (or is malformed)."""
    found = get_node(tree, znodes.topic_config_path(topic))
    if found is None or not found[0]:
        return {}
    try:
        return dict(znodes.EntityConfig.from_json(found[0]).config)
    except znodes.ZNodeFormatError:
        log.warning("controller: ignoring the malformed config of topic %s", topic)
        return {}


def read_snapshot(tree: LocalTreeReads) -> TreeSnapshot:
    """What the controller reads at failover (CTL-44 step 7), from the local replica."""
    found = get_node(tree, znodes.CONTROLLER_EPOCH)
    epoch = None
    if found is not None:
        epoch = Versioned(znodes.ControllerEpoch.from_json(found[0]), ZkVersion(found[1].version))
    topics = read_topics(tree)
    states = {}
    configs = {}
    for name, assignment in topics.items():
        config = read_topic_config(tree, name)
        if config:
            configs[name] = config
        for partition in assignment.data.partitions:
            tp = TopicPartition(name, partition)
            state = read_partition_state(tree, tp)
            if state is not None:
                states[tp] = state
    return TreeSnapshot(
        controller_epoch=epoch,
        brokers=read_brokers(tree),
        topics=topics,
        partition_states=states,
        reassignment=read_reassignment(tree),
        preferred_election=read_preferred(tree),
        topics_to_delete=tuple(get_children(tree, znodes.DELETE_TOPICS)),
        isr_change_notifications=tuple(get_children(tree, znodes.ISR_CHANGE_NOTIFICATION)),
        topic_configs=configs,
    )


def controller_id_in_tree(tree: LocalTreeReads) -> int:
    """The broker id in `/controller`, -1 when there is none."""
    found = get_node(tree, znodes.CONTROLLER)
    if found is None:
        return -1
    try:
        return znodes.ControllerRegistration.from_json(found[0]).broker_id
    except znodes.ZNodeFormatError:
        return -1
