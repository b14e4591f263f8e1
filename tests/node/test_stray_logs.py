"""Stray logs (KAFKA-14616): every rule of `find_stray_logs`, the tree reader, and the
synchronous half of the cleanup (`StrayLogCleanup.delete_stray_logs`) on real log dirs and a
fake replica of the tree."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.node.nodes import NodeUnderTest
from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import NoNodeError
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.replication.replica_manager import PartitionStateUpdate
from trafka.node.stray_logs import (
    LocalPartition,
    StrayDecision,
    StrayLog,
    StrayReason,
    TreeTopic,
    find_stray_logs,
    read_tree_view,
    tree_topic,
)
from trafka.node.topics import topic_id_from_text

ME = 1
ID_A = "AAAAAAAAAAAAAAAAAAAAAQ"
ID_B = "AAAAAAAAAAAAAAAAAAAAAg"


def topic(partitions: dict[int, list[int]], topic_id: str | None = ID_A) -> TreeTopic:
    return tree_topic(topic_id, partitions, {})


def local(name: str, partition: int = 0, topic_id: str | None = ID_A) -> LocalPartition:
    return LocalPartition(name, partition, topic_id)


def reasons(decision: StrayDecision) -> dict[tuple[str, int], StrayReason]:
    return {(s.partition.topic, s.partition.partition): s.reason for s in decision.stray}


# ---- the rules -------------------------------------------------------------------------------


def test_a_partition_assigned_to_this_broker_is_kept() -> None:
    decision = find_stray_logs(ME, [local("orders")], {"orders": topic({0: [2, 1, 3]})})
    assert decision == StrayDecision((), ())


def test_a_topic_without_a_node_is_deleted() -> None:
    decision = find_stray_logs(ME, [local("gone"), local("orders")], {"orders": topic({0: [1]})})
    assert reasons(decision) == {("gone", 0): StrayReason.TOPIC_DELETED}


def test_a_partition_the_topic_does_not_have_is_deleted() -> None:
    decision = find_stray_logs(
        ME, [local("orders", 0), local("orders", 5)], {"orders": topic({0: [1]})}
    )
    assert reasons(decision) == {("orders", 5): StrayReason.PARTITION_DELETED}


def test_a_partition_reassigned_away_is_deleted() -> None:
    decision = find_stray_logs(
        ME,
        [local("orders", 0), local("orders", 1)],
        {"orders": topic({0: [2, 3], 1: [3, 1]})},
    )
    assert reasons(decision) == {("orders", 0): StrayReason.NOT_A_REPLICA}
    assert decision.stray == (StrayLog(local("orders", 0), StrayReason.NOT_A_REPLICA),)


def test_a_reassignment_to_this_broker_in_adding_replicas_is_kept() -> None:
    # The tree's `partitions` holds OAR + RAR while a reassignment runs, but a node naming
    # the broker only in `adding_replicas` must keep it too.
    view = {"orders": tree_topic(ID_A, {0: [2, 3]}, {0: [1]})}
    assert find_stray_logs(ME, [local("orders")], view) == StrayDecision((), ())


def test_a_reassignment_away_from_this_broker_in_progress_is_kept() -> None:
    # AR = OAR {1,2} + RAR {3,4}: this broker is still a replica until step 10 writes AR = RAR.
    view = {"orders": tree_topic(ID_A, {0: [1, 2, 3, 4]}, {0: [3, 4]})}
    assert find_stray_logs(ME, [local("orders")], view) == StrayDecision((), ())


def test_a_topic_queued_for_deletion_is_left_to_the_controller() -> None:
    # `/admin/delete_topics/orders` exists; `/brokers/topics/orders` stays, naming this broker,
    # until every replica answered StopReplica(delete): the controller deletes it (CTL-30).
    assert find_stray_logs(ME, [local("orders")], {"orders": topic({0: [1, 2]})}).stray == ()


def test_an_empty_tree_view_decides_nothing() -> None:
    decision = find_stray_logs(ME, [local("orders"), local("other")], {})
    assert decision == StrayDecision((), (), skipped_empty_view=True)
    assert find_stray_logs(ME, [], {}) == StrayDecision((), (), skipped_empty_view=False)


def test_internal_topics_are_kept_without_a_node_but_not_when_assigned_elsewhere() -> None:
    logs = [
        local("__consumer_offsets", 0),
        local("__consumer_offsets", 1),
        local("__transaction_state", 0),
    ]
    decision = find_stray_logs(ME, logs, {"orders": topic({0: [1]})})
    assert decision.stray == ()
    view = {"orders": topic({0: [1]}), "__consumer_offsets": topic({0: [1, 2], 1: [2, 3]})}
    assert reasons(find_stray_logs(ME, logs, view)) == {
        ("__consumer_offsets", 1): StrayReason.NOT_A_REPLICA
    }


def test_another_topic_id_on_an_assigned_partition_is_kept_as_ambiguous() -> None:
    decision = find_stray_logs(ME, [local("orders", topic_id=ID_B)], {"orders": topic({0: [1]})})
    assert decision == StrayDecision((), (local("orders", topic_id=ID_B),))


def test_another_topic_id_on_a_partition_assigned_elsewhere_is_deleted() -> None:
    decision = find_stray_logs(ME, [local("orders", topic_id=ID_B)], {"orders": topic({0: [2]})})
    assert reasons(decision) == {("orders", 0): StrayReason.NOT_A_REPLICA}
    assert decision.ambiguous == ()


def test_a_missing_topic_id_on_either_side_is_not_a_mismatch() -> None:
    view = {"a": topic({0: [1]}, topic_id=None), "b": topic({0: [1]})}
    decision = find_stray_logs(ME, [local("a"), local("b", topic_id=None)], view)
    assert decision == StrayDecision((), ())


def test_protected_partitions_are_never_deleted() -> None:
    logs = [local("fresh"), local("orders", 0), local("orders", 1)]
    decision = find_stray_logs(
        ME,
        logs,
        {"orders": topic({0: [2], 1: [2]})},
        protected=frozenset({("fresh", 0), ("orders", 1)}),
    )
    assert reasons(decision) == {("orders", 0): StrayReason.NOT_A_REPLICA}


def test_unreadable_topics_are_kept() -> None:
    decision = find_stray_logs(
        ME,
        [local("broken"), local("gone")],
        {"orders": topic({0: [1]})},
        unreadable=frozenset({"broken"}),
    )
    assert reasons(decision) == {("gone", 0): StrayReason.TOPIC_DELETED}


def test_the_decision_is_sorted_by_topic_and_partition() -> None:
    logs = [local("b", 1), local("a", 2), local("b", 0), local("a", 0)]
    decision = find_stray_logs(ME, logs, {"orders": topic({0: [1]})})
    assert [(s.partition.topic, s.partition.partition) for s in decision.stray] == [
        ("a", 0),
        ("a", 2),
        ("b", 0),
        ("b", 1),
    ]


# ---- reading the tree ------------------------------------------------------------------------


class TreeReplica:
    """The two local reads the broker uses, over a dict of client paths."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def children_local(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def get_local(self, path: str) -> tuple[bytes, object]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], None

    def children(self, path: str) -> list[str]:
        try:
            return self.children_local(path)
        except NoNodeError:
            return []

    def data(self, path: str) -> bytes | None:
        try:
            return self.get_local(path)[0]
        except NoNodeError:
            return None


def assignment(
    partitions: dict[int, tuple[int, ...]],
    topic_id: str | None = ID_A,
    adding: dict[int, tuple[int, ...]] | None = None,
) -> bytes:
    return znodes.TopicAssignment(partitions, topic_id, adding or {}, {}).to_json()


def test_read_tree_view() -> None:
    replica = TreeReplica(
        {
            znodes.BROKER_TOPICS: b"",
            znodes.topic_path("orders"): assignment({0: (1, 2), 1: (2, 3)}, adding={1: (3,)}),
            znodes.topic_path("orders") + "/partitions": b"",
            znodes.topic_path("broken"): b"{not json",
            znodes.topic_path("old"): assignment({0: (1,)}, topic_id=None),
        }
    )
    topics, unreadable = read_tree_view(replica.children, replica.data)
    assert topics == {
        "orders": TreeTopic(ID_A, {0: frozenset({1, 2}), 1: frozenset({2, 3})}),
        "old": TreeTopic(None, {0: frozenset({1})}),
    }
    assert unreadable == frozenset({"broken"})


def test_read_tree_view_without_topics_and_with_a_vanished_node() -> None:
    assert read_tree_view(TreeReplica({}).children, TreeReplica({}).data) == ({}, frozenset())
    replica = TreeReplica({znodes.BROKER_TOPICS: b"", znodes.topic_path("gone"): b""})
    # listed, then deleted before its data was read
    assert read_tree_view(replica.children, lambda path: None) == ({}, frozenset())


# ---- the broker's synchronous half -----------------------------------------------------------


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


def make_broker(tmp_path: Path, store: MetadataStore, node_id: int = ME) -> NodeUnderTest:
    return NodeUnderTest(
        store,
        node_id,
        tmp_path / "data",
        live_brokers=lambda: [node_id],
        cluster_id="test-cluster",
        log_config_for=lambda _: LogConfig(),
    )


def put_log(broker: NodeUnderTest, name: str, partition: int, topic_id: str | None = ID_A) -> Path:
    assert broker.log_manager is not None
    partition_log = broker.log_manager.get_or_create(
        name,
        partition,
        config=LogConfig(),
        topic_id=None if topic_id is None else topic_id_from_text(topic_id),
    )
    partition_log.append_as_leader(_one_batch(), leader_epoch=0, now_ms=0)
    return Path(partition_log.directory)


def _one_batch() -> bytes:
    return build_batch([NewRecord(b"v")])


async def test_broker_deletes_stray_logs_and_keeps_the_rest(
    tmp_path: Path, store: MetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker(tmp_path, store)
    kept = put_log(broker, "orders", 0)
    moved = put_log(broker, "orders", 1)
    gone = put_log(broker, "gone", 0)
    other_id = put_log(broker, "orders", 2, topic_id=ID_B)
    fresh = put_log(broker, "fresh", 0)
    # A LeaderAndIsr named fresh-0 since start: the tree this node read may predate it.
    broker.replica_manager.apply_leader_and_isr(
        [PartitionStateUpdate("fresh", 0, 1, 1, 0, (1,), 0, (1,))]
    )
    replica = TreeReplica(
        {
            znodes.BROKER_TOPICS: b"",
            znodes.topic_path("orders"): assignment({0: (1, 2), 1: (2, 3), 2: (1, 3)}),
        }
    )
    with caplog.at_level(logging.INFO, logger="trafka.node.broker"):
        decision = broker.delete_stray_logs(replica)
    assert reasons(decision) == {
        ("gone", 0): StrayReason.TOPIC_DELETED,
        ("orders", 1): StrayReason.NOT_A_REPLICA,
    }
    assert not moved.exists() and not gone.exists()
    assert kept.exists() and other_id.exists() and fresh.exists()
    assert broker.log_manager is not None
    assert broker.log_manager.get("orders", 1) is None
    assert [t for t, _, _ in broker.log_manager.partitions_with_topic_ids()] == [
        "fresh",
        "orders",
        "orders",
    ]
    # renamed at once, removed by the log manager's background remover
    deadline = time.monotonic() + 10
    while [p for p in (tmp_path / "data").iterdir() if p.name.endswith("-delete")]:
        assert time.monotonic() < deadline, "the -delete directories were not removed"
        time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("deleted stray log" in line for line in lines) == 2
    assert any(
        line.startswith("deleted stray log orders-1 ")
        and line.endswith("this broker is not in the partition's replicas")
        for line in lines
    ), lines
    assert any(line.startswith("kept orders-2: ") and ID_B in line for line in lines), lines
    assert any("stray-log check done: 5 local logs, 2 deleted, 1 kept" in line for line in lines)
    broker.log_manager.close()


async def test_broker_deletes_nothing_when_the_tree_has_no_topics(
    tmp_path: Path, store: MetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker(tmp_path, store)
    directory = put_log(broker, "orders", 0)
    with caplog.at_level(logging.WARNING, logger="trafka.node.broker"):
        decision = broker.delete_stray_logs(TreeReplica({znodes.BROKER_TOPICS: b""}))
    assert decision.skipped_empty_view and directory.exists()
    assert any("stray logs not checked" in r.getMessage() for r in caplog.records)
    assert broker.log_manager is not None
    broker.log_manager.close()
