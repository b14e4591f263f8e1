"""A partition leader's ISR writes to the tree (ZK-12), in the controller's encoding.

`TreeIsrWrites` is the replica manager's `IsrWrites` port over the node's `MetadataStore`:
the conditional set of `/brokers/topics/<t>/partitions/<p>/state` and a sequential
`/isr_change_notification/isr_change_<seq>` child, as one multi (`tree_ops.isr_write_ops`),
so the controller learns of the change (CTL-40)."""

from __future__ import annotations

import logging

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import (
    ConnectionLossError,
    OperationTimeoutError,
    SetDataResult,
    ZooKeeperError,
)
from trafka.node.controller import tree_ops
from trafka.node.controller.tree_reads import ClientTreeView, read_partition_state
from trafka.node.metadata_store import MetadataStore
from trafka.node.replication.ids import BrokerId, TopicPartition, ZkVersion
from trafka.node.replication.leader import IsrWrite
from trafka.node.replication.replica_manager import (
    IsrWriteFailed,
    IsrWriteOutcomeUnknown,
    TreePartitionState,
)

log = logging.getLogger("trafka.node.replication.replica_manager")


class TreeIsrWrites:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def prepare(self) -> None:
        try:  # the parent of the sequential notifications, so concurrent writers agree
            await self._store.create_recursive(znodes.ISR_CHANGE_NOTIFICATION)
        except ZooKeeperError as error:
            log.info("cannot create %s: %s", znodes.ISR_CHANGE_NOTIFICATION, error)

    async def write(self, write: IsrWrite) -> ZkVersion:
        try:
            ops = tree_ops.to_multi_ops(tree_ops.isr_write_ops(write), ClientTreeView(self._store))
            results = await self._store.multi(list(ops))
        except (OperationTimeoutError, ConnectionLossError) as error:
            raise IsrWriteOutcomeUnknown(str(error) or type(error).__name__) from error
        except (ZooKeeperError, tree_ops.MultiTooLarge) as error:
            raise IsrWriteFailed(str(error) or type(error).__name__) from error
        first = results[0]
        assert isinstance(first, SetDataResult), first
        return ZkVersion(int(first.stat.version))

    def current(self, tp: TopicPartition) -> TreePartitionState | None:
        found = read_partition_state(self._store, tp)
        if found is None:
            return None
        data = found.data
        return TreePartitionState(
            data.leader, data.leader_epoch, tuple(BrokerId(b) for b in data.isr), found.version
        )
