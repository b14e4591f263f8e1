"""Seeded simulation: clients that follow the protocol as librdkafka does always converge.

Each simulated client joins (handling MEMBER_ID_REQUIRED), syncs (the leader assigns the
partitions round-robin over the members it was given), heartbeats every second, rejoins on
REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION and resets its member id on UNKNOWN_MEMBER_ID
(GRP-06, GRP-18). Random joins, LeaveGroups and silent crashes happen; once they stop, the
group must become Stable with exactly the live clients as members, every client in the
current generation, and the partitions split among them with no overlap (GRP-02).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tests.group.harness import Harness
from trafka.group.config import GroupConfig
from trafka.group.messages import JoinGroupResult, LeavingMember, RequestId, SyncGroupResult
from trafka.group.state import GroupState

PARTITIONS = list(range(6))
STEP_MS = 100
CONFIG = GroupConfig(group_initial_rebalance_delay_ms=500)
RESTARTING = {ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation}


@dataclass
class Client:
    name: int
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    phase: str = "join"  # join | sync | stable
    pending: RequestId | None = None
    members: list[str] = field(default_factory=list)
    leader: str = ""
    assignment: list[int] = field(default_factory=list)
    next_heartbeat_ms: int = 0

    def reset(self, *, forget_id: bool) -> None:
        if forget_id:
            self.member_id = ""
        self.phase = "join"
        self.pending = None


def _drive(h: Harness, client: Client) -> None:
    if client.pending is not None:
        result = h.replies.get(client.pending)
        if result is None:
            return
        client.pending = None
        if isinstance(result, JoinGroupResult):
            _on_join(client, result)
        else:
            _on_sync(client, result)
    if client.phase == "join":
        client.pending = h.join(
            member_id=client.member_id,
            instance_id=client.instance_id,
            session_timeout_ms=6_000,
            rebalance_timeout_ms=10_000,
        )
    elif client.phase == "sync":
        assignments = None
        if client.member_id == client.leader:
            ordered = sorted(client.members)
            assignments = {
                m: json.dumps(PARTITIONS[i :: len(ordered)]).encode() for i, m in enumerate(ordered)
            }
        client.pending = h.sync(
            client.member_id, client.generation, assignments, instance_id=client.instance_id
        )
    elif h.now_ms >= client.next_heartbeat_ms:
        client.next_heartbeat_ms = h.now_ms + 1_000
        error = h.heartbeat(client.member_id, client.generation, instance_id=client.instance_id)
        if error in RESTARTING:
            client.reset(forget_id=False)
        elif error == ErrorCode.unknown_member_id:
            client.reset(forget_id=True)
        else:
            assert error == ErrorCode.none


def _on_join(client: Client, result: JoinGroupResult) -> None:
    if result.error == ErrorCode.member_id_required:
        client.member_id = result.member_id
    elif result.error == ErrorCode.none:
        client.member_id = result.member_id
        client.generation = result.generation_id
        client.leader = result.leader
        client.members = [m.member_id for m in result.members]
        client.phase = "sync"
    elif result.error == ErrorCode.unknown_member_id:
        client.reset(forget_id=True)
    else:
        assert result.error in RESTARTING, result


def _on_sync(client: Client, result: SyncGroupResult) -> None:
    if result.error == ErrorCode.none:
        client.assignment = json.loads(result.assignment or b"[]")
        client.phase = "stable"
        client.next_heartbeat_ms = 0
    elif result.error == ErrorCode.unknown_member_id:
        client.reset(forget_id=True)
    else:
        assert result.error in RESTARTING, result
        client.reset(forget_id=False)


@settings(max_examples=40)
@given(
    st.lists(st.sampled_from(["add", "add", "leave", "crash", "wait"]), min_size=1, max_size=12),
    st.integers(0, 10_000),
)
def test_random_membership_changes_converge(events: list[str], seed: int) -> None:
    rng = random.Random(seed)
    h = Harness(CONFIG, seed=seed)
    clients: list[Client] = []
    names = iter(range(1_000))

    def run(duration_ms: int) -> None:
        for _ in range(duration_ms // STEP_MS):
            for client in list(clients):
                _drive(h, client)
            h.advance(STEP_MS)

    for event in events:
        if event == "add" or not clients:
            clients.append(Client(next(names)))
        elif event == "leave":
            leaving = clients.pop(rng.randrange(len(clients)))
            if leaving.member_id:
                _, effects = h.coordinator.leave_group(
                    "g", (LeavingMember(leaving.member_id, None),), h.now_ms
                )
                h.absorb(effects)
        elif event == "crash":
            clients.pop(rng.randrange(len(clients)))
        run(rng.randrange(0, 4_000, STEP_MS))
    run(40_000)  # crashed members expire (6 s), rebalances finish (10 s)

    if not clients:
        assert h.coordinator.group_state("g") in (GroupState.EMPTY, None)
        return
    assert h.coordinator.group_state("g") is GroupState.STABLE
    generation = h.coordinator.generation_id("g")
    description = h.coordinator.describe_group("g")
    assert sorted(m.member_id for m in description.members) == sorted(c.member_id for c in clients)
    owned: list[int] = []
    for client in clients:
        assert client.phase == "stable" and client.generation == generation
        owned += client.assignment
    assert sorted(owned) == PARTITIONS


@settings(max_examples=40)
@given(
    st.lists(
        st.sampled_from(["add", "add_static", "leave", "crash", "restart", "wait"]),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 10_000),
)
def test_static_members_restarting_converge(events: list[str], seed: int) -> None:
    """KIP-345: static members come back with a new member id and replace themselves."""
    rng = random.Random(seed)
    h = Harness(CONFIG, seed=seed)
    clients: list[Client] = []
    names = iter(range(1_000))

    def run(duration_ms: int) -> None:
        for _ in range(duration_ms // STEP_MS):
            for client in list(clients):
                _drive(h, client)
            h.advance(STEP_MS)

    for event in events:
        if event == "add" or not clients:
            clients.append(Client(next(names)))
        elif event == "add_static":
            name = next(names)
            clients.append(Client(name, instance_id=f"instance-{name}"))
        elif event == "leave":
            leaving = clients.pop(rng.randrange(len(clients)))
            _, effects = h.coordinator.leave_group(
                "g", (LeavingMember(leaving.member_id, leaving.instance_id),), h.now_ms
            )
            h.absorb(effects)
        elif event == "crash":
            clients.pop(rng.randrange(len(clients)))
        elif event == "restart":
            old = clients.pop(rng.randrange(len(clients)))
            clients.append(Client(next(names), instance_id=old.instance_id))
        run(rng.randrange(0, 4_000, STEP_MS))
    run(40_000)

    if not clients:
        assert h.coordinator.group_state("g") in (GroupState.EMPTY, None)
        return
    assert h.coordinator.group_state("g") is GroupState.STABLE
    generation = h.coordinator.generation_id("g")
    description = h.coordinator.describe_group("g")
    assert sorted(m.member_id for m in description.members) == sorted(c.member_id for c in clients)
    owned: list[int] = []
    for client in clients:
        assert client.phase == "stable" and client.generation == generation
        owned += client.assignment
    assert sorted(owned) == PARTITIONS


def test_a_static_restart_in_a_stable_group_keeps_the_generation() -> None:
    h = Harness(CONFIG, seed=3)
    clients = [Client(n, instance_id=f"instance-{n}") for n in range(3)]

    def run(duration_ms: int) -> None:
        for _ in range(duration_ms // STEP_MS):
            for client in list(clients):
                _drive(h, client)
            h.advance(STEP_MS)

    run(5_000)
    assert h.coordinator.group_state("g") is GroupState.STABLE
    generation = h.coordinator.generation_id("g")
    old = clients.pop(0)
    clients.insert(0, Client(10, instance_id=old.instance_id))
    run(5_000)
    assert h.coordinator.generation_id("g") == generation
    assert clients[0].assignment == old.assignment
    assert clients[0].member_id != old.member_id
