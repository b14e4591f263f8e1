"""The pure transaction coordinator: Kafka's rules for each API, timeouts, expiry, loading."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.txn.config import TransactionConfig
from trafka.txn.coordinator import (
    Effects,
    InitProducerIdResult,
    TopicPartition,
    TransactionCoordinator,
)
from trafka.txn.records import TransactionLogRecord, decode_record, encode_record
from trafka.txn.state import TransactionState

CONFIG = TransactionConfig(
    transaction_max_timeout_ms=60_000,
    transactional_id_expiration_ms=100_000,
    abort_timed_out_transaction_cleanup_interval_ms=1_000,
    remove_expired_transaction_cleanup_interval_ms=10_000,
)
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class Harness:
    """A coordinator and the log it writes (every record round-trips Kafka's format)."""

    def __init__(self, epoch: int = 5) -> None:
        self.coordinator = TransactionCoordinator(CONFIG, epoch, now_ms=0)
        self.log: list[TransactionLogRecord] = []
        self.next_pid = 1000

    def apply(self, effects: Effects) -> Effects:
        for record in effects.records:
            self.log.append(decode_record(*encode_record(record)))
        return effects

    def init(
        self, txn_id: str = "tx", timeout_ms: int = 10_000, now: int = 0, **kw: int
    ) -> InitProducerIdResult:
        self.next_pid += 1
        result, effects = self.coordinator.init_producer_id(
            txn_id, timeout_ms, self.next_pid, now, **kw
        )
        self.apply(effects)
        return result

    def add(self, pid: int, epoch: int, *tps: TopicPartition, now: int = 0) -> ErrorCode:
        error, effects = self.coordinator.add_partitions("tx", pid, epoch, tps, now)
        self.apply(effects)
        return error

    def end(self, pid: int, epoch: int, commit: bool, now: int = 0) -> tuple[ErrorCode, Effects]:
        error, effects = self.coordinator.end_transaction("tx", pid, epoch, commit, now)
        return error, self.apply(effects)

    def state(self, txn_id: str = "tx") -> str:
        return self.coordinator.describe(txn_id).state

    def reloaded(self) -> TransactionCoordinator:
        return TransactionCoordinator.load(CONFIG, 6, self.log, now_ms=0)


def test_new_id_gets_a_fresh_producer_id_at_epoch_0() -> None:
    h = Harness()
    result = h.init()
    assert result == InitProducerIdResult(ErrorCode.none, 1001, 0)
    assert h.state() == "Empty"
    assert h.log[-1].value is not None and h.log[-1].value.state is TransactionState.EMPTY


def test_bad_timeouts_and_empty_ids() -> None:
    h = Harness()
    assert h.init(timeout_ms=60_001).error == ErrorCode.invalid_transaction_timeout
    assert h.init(timeout_ms=0).error == ErrorCode.invalid_transaction_timeout
    assert h.init(txn_id="").error == ErrorCode.invalid_request
    assert h.log == []


def test_second_instance_bumps_the_epoch_and_fences_the_first() -> None:
    h = Harness()
    first = h.init()
    second = h.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert h.add(first.producer_id, 0, T0) == ErrorCode.producer_fenced
    error, _ = h.end(first.producer_id, 0, True)
    assert error == ErrorCode.producer_fenced
    assert h.add(first.producer_id, 1, T0) == ErrorCode.none


def test_commit_flow_markers_and_completion() -> None:
    h = Harness(epoch=5)
    p = h.init()
    assert h.add(p.producer_id, 0, T0, now=10) == ErrorCode.none
    assert h.add(p.producer_id, 0, T0, now=11) == ErrorCode.none  # already in: no record
    assert len(h.log) == 2
    assert h.add(p.producer_id, 0, T1, now=12) == ErrorCode.none
    assert h.state() == "Ongoing"
    assert h.coordinator.describe("tx").start_timestamp_ms == 10
    error, effects = h.end(p.producer_id, 0, True, now=20)
    assert error == ErrorCode.none
    (marker,) = effects.markers
    assert marker.committed and marker.partitions == (T0, T1)
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (1001, 0, 5)
    assert h.state() == "PrepareCommit"
    # While preparing: retries wait, the other result is refused, new work waits.
    assert h.end(p.producer_id, 0, True)[0] == ErrorCode.concurrent_transactions
    assert h.end(p.producer_id, 0, False)[0] == ErrorCode.invalid_txn_state
    assert h.add(p.producer_id, 0, T0) == ErrorCode.concurrent_transactions
    assert h.init().error == ErrorCode.concurrent_transactions
    h.apply(h.coordinator.complete_markers("tx", p.producer_id, 0, 30))
    assert h.state() == "CompleteCommit"
    assert h.coordinator.describe("tx").partitions == ()
    assert h.end(p.producer_id, 0, True)[0] == ErrorCode.none  # a retried EndTxn
    assert h.end(p.producer_id, 0, False)[0] == ErrorCode.invalid_txn_state
    # The next transaction starts afresh.
    assert h.add(p.producer_id, 0, T1, now=40) == ErrorCode.none
    assert h.coordinator.describe("tx").partitions == (T1,)
    assert h.coordinator.describe("tx").start_timestamp_ms == 40


def test_end_txn_errors() -> None:
    h = Harness()
    p = h.init()
    assert h.end(p.producer_id, 0, True)[0] == ErrorCode.invalid_txn_state  # nothing open
    assert h.end(p.producer_id + 7, 0, True)[0] == ErrorCode.invalid_producer_id_mapping
    error, _ = h.coordinator.end_transaction("unknown", 1, 0, True, 0)
    assert error == ErrorCode.invalid_producer_id_mapping
    assert h.add(p.producer_id + 7, 0, T0) == ErrorCode.invalid_producer_id_mapping
    error, _ = h.coordinator.add_partitions("", 1, 0, [T0], 0)
    assert error == ErrorCode.invalid_request


def test_init_with_an_open_transaction_aborts_it_with_a_fence_epoch_first() -> None:
    h = Harness()
    old = h.init()
    h.add(old.producer_id, 0, T0)
    h.next_pid += 1
    result, effects = h.coordinator.init_producer_id("tx", 10_000, h.next_pid, 50)
    h.apply(effects)
    assert result.error == ErrorCode.concurrent_transactions
    (marker,) = effects.markers
    assert not marker.committed and marker.producer_epoch == 1 and marker.partitions == (T0,)
    assert h.state() == "PrepareAbort"
    assert h.log[-1].value is not None and h.log[-1].value.producer_epoch == 1
    assert h.end(old.producer_id, 0, True)[0] == ErrorCode.producer_fenced
    h.apply(h.coordinator.complete_markers("tx", old.producer_id, 1, 60))
    assert h.state() == "CompleteAbort"
    again = h.init(now=70)
    assert (again.error, again.producer_epoch) == (ErrorCode.none, 2)


def test_kip_360_recovery_and_retried_bump() -> None:
    h = Harness()
    p = h.init()
    bumped = h.init(expected_producer_id=p.producer_id, expected_producer_epoch=0)
    assert bumped.producer_epoch == 1
    retried = h.init(expected_producer_id=p.producer_id, expected_producer_epoch=0)
    assert retried == bumped  # the answer was lost; the same pair again, no second bump
    stale = h.init(expected_producer_id=p.producer_id + 99, expected_producer_epoch=0)
    assert stale.error == ErrorCode.producer_fenced
    h.init()  # another instance: epoch 2
    old = h.init(expected_producer_id=p.producer_id, expected_producer_epoch=0)
    assert old.error == ErrorCode.producer_fenced


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    p = h.init()
    txn = h.coordinator._transactions["tx"]
    txn.producer_epoch = 32766
    rotated = h.init()
    assert rotated.producer_id != p.producer_id and rotated.producer_epoch == 0
    retried = h.init(expected_producer_id=p.producer_id, expected_producer_epoch=32766)
    assert retried == rotated


def test_verify_only_form() -> None:
    h = Harness()
    p = h.init()
    error, per = h.coordinator.verify_partitions("tx", p.producer_id, 0, [T0])
    assert (error, per) == (ErrorCode.none, {T0: ErrorCode.invalid_txn_state})
    h.add(p.producer_id, 0, T0)
    log_size = len(h.log)
    error, per = h.coordinator.verify_partitions("tx", p.producer_id, 0, [T0, T1])
    assert per == {T0: ErrorCode.none, T1: ErrorCode.invalid_txn_state}
    assert h.coordinator.verify_partitions("tx", p.producer_id, 1, [T0])[0] == (
        ErrorCode.producer_fenced
    )
    assert len(h.log) == log_size


def test_timed_out_transaction_is_fenced_and_aborted() -> None:
    h = Harness()
    p = h.init(timeout_ms=5_000)
    h.add(p.producer_id, 0, T0, now=100)
    assert h.coordinator.next_deadline_ms() == 1_000
    assert h.apply(h.coordinator.tick(1_000)) == Effects()
    effects = h.apply(h.coordinator.tick(5_101))
    (marker,) = effects.markers
    assert not marker.committed and marker.producer_epoch == 1
    assert h.state() == "PrepareAbort"
    assert h.end(p.producer_id, 0, True)[0] == ErrorCode.producer_fenced
    assert h.coordinator.next_deadline_ms() == 6_101


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    h.init(now=0)
    h.init(txn_id="busy", now=0)
    p = h.coordinator.describe("busy")
    h.coordinator.add_partitions("busy", p.producer_id, p.producer_epoch, [T0], 0)
    h.coordinator.tick(1_000)  # abort check only (the timeout is 10 s)
    effects = h.apply(h.coordinator.tick(100_000))
    assert TransactionLogRecord("tx", None) in effects.records
    assert h.coordinator.describe("tx").error == ErrorCode.transactional_id_not_found
    # An open transaction never expires (it is aborted by its timeout instead).
    assert h.coordinator.describe("busy").error == ErrorCode.none
    assert h.reloaded().describe("tx").error == ErrorCode.transactional_id_not_found


def test_load_resumes_preparing_transactions() -> None:
    h = Harness()
    p = h.init()
    h.add(p.producer_id, 0, T0, T1)
    h.end(p.producer_id, 0, False)
    loaded = h.reloaded()
    assert loaded.describe("tx") == h.coordinator.describe("tx")
    (marker,) = loaded.pending_markers()
    assert not marker.committed and marker.partitions == (T0, T1)
    assert marker.coordinator_epoch == 6
    loaded.complete_markers("tx", p.producer_id, 0, 10)
    assert loaded.describe("tx").state == "CompleteAbort"
    assert loaded.pending_markers() == ()


def test_stale_completion_is_ignored() -> None:
    h = Harness()
    p = h.init()
    h.add(p.producer_id, 0, T0)
    h.end(p.producer_id, 0, True)
    assert h.coordinator.complete_markers("tx", p.producer_id, 3, 1) == Effects()
    assert h.coordinator.complete_markers("other", p.producer_id, 0, 1) == Effects()
    assert h.state() == "PrepareCommit"


def test_list_transactions_filters() -> None:
    h = Harness()
    a = h.init("a")
    h.init("b")
    h.coordinator.add_partitions("a", a.producer_id, 0, [T0], 0)
    listed = {(x.transactional_id, x.state) for x in h.coordinator.list_transactions()}
    assert listed == {("a", "Ongoing"), ("b", "Empty")}
    only = h.coordinator.list_transactions(states=frozenset({TransactionState.ONGOING}))
    assert [x.transactional_id for x in only] == ["a"]
    by_pid = h.coordinator.list_transactions(producer_ids=frozenset({a.producer_id}))
    assert [x.transactional_id for x in by_pid] == ["a"]


def test_bounds() -> None:
    config = TransactionConfig(max_transactional_ids=1, max_partitions_per_transaction=2)
    coordinator = TransactionCoordinator(config, 0)
    result, _ = coordinator.init_producer_id("a", 1000, 1, 0)
    assert result.error == ErrorCode.none
    assert coordinator.init_producer_id("b", 1000, 2, 0)[0].error == (
        ErrorCode.coordinator_not_available
    )
    tps = [TopicPartition("t", i) for i in range(3)]
    assert coordinator.add_partitions("a", 1, 0, tps, 0)[0] == ErrorCode.invalid_request
