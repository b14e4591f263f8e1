"""Pure parts of `ktool topics describe`: partition lines and kafka-topics.sh's filters."""

from __future__ import annotations

import pytest

from trafka.metadata_quorum import znodes
from trafka.tools.topics_cmd import (
    DescribeFilter,
    PartitionView,
    is_unavailable,
    is_under_replicated,
    partition_document,
    partition_line,
    selected,
    topic_line,
    topic_view_from_tree,
)

LIVE = frozenset({1, 2, 3})
HEALTHY = PartitionView(partition=0, leader=1, replicas=(1, 2, 3), isr=(1, 2, 3))
SHRUNK = PartitionView(partition=1, leader=2, replicas=(1, 2, 3), isr=(2, 3))
LONE = PartitionView(partition=2, leader=3, replicas=(1, 2, 3), isr=(3,))
LEADERLESS = PartitionView(partition=3, leader=None, replicas=(1, 2, 3), isr=(1,))
DEAD_LEADER = PartitionView(partition=4, leader=4, replicas=(4, 1), isr=(4, 1))


def test_plain_partition_line_matches_kafka_topics() -> None:
    assert partition_line("orders", HEALTHY) == (
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\t"
        "Elr: N/A\tLastKnownElr: N/A"
    )


def test_leaderless_partition_prints_none() -> None:
    assert "\tLeader: none\t" in partition_line("orders", LEADERLESS)


def test_reassigning_partition_shows_adding_and_removing_before_elr() -> None:
    moving = PartitionView(
        partition=0,
        leader=1,
        replicas=(1, 2, 3, 4, 5, 6),
        isr=(1, 2, 3, 4),
        adding_replicas=(4, 5, 6),
        removing_replicas=(1, 2, 3),
    )
    assert partition_line("orders", moving) == (
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4,5,6\tIsr: 1,2,3,4\t"
        "Adding Replicas: 4,5,6\tRemoving Replicas: 1,2,3\tElr: N/A\tLastKnownElr: N/A"
    )


def test_marked_for_deletion_is_the_last_field() -> None:
    line = partition_line("orders", HEALTHY, marked_for_deletion=True)
    assert line.endswith("\tLastKnownElr: N/A\tMarkedForDeletion: true")


def test_marked_for_deletion_ends_the_topic_line() -> None:
    line = topic_line("orders", "AAAAAAAAAAAAAAAAAAAAAA", 1, 3, {"a": "1"}, True)
    assert line.endswith("\tReplicationFactor: 3\tConfigs: a=1\tMarkedForDeletion: true")


def test_topic_line_sorts_configs() -> None:
    line = topic_line("orders", "AAAAAAAAAAAAAAAAAAAAAA", 6, 3, {"b": "2", "a": "1"})
    assert line == (
        "Topic: orders\tTopicId: AAAAAAAAAAAAAAAAAAAAAA\tPartitionCount: 6\t"
        "ReplicationFactor: 3\tConfigs: a=1,b=2"
    )


def test_under_replicated_is_isr_smaller_than_replicas() -> None:
    assert not is_under_replicated(HEALTHY)
    assert is_under_replicated(SHRUNK)
    assert is_under_replicated(LONE)


def test_unavailable_is_no_leader_or_dead_leader() -> None:
    assert not is_unavailable(HEALTHY, LIVE)
    assert is_unavailable(LEADERLESS, LIVE)
    assert is_unavailable(DEAD_LEADER, LIVE)


def _pick(flags: DescribeFilter, min_isr: int = 2) -> list[int]:
    views = [HEALTHY, SHRUNK, LONE, LEADERLESS, DEAD_LEADER]
    return [v.partition for v in views if selected(v, flags, LIVE, min_isr)]


def test_no_filter_selects_everything() -> None:
    assert _pick(DescribeFilter()) == [0, 1, 2, 3, 4]


def test_each_filter() -> None:
    assert _pick(DescribeFilter(under_replicated=True)) == [1, 2, 3]
    assert _pick(DescribeFilter(unavailable=True)) == [3, 4]
    assert _pick(DescribeFilter(under_min_isr=True), min_isr=2) == [2, 3]
    assert _pick(DescribeFilter(under_min_isr=True), min_isr=1) == [3]  # no leader
    assert _pick(DescribeFilter(at_min_isr=True), min_isr=2) == [1, 4]
    assert _pick(DescribeFilter(at_min_isr=True), min_isr=3) == [0]


def test_filters_combine_as_a_union() -> None:
    both = DescribeFilter(under_min_isr=True, unavailable=True)
    assert _pick(both, min_isr=2) == [2, 3, 4]


def test_json_document_carries_moving_replicas() -> None:
    moving = PartitionView(partition=5, leader=None, replicas=(1, 2), isr=(), adding_replicas=(2,))
    assert partition_document(moving) == {
        "partition": 5,
        "leader": None,
        "replicas": [1, 2],
        "isr": [],
        "adding_replicas": [2],
        "removing_replicas": [],
    }


def _tree(states: dict[int, znodes.PartitionState]) -> dict[str, bytes]:
    assignment = znodes.TopicAssignment(
        partitions={0: (3, 1), 1: (1, 3), 2: (2, 3)},
        topic_id="UaHolE2KjhJR-ytzGPZ15A",
        adding_replicas={2: (3,)},
        removing_replicas={2: (2,)},
    )
    nodes = {
        znodes.topic_path("doomed"): assignment.to_json(),
        znodes.partitions_path("doomed"): b"",
    }
    for index, state in states.items():
        nodes[znodes.partition_path("doomed", index)] = b""
        nodes[znodes.partition_state_path("doomed", index)] = state.to_json()
    return nodes


def test_pending_topic_is_described_from_the_tree() -> None:
    leaderless = znodes.PartitionState(leader=-1, leader_epoch=2, isr=(1,), controller_epoch=1)
    led = znodes.PartitionState(leader=1, leader_epoch=0, isr=(1, 3), controller_epoch=1)
    config = znodes.EntityConfig({"min.insync.replicas": "2", "retention.ms": "1000"}).to_json()
    view = topic_view_from_tree("doomed", _tree({0: leaderless, 1: led}), config)
    assert view.marked_for_deletion
    assert view.topic_id == "UaHolE2KjhJR-ytzGPZ15A"
    assert view.replication_factor == 2
    assert view.min_insync_replicas == 2
    assert view.configs == {"min.insync.replicas": "2", "retention.ms": "1000"}
    assert view.partitions == (
        PartitionView(partition=0, leader=None, replicas=(3, 1), isr=(1,)),
        PartitionView(partition=1, leader=1, replicas=(1, 3), isr=(1, 3)),
        # No state node (yet): no leader, empty ISR.
        PartitionView(
            partition=2,
            leader=None,
            replicas=(2, 3),
            isr=(),
            adding_replicas=(3,),
            removing_replicas=(2,),
        ),
    )
    assert partition_line("doomed", view.partitions[0], view.marked_for_deletion) == (
        "\tTopic: doomed\tPartition: 0\tLeader: none\tReplicas: 3,1\tIsr: 1\t"
        "Elr: N/A\tLastKnownElr: N/A\tMarkedForDeletion: true"
    )


def test_pending_topic_without_config_node_has_the_default_min_isr() -> None:
    view = topic_view_from_tree("doomed", _tree({}), None)
    assert view.configs == {}
    assert view.min_insync_replicas == 1
    assert [p.leader for p in view.partitions] == [None, None, None]


def test_pending_topic_with_bad_json_is_a_format_error() -> None:
    nodes = _tree({})
    nodes[znodes.topic_path("doomed")] = b"{not json"
    with pytest.raises(znodes.ZNodeFormatError):
        topic_view_from_tree("doomed", nodes, None)
