"""A seeded simulation of many producers, coordinator crashes and slow markers.

Invariants checked at every step (a failing seed replays exactly):

* the log is the truth: a coordinator reloaded from the records written so far describes
  every transactional id exactly as the live one does;
* epochs never go back: for each producer id, the epochs written to the log never decrease;
* fencing: only the newest instance of an id (the last one granted an epoch) ever gets NONE
  from AddPartitionsToTxn or EndTxn;
* decisions are final: the markers of a transaction are all COMMIT or all ABORT, and a
  transaction whose EndTxn(commit) was answered NONE is committed (never aborted);
* every transaction ends: once the clients stop, ticking and delivering markers brings every
  id to a complete state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from trafka.txn.config import TransactionConfig
from trafka.txn.coordinator import Effects, MarkerRequest, TopicPartition, TransactionCoordinator
from trafka.txn.records import TransactionLogRecord, decode_record, encode_record
from trafka.txn.state import TransactionState

CONFIG = TransactionConfig(
    transaction_max_timeout_ms=10_000,
    transactional_id_expiration_ms=50_000,
    abort_timed_out_transaction_cleanup_interval_ms=500,
    remove_expired_transaction_cleanup_interval_ms=5_000,
)
IDS = ("a", "b", "c")
PARTITIONS = tuple(TopicPartition("t", p) for p in range(4))


@dataclass
class Instance:
    txn_id: str
    producer_id: int = -1
    producer_epoch: int = -1


class Simulation:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.epoch = 1
        self.log: list[TransactionLogRecord] = []
        self.coordinator = TransactionCoordinator(CONFIG, self.epoch, self.now)
        self.markers: list[MarkerRequest] = []
        self.instances: list[Instance] = []
        self.newest: dict[str, Instance] = {}
        self.next_pid = 100
        self.decisions: dict[str, tuple[int, int, bool]] = {}  # open: id -> (pid, epoch, commit)
        self.last_epoch: dict[int, int] = {}
        self.promised_commits: set[tuple[int, int, str]] = set()

    def apply(self, effects: Effects) -> None:
        for record in effects.records:
            decoded = decode_record(*encode_record(record))
            self.log.append(decoded)
            if decoded.value is None:
                continue
            pid, epoch = decoded.value.producer_id, decoded.value.producer_epoch
            assert epoch >= self.last_epoch.get(pid, -1), "epoch went back"
            self.last_epoch[pid] = epoch
            state = decoded.value.state
            if state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
                key = (pid, epoch, decoded.transactional_id)
                decided = self.decisions.pop(decoded.transactional_id)
                assert decided == (pid, epoch, state is TransactionState.COMPLETE_COMMIT)
                if key in self.promised_commits:
                    assert state is TransactionState.COMPLETE_COMMIT, "a promised commit aborted"
                    self.promised_commits.discard(key)
        for marker in effects.markers:
            decision = (marker.producer_id, marker.producer_epoch, marker.committed)
            previous = self.decisions.setdefault(marker.transactional_id, decision)
            assert previous == decision, "a transaction's decision flipped"
            self.markers.append(marker)

    def step(self) -> None:
        self.now += self.rng.randint(0, 700)
        action = self.rng.random()
        if action < 0.08:
            self.new_instance()
        elif action < 0.4:
            self.add()
        elif action < 0.6:
            self.end()
        elif action < 0.8:
            self.deliver_marker()
        elif action < 0.9:
            self.apply(self.coordinator.tick(self.now))
        elif action < 0.95:
            self.crash()
        else:
            self.retry_init()
        self.check()

    def new_instance(self) -> None:
        txn_id = self.rng.choice(IDS)
        self.next_pid += 1
        result, effects = self.coordinator.init_producer_id(
            txn_id, self.rng.choice([2_000, 8_000]), self.next_pid, self.now
        )
        self.apply(effects)
        if result.error == ErrorCode.none:
            instance = Instance(txn_id, result.producer_id, result.producer_epoch)
            self.instances.append(instance)
            self.newest[txn_id] = instance
        else:
            assert result.error == ErrorCode.concurrent_transactions

    def retry_init(self) -> None:
        """KIP-360: an instance asks for a bump naming its current pair."""
        if not self.instances:
            return
        instance = self.rng.choice(self.instances)
        self.next_pid += 1
        result, effects = self.coordinator.init_producer_id(
            instance.txn_id,
            2_000,
            self.next_pid,
            self.now,
            expected_producer_id=instance.producer_id,
            expected_producer_epoch=instance.producer_epoch,
        )
        self.apply(effects)
        if result.error == ErrorCode.none:
            assert self.newest[instance.txn_id] is instance, "a fenced instance got an epoch"
            instance.producer_id, instance.producer_epoch = (
                result.producer_id,
                result.producer_epoch,
            )

    def pick(self) -> Instance:
        """Mostly the newest instance of an id (which may succeed), sometimes a zombie."""
        if self.rng.random() < 0.75:
            return self.newest[self.rng.choice(sorted(self.newest))]
        return self.rng.choice(self.instances)

    def add(self) -> None:
        if not self.instances:
            return
        instance = self.pick()
        partitions = self.rng.sample(PARTITIONS, self.rng.randint(1, 2))
        error, effects = self.coordinator.add_partitions(
            instance.txn_id, instance.producer_id, instance.producer_epoch, partitions, self.now
        )
        self.apply(effects)
        if error == ErrorCode.none:
            assert self.newest[instance.txn_id] is instance, "a fenced instance added partitions"

    def end(self) -> None:
        if not self.instances:
            return
        instance = self.pick()
        commit = self.rng.random() < 0.6
        error, effects = self.coordinator.end_transaction(
            instance.txn_id, instance.producer_id, instance.producer_epoch, commit, self.now
        )
        self.apply(effects)
        if error == ErrorCode.none:
            assert self.newest[instance.txn_id] is instance, "a fenced instance ended a txn"
            if commit and effects.markers:
                self.promised_commits.add(
                    (instance.producer_id, instance.producer_epoch, instance.txn_id)
                )

    def deliver_marker(self) -> None:
        if not self.markers:
            return
        marker = self.markers.pop(self.rng.randrange(len(self.markers)))
        if marker.coordinator_epoch != self.epoch:
            return  # a deposed coordinator's marker: partition leaders refuse it
        self.apply(
            self.coordinator.complete_markers(
                marker.transactional_id, marker.producer_id, marker.producer_epoch, self.now
            )
        )

    def crash(self) -> None:
        self.epoch += 1
        self.coordinator = TransactionCoordinator.load(CONFIG, self.epoch, self.log, self.now)
        self.markers = [m for m in self.markers if m.coordinator_epoch == self.epoch]
        self.apply(Effects(markers=self.coordinator.pending_markers()))

    def check(self) -> None:
        reloaded = TransactionCoordinator.load(CONFIG, self.epoch, self.log, self.now)
        ids = set(self.coordinator.transactional_ids()) | set(reloaded.transactional_ids())
        for txn_id in ids:
            assert reloaded.describe(txn_id) == self.coordinator.describe(txn_id), txn_id
        for pid, epoch, txn_id in self.promised_commits:
            assert self.decisions[txn_id] == (pid, epoch, True)

    def drain(self) -> None:
        """No more clients: timeouts and markers finish every transaction."""
        for _ in range(10_000):
            if self.markers:
                self.deliver_marker()
            else:
                self.now += 1_000
                self.apply(self.coordinator.tick(self.now))
            self.check()
            states = {
                self.coordinator.describe(i).state for i in self.coordinator.transactional_ids()
            }
            if not self.markers and states <= {"Empty", "CompleteCommit", "CompleteAbort"}:
                return
        raise AssertionError(f"transactions never finished: {states}")


@pytest.mark.parametrize("seed", range(20))
def test_simulation(seed: int) -> None:
    simulation = Simulation(seed)
    for _ in range(400):
        simulation.step()
    simulation.drain()
    assert not simulation.promised_commits, "a promised commit never completed"
    states = [r.value.state for r in simulation.log if r.value is not None]
    assert TransactionState.COMPLETE_COMMIT in states and TransactionState.COMPLETE_ABORT in states
