"""Seeded simulation: several replicas and clients over an in-memory network.

Raft itself is pysyncobj's; here the committed log is one list (what Raft guarantees) and
everything around it is simulated with faults: proposals and log deliveries are dropped
and delayed, replicas and clients are partitioned and healed, the leader changes (and the
new leader restarts every session deadline from its own clock), clients retry proposals
with the same request id. Invariants are checked after every step; a failing seed replays
exactly (`SEEDS`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from tests.metadata_quorum.test_tree_properties import check_invariants
from trafka.metadata_quorum.sessions import SessionTracker
from trafka.metadata_quorum.tree import (
    Applied,
    Create,
    CreateResult,
    Entry,
    ExpireSession,
    Heartbeat,
    OpenSession,
    Operation,
    Result,
    SessionResult,
    SetData,
    WatchEvent,
    WatchManager,
    ZNodeTree,
)

SEEDS = list(range(6))
TICK_MS = 10
SESSION_TIMEOUT_MS = 600
HEARTBEAT_MS = 150
RETRY_MS = 200
WATCHED = ("/brokers", "/controller")
DIGEST_EVERY = 32  # full-state digests are O(state): compare a sample of log indexes


@dataclass(order=True)
class Message:
    deliver_at_ms: int
    seq: int
    kind: str = field(compare=False)  # "propose" (to the leader) or "entry" (to a replica)
    target: int = field(compare=False)
    entry: Entry | None = field(compare=False, default=None)
    index: int = field(compare=False, default=0)


class Replica:
    def __init__(self, replica_id: int) -> None:
        self.replica_id = replica_id
        self.tree = ZNodeTree()
        self.watches = WatchManager()
        self.events: list[WatchEvent] = []
        self.applied = 0  # log index
        self.pending: dict[int, Entry] = {}
        self.results: dict[str, Result] = {}
        self.digests: dict[int, str] = {}  # sampled: every DIGEST_EVERY-th index

    def offer(self, index: int, entry: Entry) -> list[Applied]:
        if index > self.applied:
            self.pending[index] = entry
        done: list[Applied] = []
        while self.applied + 1 in self.pending:
            self.applied += 1
            next_entry = self.pending.pop(self.applied)
            applied = self.tree.apply(next_entry)
            self.events += self.watches.trigger(applied.zxid, applied.changes)
            if self.applied % 5 == 0:  # the same registrations at the same index everywhere
                self.watches.add_child_watch(WATCHED[0])
                self.watches.add_data_watch(WATCHED[1])
            if self.applied % DIGEST_EVERY == 0:
                self.digests[self.applied] = self.tree.digest()
            if next_entry.request_id:
                self.results.setdefault(next_entry.request_id, applied.result)
            done.append(applied)
        return done


@dataclass
class Client:
    client_id: int
    replica_id: int
    session_id: int = 0
    outstanding: dict[str, tuple[Entry, int]] = field(default_factory=dict)
    counter: int = 0
    next_heartbeat_ms: int = 0
    opening: str = ""
    acknowledged: dict[str, Result] = field(default_factory=dict)

    def new_id(self) -> str:
        self.counter += 1
        return f"c{self.client_id}:{self.counter}"


class Simulation:
    def __init__(self, seed: int, replicas: int = 3, clients: int = 3) -> None:
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.seq = 0
        self.log: list[Entry] = []
        self.reference = ZNodeTree()
        self.reference_digests: dict[int, str] = {}
        self.first_results: dict[str, Result] = {}
        self.replicas = [Replica(i) for i in range(replicas)]
        self.clients = [Client(i, i % replicas) for i in range(clients)]
        self.leader = 0
        self.tracker = SessionTracker(pause_threshold_ms=10_000)
        self.tracker.reset([], 0)
        self.partitioned: set[int] = set()  # replica ids cut off from the leader
        self.queue: list[Message] = []
        self.last_zxid = [0] * replicas
        for setup in (Create("/brokers"), Create("/seq"), Create("/controller")):
            self.append(Entry("", 0, 0, setup))

    # -- the log (what Raft provides) ------------------------------------------------

    def append(self, entry: Entry) -> None:
        self.log.append(entry)
        applied = self.reference.apply(entry)
        if len(self.log) % DIGEST_EVERY == 0:
            self.reference_digests[len(self.log)] = self.reference.digest()
        if entry.request_id:
            self.first_results.setdefault(entry.request_id, applied.result)
        self.replicas[self.leader].offer(len(self.log), entry)
        for replica in self.replicas:
            if replica.replica_id != self.leader:
                self.send("entry", replica.replica_id, entry, len(self.log))

    # -- the network ---------------------------------------------------------------------

    def send(self, kind: str, target: int, entry: Entry, index: int = 0) -> None:
        if self.rng.random() < 0.15:
            return  # dropped
        delay = self.rng.choice([0, 10, 20, 50, 150])
        self.seq += 1
        self.queue.append(Message(self.now_ms + delay, self.seq, kind, target, entry, index))

    def reachable(self, replica_id: int) -> bool:
        return replica_id == self.leader or replica_id not in self.partitioned

    def deliver_due(self) -> None:
        self.queue.sort()
        due = [m for m in self.queue if m.deliver_at_ms <= self.now_ms]
        self.queue = [m for m in self.queue if m.deliver_at_ms > self.now_ms]
        for message in due:
            assert message.entry is not None
            if message.kind == "propose":
                if self.reachable(message.target):  # target = the proposing client's replica
                    self.append(message.entry)
            elif self.reachable(message.target):
                self.replicas[message.target].offer(message.index, message.entry)

    def catch_up(self) -> None:
        """The leader resends what a lagging follower misses (AppendEntries retries)."""
        for replica in self.replicas:
            if replica.replica_id == self.leader or not self.reachable(replica.replica_id):
                continue
            for index in range(replica.applied + 1, min(len(self.log), replica.applied + 100) + 1):
                self.send("entry", replica.replica_id, self.log[index - 1], index)

    # -- clients ---------------------------------------------------------------------------

    def propose(self, client: Client, op: Operation, request_id: str, session: int) -> None:
        entry = Entry(request_id, session, self.now_ms, op)
        client.outstanding[request_id] = (entry, self.now_ms)
        self.send("propose", client.replica_id, entry)

    def drive_client(self, client: Client) -> None:
        replica = self.replicas[client.replica_id]
        for request_id, (entry, sent_ms) in list(client.outstanding.items()):
            if request_id in replica.results:
                result = replica.results[request_id]
                client.outstanding.pop(request_id)
                client.acknowledged[request_id] = result
                self.on_result(client, entry, result)
            elif self.now_ms - sent_ms >= RETRY_MS:
                client.outstanding[request_id] = (entry, self.now_ms)
                self.send("propose", client.replica_id, entry)  # same id: at most once
        if (
            client.session_id
            and client.session_id not in {s.session_id for s in replica.tree.sessions()}
            and replica.applied >= self.session_opened_at(client)
        ):
            client.session_id = 0  # the replica applied our expiry: open a new session
        if not client.session_id and not client.opening:
            client.opening = client.new_id()
            self.propose(
                client, OpenSession(SESSION_TIMEOUT_MS, f"c{client.client_id}"), client.opening, 0
            )
        if client.session_id and self.now_ms >= client.next_heartbeat_ms:
            client.next_heartbeat_ms = self.now_ms + HEARTBEAT_MS
            self.propose(client, Heartbeat(client.session_id), client.new_id(), 0)
        if client.session_id and self.rng.random() < 0.2:
            roll = self.rng.random()
            op: Operation
            if roll < 0.4:
                op = Create(f"/seq/c{client.client_id}-", b"", False, True)
            elif roll < 0.7:
                op = SetData("/controller", str(client.client_id).encode())
            else:
                op = Create(f"/brokers/c{client.client_id}", b"", True, False)
            self.propose(client, op, client.new_id(), client.session_id)

    def session_opened_at(self, client: Client) -> int:
        return client.session_id  # session ids are the zxid (= log index) that opened them

    def on_result(self, client: Client, entry: Entry, result: Result) -> None:
        assert result == self.first_results[entry.request_id], "a retry changed the result"
        if isinstance(entry.op, OpenSession) and entry.request_id == client.opening:
            client.opening = ""
            assert isinstance(result, SessionResult)
            client.session_id = result.session_id
            client.next_heartbeat_ms = self.now_ms
            self.propose(
                client,
                Create(f"/brokers/c{client.client_id}", b"", True, False),
                client.new_id(),
                client.session_id,
            )

    # -- the leader ------------------------------------------------------------------------

    def leader_duties(self) -> None:
        leader_tree = self.replicas[self.leader].tree
        for decision in self.tracker.expired(leader_tree.sessions(), self.now_ms):
            self.append(
                Entry(
                    f"expire:{decision.session_id}:{decision.last_heartbeat_zxid}",
                    0,
                    self.now_ms,
                    ExpireSession(decision.session_id, decision.last_heartbeat_zxid),
                )
            )

    def faults(self) -> None:
        roll = self.rng.random()
        if roll < 0.004:
            candidates = [
                r.replica_id for r in self.replicas if r.replica_id not in self.partitioned
            ]
            new_leader = self.rng.choice(candidates)
            # Raft elects only an up-to-date replica: bring it to the log end first.
            for index in range(self.replicas[new_leader].applied + 1, len(self.log) + 1):
                self.replicas[new_leader].offer(index, self.log[index - 1])
            self.leader = new_leader
            self.tracker = SessionTracker(pause_threshold_ms=10_000)
            self.tracker.reset(self.replicas[new_leader].tree.sessions(), self.now_ms)
        elif roll < 0.008:
            victim = self.rng.randrange(len(self.replicas))
            if victim != self.leader:
                self.partitioned.add(victim)
        elif roll < 0.02:
            self.partitioned.clear()

    # -- invariants ------------------------------------------------------------------------

    def check(self) -> None:
        for replica in self.replicas:
            for index, digest in replica.digests.items():
                assert digest == self.reference_digests[index], (replica.replica_id, index)
            replica.digests.clear()
            assert replica.tree.last_zxid == replica.applied
            assert replica.tree.last_zxid >= self.last_zxid[replica.replica_id]
            self.last_zxid[replica.replica_id] = replica.tree.last_zxid
        streams = sorted((r.applied, r.events) for r in self.replicas)
        longest = streams[-1][1]
        for _, events in streams:
            assert events == longest[: len(events)], "watch events diverged"

    def step(self) -> None:
        self.now_ms += TICK_MS
        self.faults()
        self.deliver_due()
        if self.now_ms % 50 == 0:
            self.catch_up()
        self.leader_duties()
        for client in self.clients:
            self.drive_client(client)
        self.check()

    def heal_and_settle(self) -> None:
        self.partitioned.clear()
        for _ in range(400):
            self.step_without_faults()
        for _ in range(2000):
            if all(r.applied == len(self.log) for r in self.replicas):
                break
            self.step_without_faults()
        reference = self.reference.digest()
        for replica in self.replicas:
            assert replica.tree.digest() == reference, f"replica {replica.replica_id} diverged"
        check_invariants(self.reference)
        for client in self.clients:
            assert client.session_id, f"client {client.client_id} has no session"
            found = self.reference.exists(f"/brokers/c{client.client_id}")
            assert found is not None and found.ephemeral_owner == client.session_id

    def step_without_faults(self) -> None:
        self.now_ms += TICK_MS
        self.deliver_due()
        if self.now_ms % 50 == 0:
            self.catch_up()
        self.leader_duties()
        for client in self.clients:
            self.drive_client(client)
        self.check()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_replicas_converge_under_faults(seed: int) -> None:
    simulation = Simulation(seed)
    for _ in range(1500):
        simulation.step()
    simulation.heal_and_settle()
    # Sequence numbers were never handed out twice, and each request applied at most once.
    names = simulation.reference.children("/seq")
    assert len(names) == len(set(names))
    creators = [
        request_id
        for request_id, result in simulation.first_results.items()
        if isinstance(result, CreateResult) and result.path.startswith("/seq/")
    ]
    assert len(creators) == len(names)


def test_a_partitioned_client_loses_its_session_and_recovers() -> None:
    simulation = Simulation(seed=99, replicas=3, clients=3)
    for _ in range(100):
        simulation.step_without_faults()
    client = simulation.clients[1]
    first_session = client.session_id
    assert first_session
    simulation.leader = 0
    simulation.partitioned = {1}
    for _ in range(150):  # 1.5 s > SESSION_TIMEOUT_MS
        simulation.step_without_faults()
    assert simulation.reference.session(first_session) is None
    assert simulation.reference.exists("/brokers/c1") is None
    simulation.heal_and_settle()
    assert client.session_id != first_session
