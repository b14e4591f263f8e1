"""The shell of the stray-log check (KAFKA-14616; the rules are `trafka.node.stray_logs`):
once per start, after registration and a quorum barrier, delete the local logs the tree no
longer assigns to this node."""

from __future__ import annotations

import logging

import trio

from trafka.metadata_quorum.tree import ZooKeeperError
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import LocalTreeReads, MetadataStore, NoNode
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.stray_logs import LocalPartition, StrayDecision, find_stray_logs, read_tree_view

log = logging.getLogger("trafka.node.broker")

STRAY_BARRIER_TIMEOUT_S = 30.0
"""One attempt at the quorum barrier before the stray-log check."""
STRAY_BARRIER_GIVE_UP_S = 600.0
"""Without a barrier by then the stray-log check is skipped (nothing is deleted)."""
STRAY_BARRIER_RETRY_S = 1.0


class StrayLogCleanup:
    def __init__(
        self,
        *,
        store: MetadataStore,
        node_id: int,
        logs: LocalLogs,
        replicas: ReplicaManager,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._logs = logs
        self._replicas = replicas

    async def run(self) -> None:
        """Only after a quorum barrier, so this replica of the tree holds every write
        committed before it (a voter or learner still catching up would otherwise judge by
        an old tree); without a barrier nothing is deleted."""
        give_up_at = trio.current_time() + STRAY_BARRIER_GIVE_UP_S
        while True:
            try:
                with trio.fail_after(STRAY_BARRIER_TIMEOUT_S):
                    await self._store.sync()
                break
            except (trio.TooSlowError, ZooKeeperError) as error:
                if trio.current_time() >= give_up_at:
                    log.warning("stray logs not checked: no quorum barrier (%r)", error)
                    return
                log.warning("stray-log check: quorum barrier failed (%r), retrying", error)
                await trio.sleep(STRAY_BARRIER_RETRY_S)
        self.delete_stray_logs(self._store)

    def delete_stray_logs(self, tree: LocalTreeReads) -> StrayDecision:
        """Read the tree and the local logs, decide and delete without yielding to trio: no
        LeaderAndIsr or StopReplica runs in between. Partitions a LeaderAndIsr named since
        start are protected (their log may be newer than this tree); the tree only moves
        forward after the barrier, so reading it later than the barrier is never staler."""

        def children(path: str) -> list[str]:
            try:
                return list(tree.children_local(path))
            except NoNode:
                return []

        def data(path: str) -> bytes | None:
            try:
                return bytes(tree.get_local(path)[0])
            except NoNode:
                return None

        manager = self._logs
        topics, unreadable = read_tree_view(children, data)
        local = [
            LocalPartition(t, p, topic_id) for t, p, topic_id in manager.partitions_with_topic_ids()
        ]
        decision = find_stray_logs(
            self._node_id,
            local,
            topics,
            protected=frozenset(self._replicas.named_by_leader_and_isr),
            unreadable=unreadable,
        )
        if decision.skipped_empty_view:
            log.warning(
                "stray logs not checked: the tree has no topics but %d local logs exist",
                len(local),
            )
        for kept in decision.ambiguous:
            log.warning(
                "kept %s-%d: assigned to this node, but its topic id %s is not the tree's %s",
                kept.topic,
                kept.partition,
                kept.topic_id,
                topics[kept.topic].topic_id,
            )
        deleted = 0
        for stray in decision.stray:
            topic, partition = stray.partition.topic, stray.partition.partition
            partition_log = manager.get(topic, partition)
            where = partition_log.directory if partition_log is not None else "?"
            try:
                self._replicas.stop_replicas([(topic, partition)], delete=True)
            except Exception:
                log.exception("deleting stray log %s-%d failed", topic, partition)
                continue
            deleted += 1
            log.warning(
                "deleted stray log %s-%d (%s): %s", topic, partition, where, stray.reason.value
            )
        if unreadable:
            log.warning("stray-log check kept the logs of unreadable topics %s", sorted(unreadable))
        log.info(
            "stray-log check done: %d local logs, %d deleted, %d kept with another topic id",
            len(local),
            deleted,
            len(decision.ambiguous),
        )
        return decision
