"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups and offset retention (GRP-21..24)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.group.harness import Harness
from trafka.group.config import GroupConfig
from trafka.group.messages import LeavingMember, TopicPartition
from trafka.group.records import GroupMetadataRecord, OffsetCommitRecord
from trafka.group.state import GroupState

RETENTION = GroupConfig(
    group_initial_rebalance_delay_ms=0,
    offsets_retention_minutes=1,
    offsets_retention_check_interval_ms=1_000,
)


def test_simple_commit_creates_an_empty_group_and_fetch_returns_it() -> None:
    h = Harness()
    errors = h.commit({("t", 0): 10, ("t", 1): 20}, metadata="m")
    assert [e.error for e in errors] == [ErrorCode.none, ErrorCode.none]
    assert h.coordinator.group_state("g") is GroupState.EMPTY
    fetched = h.coordinator.offset_fetch("g", (TopicPartition("t", 1), TopicPartition("u", 0)))
    assert [(p.offset, p.leader_epoch, p.metadata) for p in fetched.partitions] == [
        (20, 3, "m"),
        (-1, -1, ""),
    ]
    every = h.coordinator.offset_fetch("g", None)
    assert [(p.topic, p.partition, p.offset) for p in every.partitions] == [
        ("t", 0, 10),
        ("t", 1, 20),
    ]
    assert h.coordinator.offset_fetch("unknown", None).partitions == ()
    records = [r for r in h.records if isinstance(r, OffsetCommitRecord)]
    assert [(r.topic, r.partition, r.value.offset if r.value else None) for r in records] == [
        ("t", 0, 10),
        ("t", 1, 20),
    ]


def test_commit_checks_generation_and_member() -> None:
    h = Harness()
    (a, _), generation = h.form_group(2)
    assert h.commit({("t", 0): 1}, member_id=a, generation_id=generation)[0].error == (
        ErrorCode.none
    )
    assert h.commit({("t", 0): 1}, member_id=a, generation_id=9)[0].error == (
        ErrorCode.illegal_generation
    )
    assert h.commit({("t", 0): 1}, member_id="x", generation_id=generation)[0].error == (
        ErrorCode.unknown_member_id
    )
    # A simple commit to a group with members is not allowed.
    assert h.commit({("t", 0): 1})[0].error == ErrorCode.unknown_member_id
    # Unknown group with a generation: an old generation's commit.
    assert h.commit({("t", 0): 1}, group_id="other", generation_id=3)[0].error == (
        ErrorCode.illegal_generation
    )
    assert h.commit({("t", 0): 1}, group_id="")[0].error == ErrorCode.invalid_group_id


def test_commit_during_completing_rebalance_is_refused() -> None:
    h = Harness()
    a, b = h.join_new_member(), h.join_new_member()
    h.join(member_id=a)
    h.join(member_id=b)
    assert h.coordinator.group_state("g") is GroupState.COMPLETING_REBALANCE
    assert h.commit({("t", 0): 1}, member_id=a, generation_id=1)[0].error == (
        ErrorCode.rebalance_in_progress
    )


def test_metadata_too_large() -> None:
    h = Harness(GroupConfig(offset_metadata_max_bytes=4))
    errors = h.commit({("t", 0): 1}, metadata="12345")
    assert errors[0].error == ErrorCode.offset_metadata_too_large
    assert h.coordinator.offset_fetch("g", None).partitions == ()


def test_offset_delete_rules() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)  # subscribed to topic "t"
    h.commit({("t", 0): 1, ("old", 0): 2}, member_id=a, generation_id=generation)
    result, effects = h.coordinator.offset_delete(
        "g", (TopicPartition("t", 0), TopicPartition("old", 0)), h.now_ms
    )
    assert result.error == ErrorCode.none
    assert [p.error for p in result.partitions] == [
        ErrorCode.group_subscribed_to_topic,
        ErrorCode.none,
    ]
    assert effects.records == (OffsetCommitRecord("g", "old", 0, None),)
    missing, _ = h.coordinator.offset_delete("nope", (TopicPartition("t", 0),), h.now_ms)
    assert missing.error == ErrorCode.group_id_not_found
    _, effects = h.coordinator.leave_group(
        "g", (LeavingMember(a, None), LeavingMember(b, None)), h.now_ms
    )
    result, _ = h.coordinator.offset_delete("g", (TopicPartition("t", 0),), h.now_ms)
    assert [p.error for p in result.partitions] == [ErrorCode.none]
    assert h.coordinator.offset_fetch("g", None).partitions == ()


def test_delete_groups() -> None:
    h = Harness()
    h.form_group(1, group_id="busy")
    h.commit({("t", 0): 1}, group_id="idle")
    results, effects = h.coordinator.delete_groups(("busy", "idle", "ghost"), h.now_ms)
    assert [r.error for r in results] == [
        ErrorCode.non_empty_group,
        ErrorCode.none,
        ErrorCode.group_id_not_found,
    ]
    assert effects.records == (
        OffsetCommitRecord("idle", "t", 0, None),
        GroupMetadataRecord("idle", None),
    )
    assert h.coordinator.group_state("idle") is None


def test_simple_group_offsets_expire_after_retention_since_commit() -> None:
    h = Harness(RETENTION)
    h.commit({("t", 0): 1})
    h.advance(30_000)
    h.commit({("t", 1): 1})
    h.advance(30_000)  # t=60 s: (t,0) is 60 s old
    assert [p.partition for p in h.coordinator.offset_fetch("g", None).partitions] == [1]
    h.advance(30_000)
    assert h.coordinator.group_state("g") is None  # no offsets left: Dead and dropped
    assert h.records[-1] == GroupMetadataRecord("g", None)


def test_consumer_group_offsets_expire_only_after_group_is_empty_for_retention() -> None:
    h = Harness(RETENTION)
    (a,), generation = h.form_group(1)
    h.commit({("t", 0): 1}, member_id=a, generation_id=generation)
    for _ in range(12):  # 2 minutes of heartbeats: a Stable group subscribed to t keeps it
        h.advance(5_000)
        assert h.heartbeat(a, generation) == ErrorCode.none
    assert len(h.coordinator.offset_fetch("g", None).partitions) == 1
    _, effects = h.coordinator.leave_group("g", (LeavingMember(a, None),), h.now_ms)
    h.absorb(effects)
    h.advance(59_000)
    assert len(h.coordinator.offset_fetch("g", None).partitions) == 1
    h.advance(2_000)
    assert h.coordinator.offset_fetch("g", None).partitions == ()
    assert h.coordinator.group_state("g") is None


def test_stable_group_expires_offsets_of_unsubscribed_topics() -> None:
    h = Harness(RETENTION)
    (a,), generation = h.form_group(1)
    h.commit({("t", 0): 1, ("gone", 0): 1}, member_id=a, generation_id=generation)
    for _ in range(13):
        h.advance(5_000)
        h.heartbeat(a, generation)
    assert [p.topic for p in h.coordinator.offset_fetch("g", None).partitions] == ["t"]


def test_explicit_retention_time_v2_to_v4() -> None:
    h = Harness(RETENTION)
    h.commit({("t", 0): 1}, retention_time_ms=5_000)
    h.advance(4_000)
    assert len(h.coordinator.offset_fetch("g", None).partitions) == 1
    h.advance(2_000)
    assert h.coordinator.offset_fetch("g", None).partitions == ()
