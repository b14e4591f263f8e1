"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup rules of the pure coordinator (GRP-06..20)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.group.harness import FAST, Harness, protocols
from trafka.group.config import GroupConfig
from trafka.group.messages import LeavingMember
from trafka.group.records import GroupMetadataRecord
from trafka.group.state import GroupState


def test_kip_394_member_id_required_then_join() -> None:
    h = Harness()
    first = h.join(version=4, client_id="rdkafka")
    result = h.join_result(first)
    assert result.error == ErrorCode.member_id_required
    assert result.member_id.startswith("rdkafka-")
    assert h.coordinator.group_state("g") is GroupState.EMPTY  # pending, not a member yet
    second = h.join(member_id=result.member_id, version=4)
    joined = h.join_result(second)
    assert joined.error == ErrorCode.none
    assert joined.member_id == result.member_id
    assert joined.leader == result.member_id
    assert joined.generation_id == 1
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [result.member_id]
    assert h.coordinator.group_state("g") is GroupState.COMPLETING_REBALANCE


def test_old_versions_get_a_member_id_at_once() -> None:
    h = Harness()
    joined = h.join_result(h.join(version=3))
    assert joined.error == ErrorCode.none
    assert joined.member_id.startswith("client-")


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    member_id = h.join_new_member(session_timeout_ms=6000)
    h.advance(6000)
    late = h.join_result(h.join(member_id=member_id))
    assert late.error == ErrorCode.unknown_member_id


def test_member_ids_are_unique_and_deterministic_per_seed() -> None:
    first, second = Harness(seed=7), Harness(seed=7)
    ids = [first.join_new_member() for _ in range(5)]
    assert len(set(ids)) == 5
    assert ids == [second.join_new_member() for _ in range(5)]


def test_three_members_rebalance_and_sync() -> None:
    h = Harness()
    members, generation = h.form_group(3)
    assert generation == 1
    assert h.coordinator.group_state("g") is GroupState.STABLE
    for member_id in members:
        assert h.heartbeat(member_id, generation) == ErrorCode.none
    stored = [r for r in h.records if isinstance(r, GroupMetadataRecord)]
    assert stored[-1].value is not None
    assert stored[-1].value.generation == 1
    assert {m.member_id: m.assignment for m in stored[-1].value.members} == {
        m: m.encode() for m in members
    }


def test_leader_gets_members_followers_get_none() -> None:
    h = Harness()
    a, b = h.join_new_member(), h.join_new_member()
    ra, rb = h.join(member_id=a), h.join(member_id=b)
    leader = h.join_result(ra)
    follower = h.join_result(rb)
    assert leader.leader == follower.leader == a
    assert {m.member_id for m in leader.members} == {a, b}
    assert follower.members == ()


def test_follower_sync_waits_for_leader() -> None:
    h = Harness()
    a, b = h.join_new_member(), h.join_new_member()
    h.join(member_id=a)
    h.join(member_id=b)
    follower_sync = h.sync(b, 1)
    assert follower_sync not in h.replies  # parked
    leader_sync = h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.sync_result(leader_sync).assignment == b"A"
    assert h.sync_result(follower_sync).assignment == b"B"
    assert h.sync_result(follower_sync).protocol_name == "range"


def test_new_member_triggers_rebalance_and_heartbeats_say_so() -> None:
    h = Harness()
    (a, b, c), generation = h.form_group(3)
    d = h.join_new_member()
    parked = h.join(member_id=d)
    assert parked not in h.replies
    assert h.coordinator.group_state("g") is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, generation) == ErrorCode.rebalance_in_progress
    # Commits of the old generation are still accepted while preparing (GRP-12).
    assert h.commit({("t", 0): 5}, member_id=a, generation_id=generation)[0].error == (
        ErrorCode.none
    )
    rejoins = [h.join(member_id=m) for m in (a, b, c)]
    results = [h.join_result(r) for r in [*rejoins, parked]]
    assert {r.generation_id for r in results} == {2}
    assert sum(1 for r in results if r.members) == 1
    assert h.heartbeat(a, generation) == ErrorCode.illegal_generation
    assert h.heartbeat(a, 2) == ErrorCode.none  # CompletingRebalance accepts heartbeats


def test_members_that_do_not_rejoin_are_dropped_at_rebalance_timeout() -> None:
    h = Harness()
    (a, b, c), _ = h.form_group(3)
    d = h.join_new_member()
    parked = h.join(member_id=d, rebalance_timeout_ms=20_000)
    h.join(member_id=a)
    # b and c keep heartbeating but never rejoin.
    for _ in range(4):
        h.advance(5_000)
        h.heartbeat(b, 1)
        h.heartbeat(c, 1)
    h.advance(15_000)
    result = h.join_result(parked)
    assert result.generation_id == 2
    assert h.heartbeat(b, 2) == ErrorCode.unknown_member_id
    description = h.coordinator.describe_group("g")
    assert {m.member_id for m in description.members} == {a, d}


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    for _ in range(3):
        h.advance(4_000)
        assert h.heartbeat(a, generation) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    # b never heartbeats: it expires 10 s after its last activity.
    assert h.coordinator.group_state("g") is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, generation) == ErrorCode.unknown_member_id
    rejoin = h.join(member_id=a)
    assert h.join_result(rejoin).generation_id == 2
    assert h.join_result(rejoin).members[0].member_id == a


def test_leader_rejoin_in_stable_rebalances_but_follower_rejoin_does_not() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    follower_rejoin = h.join(member_id=b)
    assert h.join_result(follower_rejoin).generation_id == 1
    assert h.coordinator.group_state("g") is GroupState.STABLE
    h.join(member_id=a)
    assert h.coordinator.group_state("g") is GroupState.PREPARING_REBALANCE


def test_changed_metadata_rebalances() -> None:
    h = Harness()
    (_, b), _ = h.form_group(2)
    h.join(member_id=b, protos=protocols("range", topics=("t", "u")))
    assert h.coordinator.group_state("g") is GroupState.PREPARING_REBALANCE


def test_protocol_selection_most_votes_among_common() -> None:
    h = Harness()
    ids = [h.join_new_member(protos=protocols("roundrobin", "range")) for _ in range(3)]
    ids.append(h.join_new_member(protos=protocols("range", "roundrobin", "sticky")))
    h.join(member_id=ids[0], protos=protocols("sticky", "roundrobin", "range"))
    h.join(member_id=ids[1], protos=protocols("roundrobin", "range"))
    h.join(member_id=ids[2], protos=protocols("roundrobin", "range"))
    last = h.join(member_id=ids[3], protos=protocols("range", "roundrobin", "sticky"))
    # sticky is not supported by all; roundrobin has 3 first-choice votes among common ones.
    assert h.join_result(last).protocol_name == "roundrobin"


def test_incompatible_protocol_is_refused() -> None:
    h = Harness()
    h.form_group(1)
    refused = h.join(protos=protocols("custom"))
    assert h.join_result(refused).error == ErrorCode.inconsistent_group_protocol
    other_type = h.join(group_id="g2", protos=())
    assert h.join_result(other_type).error == ErrorCode.inconsistent_group_protocol
    assert "g2" not in h.coordinator.group_ids()


def test_session_timeout_bounds() -> None:
    h = Harness()
    too_short = h.join(session_timeout_ms=5_999)
    too_long = h.join(session_timeout_ms=1_800_001)
    assert h.join_result(too_short).error == ErrorCode.invalid_session_timeout
    assert h.join_result(too_long).error == ErrorCode.invalid_session_timeout
    assert h.join_result(h.join(session_timeout_ms=6_000)).error == ErrorCode.member_id_required


def test_group_max_size() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2))
    h.join_new_member()
    h.join_new_member()
    third = h.join()
    assert h.join_result(third).error == ErrorCode.group_max_size_reached


def test_unknown_member_and_empty_group_id() -> None:
    h = Harness()
    assert h.join_result(h.join(member_id="nobody")).error == ErrorCode.unknown_member_id
    assert h.join_result(h.join(group_id="")).error == ErrorCode.invalid_group_id
    assert h.heartbeat("nobody", 1) == ErrorCode.unknown_member_id
    assert h.sync_result(h.sync("nobody", 1)).error == ErrorCode.unknown_member_id


def test_sync_generation_and_rebalance_checks() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    assert h.sync_result(h.sync(a, 7)).error == ErrorCode.illegal_generation
    h.join(member_id=a)  # leader rejoins -> PreparingRebalance
    assert h.sync_result(h.sync(b, 1)).error == ErrorCode.rebalance_in_progress


def test_parked_sync_is_answered_when_rebalance_restarts() -> None:
    h = Harness()
    a, b = h.join_new_member(), h.join_new_member()
    h.join(member_id=a)
    h.join(member_id=b)
    follower_sync = h.sync(b, 1)
    c = h.join_new_member()
    h.join(member_id=c)
    assert h.sync_result(follower_sync).error == ErrorCode.rebalance_in_progress


def test_members_that_never_sync_are_removed_after_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.join_new_member(), h.join_new_member()
    h.join(member_id=a, rebalance_timeout_ms=20_000)
    h.join(member_id=b, rebalance_timeout_ms=20_000)
    # Both heartbeat, the leader never syncs.
    for _ in range(5):
        h.advance(5_000)
        h.heartbeat(a, 1)
        h.heartbeat(b, 1)
    assert h.coordinator.group_state("g") is GroupState.EMPTY
    assert h.coordinator.generation_id("g") == 2


def test_leave_group_single_and_batch() -> None:
    h = Harness()
    (a, b, c), _ = h.form_group(3)
    result, effects = h.coordinator.leave_group("g", (LeavingMember(a, None),), h.now_ms)
    h.absorb(effects)
    assert result.members[0].error == ErrorCode.none
    assert h.coordinator.group_state("g") is GroupState.PREPARING_REBALANCE
    result, effects = h.coordinator.leave_group(
        "g", (LeavingMember(b, None), LeavingMember(c, None), LeavingMember("x", None)), h.now_ms
    )
    h.absorb(effects)
    assert [m.error for m in result.members] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_member_id,
    ]
    # Everybody left: the rebalance completes at once into Empty with a new generation.
    assert h.coordinator.group_state("g") is GroupState.EMPTY
    assert h.coordinator.generation_id("g") == 2
    empty = h.records[-1]
    assert isinstance(empty, GroupMetadataRecord) and empty.value is not None
    assert empty.value.members == () and empty.value.generation == 2
    result, _ = h.coordinator.leave_group("unknown", (LeavingMember(a, None),), h.now_ms)
    assert result.error == ErrorCode.none
    assert result.members[0].error == ErrorCode.unknown_member_id


def test_leave_completes_a_pending_rebalance_and_answers_the_leaver() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    rejoin = h.join(member_id=a)
    result, effects = h.coordinator.leave_group("g", (LeavingMember(b, None),), h.now_ms)
    h.absorb(effects)
    assert result.members[0].error == ErrorCode.none
    assert h.join_result(rejoin).generation_id == 2
    assert h.join_result(rejoin).members[0].member_id == a


def test_initial_rebalance_delay_waits_and_extends() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3000))
    a = h.join_new_member()
    first = h.join(member_id=a, rebalance_timeout_ms=10_000)
    h.advance(2_000)
    assert first not in h.replies  # even alone, the first join waits for the delay
    b = h.join_new_member()
    second = h.join(member_id=b, rebalance_timeout_ms=10_000)
    h.advance(1_000)  # t = 3 s: a new member arrived, so the delay is extended by 3 s
    assert first not in h.replies
    h.advance(2_999)
    assert first not in h.replies
    h.advance(1)
    assert h.join_result(first).generation_id == 1
    assert h.join_result(second).generation_id == 1


def test_initial_delay_is_capped_by_rebalance_timeout() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3000))
    a = h.join_new_member()
    first = h.join(member_id=a, rebalance_timeout_ms=4_000)
    for _ in range(5):  # a new member every second keeps asking for more delay
        h.advance(1_000)
        member_id = h.join_new_member()
        h.join(member_id=member_id, rebalance_timeout_ms=4_000)
        if first in h.replies:
            break
    # 3 s initial delay + at most (4 s - 3 s) extension.
    assert first in h.replies
    assert h.now_ms - 1_000_000 <= 4_000


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    b = h.join_new_member()
    a_first = h.join(instance_id="instance-a")  # static members join without KIP-394
    h.join(member_id=b)
    ra = h.join_result(a_first)
    a = ra.member_id
    assert a.startswith("instance-a-")
    assert ra.error == ErrorCode.none and ra.leader == a
    h.sync(a, 1, {a: b"A", b: b"B"})
    h.sync(b, 1)
    assert h.coordinator.group_state("g") is GroupState.STABLE
    # instance-a restarts: a new JoinGroup with no member id and the same instance id.
    restarted = h.join_result(h.join(instance_id="instance-a"))
    assert restarted.error == ErrorCode.none
    assert restarted.member_id != a
    assert restarted.generation_id == 1
    assert restarted.leader == a  # the old leader id: the new member must not reassign
    assert restarted.members == ()
    assert h.coordinator.group_state("g") is GroupState.STABLE
    sync = h.sync(restarted.member_id, 1, instance_id="instance-a")
    assert h.sync_result(sync).assignment == b"A"
    # The old incarnation is fenced.
    assert h.heartbeat(a, 1, instance_id="instance-a") == ErrorCode.fenced_instance_id
    assert h.heartbeat(restarted.member_id, 1, instance_id="instance-a") == ErrorCode.none
    assert h.join_result(h.join(member_id=a, instance_id="instance-a")).error == (
        ErrorCode.fenced_instance_id
    )
    errors = h.commit({("t", 0): 1}, member_id=a, generation_id=1, instance_id="instance-a")
    assert errors[0].error == ErrorCode.fenced_instance_id


def test_static_leader_restart_with_v9_skips_assignment() -> None:
    h = Harness()
    a = h.join_result(h.join(instance_id="i")).member_id
    h.sync(a, 1, {a: b"A"})
    restarted = h.join_result(h.join(instance_id="i", version=9))
    assert restarted.skip_assignment
    assert restarted.leader == restarted.member_id
    assert [m.member_id for m in restarted.members] == [restarted.member_id]


def test_static_member_session_expiry_still_removes_it() -> None:
    h = Harness()
    a = h.join_result(h.join(instance_id="i", session_timeout_ms=6_000)).member_id
    h.sync(a, 1, {a: b"A"})
    h.advance(6_000)
    assert h.coordinator.group_state("g") is GroupState.EMPTY
    result, _ = h.coordinator.leave_group("g", (LeavingMember("", "i"),), h.now_ms)
    assert result.members[0].error == ErrorCode.unknown_member_id


def test_static_leave_by_instance_id() -> None:
    h = Harness()
    a = h.join_result(h.join(instance_id="i")).member_id
    h.sync(a, 1, {a: b"A"})
    result, _ = h.coordinator.leave_group("g", (LeavingMember("other", "i"),), h.now_ms)
    assert result.members[0].error == ErrorCode.fenced_instance_id
    result, effects = h.coordinator.leave_group("g", (LeavingMember("", "i"),), h.now_ms)
    h.absorb(effects)
    assert result.members[0].error == ErrorCode.none
    assert h.coordinator.group_state("g") is GroupState.EMPTY


def test_describe_and_list_groups() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    h.commit({("t", 0): 1}, group_id="simple")
    description = h.coordinator.describe_group("g")
    assert description.state == "Stable"
    assert description.protocol_type == "consumer"
    assert description.protocol == "range"
    assert {m.member_id: m.assignment for m in description.members} == {
        a: a.encode(),
        b: b.encode(),
    }
    assert h.coordinator.describe_group("nope").state == "Dead"
    listed = {g.group_id: (g.protocol_type, g.state) for g in h.coordinator.list_groups()}
    assert listed == {"g": ("consumer", "Stable"), "simple": ("", "Empty")}
    only_empty = h.coordinator.list_groups(frozenset({GroupState.EMPTY}))
    assert [g.group_id for g in only_empty] == ["simple"]


def test_fast_config_is_fast() -> None:
    assert FAST.group_initial_rebalance_delay_ms == 0


def test_pending_members_are_bounded_even_without_group_max_size() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, max_members_per_group=3))
    for _ in range(3):
        h.join_new_member()
    assert h.join_result(h.join()).error == ErrorCode.group_max_size_reached
