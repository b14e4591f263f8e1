"""Loading the emitted records rebuilds the same offsets and groups (failover, GRP-05)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tests.group.harness import Harness
from trafka.group.config import GroupConfig
from trafka.group.coordinator import GroupCoordinator
from trafka.group.messages import LeavingMember, TopicPartition
from trafka.group.records import decode_record, encode_record
from trafka.group.state import GroupState

CONFIG = GroupConfig(
    group_initial_rebalance_delay_ms=0,
    offsets_retention_minutes=2,
    offsets_retention_check_interval_ms=10_000,
)
GROUPS = ("g1", "g2", "g3")

_steps = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "join",
                "rejoin",
                "sync",
                "heartbeat",
                "commit",
                "leave",
                "advance",
                "delete",
                "delete_offsets",
                "simple_commit",
                "rejoin_all",
                "sync_all",
                "form",
                "form",
            ]
        ),
        st.sampled_from(GROUPS),
        st.integers(0, 5),
    ),
    max_size=60,
)


def _reload(h: Harness) -> GroupCoordinator:
    # Through the bytes, as the shell does when it reads the partition back.
    decoded = [decode_record(*encode_record(record)) for record in h.records]
    return GroupCoordinator.load(CONFIG, random.Random(0), decoded, h.now_ms)


def _run(h: Harness, steps: list[tuple[str, str, int]]) -> Iterator[None]:
    members: dict[str, list[str]] = {g: [] for g in GROUPS}
    for action, group_id, number in steps:
        generation = h.coordinator.generation_id(group_id) or 0
        known = members[group_id]
        member = known[number % len(known)] if known else ""
        if action == "join":
            result = h.join_result(h.join(group_id))
            if result.error == ErrorCode.member_id_required:
                h.join(group_id, result.member_id)
                known.append(result.member_id)
        elif action in ("rejoin_all", "form"):
            for each in known:
                h.join(group_id, each)
            if action == "form":
                generation = h.coordinator.generation_id(group_id) or 0
                leader = h.coordinator.leader_id(group_id)
                assignments = {m: f"{m}:{number}".encode() for m in known}
                for each in sorted(known, key=lambda m: m != leader):
                    h.sync(each, generation, assignments if each == leader else None, group_id)
        elif action == "sync_all":
            leader = h.coordinator.leader_id(group_id)
            assignments = {m: f"{m}:{number}".encode() for m in known}
            for each in sorted(known, key=lambda m: m != leader):
                h.sync(each, generation, assignments if each == leader else None, group_id)
        elif action == "rejoin" and member:
            h.join(group_id, member)
        elif action == "sync" and member:
            h.sync(member, generation, {m: f"{m}:{number}".encode() for m in known}, group_id)
        elif action == "heartbeat" and member:
            h.heartbeat(member, generation, group_id)
        elif action == "commit" and member:
            h.commit(
                {("t", number): number * 10},
                group_id=group_id,
                member_id=member,
                generation_id=generation,
            )
        elif action == "simple_commit":
            h.commit({("s", number): number}, group_id=group_id)
        elif action == "leave" and member:
            h.absorb(
                h.coordinator.leave_group(group_id, (LeavingMember(member, None),), h.now_ms)[1]
            )
        elif action == "advance":
            h.advance(number * 3_000)
        elif action == "delete":
            h.absorb(h.coordinator.delete_groups((group_id,), h.now_ms)[1])
        elif action == "delete_offsets":
            h.absorb(
                h.coordinator.offset_delete(group_id, (TopicPartition("s", number),), h.now_ms)[1]
            )
        yield


@settings(max_examples=150)
@given(_steps, st.integers(0, 1000))
def test_loading_emitted_records_rebuilds_state(
    steps: list[tuple[str, str, int]], seed: int
) -> None:
    h = Harness(CONFIG, seed=seed)
    for _ in _run(h, steps):
        _check_reload(h)


def _check_reload(h: Harness) -> None:
    loaded = _reload(h)
    for group_id in GROUPS:
        assert loaded.committed_offsets(group_id) == h.coordinator.committed_offsets(group_id)
        state = h.coordinator.group_state(group_id)
        if state in (GroupState.STABLE, GroupState.EMPTY):
            # What was last stored is what is live (other states are mid-rebalance, and a
            # failover restarts that rebalance).
            live = h.coordinator.stored_metadata(group_id)
            restored = loaded.stored_metadata(group_id)
            assert live is not None and restored is not None
            if live.generation > 0:
                assert restored.generation == live.generation
                assert restored.protocol == live.protocol
                assert restored.leader == live.leader
                assert restored.members == live.members
            assert loaded.group_state(group_id) is state
        elif state is None:
            assert loaded.group_state(group_id) is None


def test_loaded_stable_group_keeps_serving_its_members() -> None:
    h = Harness(CONFIG)
    (a, b), generation = h.form_group(2)
    h.commit({("t", 0): 42}, member_id=a, generation_id=generation)
    loaded = _reload(h)
    h.coordinator = loaded
    assert h.coordinator.group_state("g") is GroupState.STABLE
    assert h.heartbeat(a, generation) == ErrorCode.none
    assert h.heartbeat(b, generation) == ErrorCode.none
    follower = h.join(member_id=b)
    assert h.join_result(follower).generation_id == generation
    sync = h.sync(b, generation)
    assert h.sync_result(sync).assignment == b.encode()
    assert h.coordinator.offset_fetch("g", (TopicPartition("t", 0),)).partitions[0].offset == 42
    # Sessions restart at load time: a member that never comes back expires.
    for _ in range(3):
        h.advance(4_000)
        h.heartbeat(a, generation)
    assert h.heartbeat(b, generation) == ErrorCode.unknown_member_id


@settings(max_examples=100)
@given(_steps, st.integers(0, 1000))
def test_no_request_is_left_hanging(steps: list[tuple[str, str, int]], seed: int) -> None:
    """Every parked JoinGroup/SyncGroup is answered once the timeouts have passed."""
    h = Harness(CONFIG, seed=seed)
    for _ in _run(h, steps):
        pass
    h.advance(10 * 60_000)  # beyond every rebalance, session and new-member timeout
    issued = set(range(1, h._next_request + 1))
    assert issued == set(h.replies)
