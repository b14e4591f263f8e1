"""Controller ops -> the quorum tree's multi (parents, recursive delete, if_exists, bytes)."""

from __future__ import annotations

import pytest

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import (
    ANY_VERSION,
    Check,
    Create,
    Delete,
    Entry,
    Multi,
    SetData,
    ZNodeTree,
)
from trafka.node.controller import tree_ops
from trafka.node.controller.effects import CheckVersion, CreateNode, DeleteNode, SetNode
from trafka.node.replication.ids import ZkVersion


def apply(tree: ZNodeTree, *ops: object) -> object:
    return tree.apply(Entry("", 0, 0, Multi(tuple(ops)))).result  # type: ignore[arg-type]


def test_create_adds_missing_parents_and_encodes_json() -> None:
    tree = ZNodeTree()
    state = znodes.PartitionState(1, 0, (1, 2), 3)
    ops = tree_ops.to_multi_ops([CreateNode("/brokers/topics/t/partitions/0/state", state)], tree)
    assert ops == (
        Create("/brokers", b""),
        Create("/brokers/topics", b""),
        Create("/brokers/topics/t", b""),
        Create("/brokers/topics/t/partitions", b""),
        Create("/brokers/topics/t/partitions/0", b""),
        Create("/brokers/topics/t/partitions/0/state", state.to_json()),
    )
    apply(tree, *ops)
    data, _ = tree.get("/brokers/topics/t/partitions/0/state")
    assert znodes.PartitionState.from_json(data) == state


def test_recursive_delete_goes_deepest_first_and_if_exists_is_dropped() -> None:
    tree = ZNodeTree()
    apply(
        tree,
        Create("/brokers", b""),
        Create("/brokers/topics", b""),
        Create("/brokers/topics/t", b"{}"),
        Create("/brokers/topics/t/partitions", b""),
        Create("/brokers/topics/t/partitions/0", b""),
        Create("/brokers/topics/t/partitions/0/state", b"{}"),
    )
    ops = tree_ops.to_multi_ops(
        [
            DeleteNode("/brokers/topics/t", recursive=True),
            DeleteNode("/config/topics/t", recursive=True, if_exists=True),
        ],
        tree,
    )
    assert ops == (
        Delete("/brokers/topics/t/partitions/0/state", ANY_VERSION),
        Delete("/brokers/topics/t/partitions/0", ANY_VERSION),
        Delete("/brokers/topics/t/partitions", ANY_VERSION),
        Delete("/brokers/topics/t", ANY_VERSION),
    )
    apply(tree, *ops)
    assert tree.exists("/brokers/topics/t") is None


def test_check_and_set_keep_versions() -> None:
    tree = ZNodeTree()
    ops = tree_ops.to_multi_ops(
        [
            CheckVersion("/controller_epoch", ZkVersion(4)),
            SetNode("/controller_epoch", znodes.ControllerEpoch(5), ZkVersion(4)),
        ],
        tree,
    )
    assert ops == (Check("/controller_epoch", 4), SetData("/controller_epoch", b"5", 4))


def test_too_many_ops_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_ops.tree, "MAX_MULTI_OPS", 2)
    with pytest.raises(tree_ops.MultiTooLarge):
        tree_ops.to_multi_ops([CreateNode("/a/b/c", None)], ZNodeTree())


def test_isr_write_is_one_multi_with_a_sequential_notification() -> None:
    from trafka.node.replication.ids import (
        BrokerId,
        ControllerEpoch,
        LeaderEpoch,
        TopicPartition,
    )
    from trafka.node.replication.leader import IsrWrite

    tree = ZNodeTree()
    state_path = "/brokers/topics/t/partitions/0/state"
    apply(
        tree,
        *tree_ops.to_multi_ops(
            [CreateNode(state_path, znodes.PartitionState(1, 3, (1, 2), 1))], tree
        ),
    )
    write = IsrWrite(
        TopicPartition("t", 0),
        BrokerId(1),
        LeaderEpoch(3),
        (BrokerId(1),),
        ControllerEpoch(1),
        ZkVersion(0),
    )
    for _ in range(2):  # the second one conflicts (version 0 is gone) and changes nothing
        apply(tree, *tree_ops.to_multi_ops(tree_ops.isr_write_ops(write), tree))
    data, stat = tree.get(state_path)
    assert znodes.PartitionState.from_json(data).isr == (1,) and stat.version == 1
    children = tree.children("/isr_change_notification")
    assert children == ["isr_change_0000000000"]
    payload, _ = tree.get("/isr_change_notification/isr_change_0000000000")
    assert znodes.IsrChangeNotification.from_json(payload).partitions == (
        znodes.TopicPartition("t", 0),
    )


def test_a_large_step_is_split_into_fenced_chunks_that_apply_in_order() -> None:
    from trafka.node.controller.events import ControllerFailover
    from trafka.node.controller.machine import Controller
    from trafka.node.controller.payloads import BrokerInfo, TreeSnapshot, Versioned
    from trafka.node.replication.ids import BrokerId

    tree = ZNodeTree()
    apply(tree, Create("/controller_epoch", b"0"))
    assignment = znodes.TopicAssignment({p: (1, 2) for p in range(7)})
    snapshot = TreeSnapshot(
        controller_epoch=Versioned(znodes.ControllerEpoch(0), ZkVersion(0)),
        brokers=(BrokerInfo(BrokerId(1), 1), BrokerInfo(BrokerId(2), 2)),
        topics={"t": Versioned(assignment, ZkVersion(0))},
        partition_states={},
    )
    step = Controller(BrokerId(1)).handle(ControllerFailover(snapshot, 0))
    chunks = tree_ops.to_multis(step.writes, tree, max_ops=4)
    assert len(chunks) > 1
    assert chunks[0][0] == SetData("/controller_epoch", b"1", 0)
    assert all(chunk[0] == Check("/controller_epoch", 1) for chunk in chunks[1:])
    assert all(len(chunk) <= 4 for chunk in chunks)
    for chunk in chunks:
        result = apply(tree, *chunk)
        assert getattr(result, "error_index", None) == -1
    for p in range(7):
        data, _ = tree.get(f"/brokers/topics/t/partitions/{p}/state")
        assert znodes.PartitionState.from_json(data).leader == 1
