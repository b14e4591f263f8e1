"""The transaction coordinator of one `__transaction_state` partition, as pure logic.

Sans-I/O (STYLE 1, 5): every call takes `now_ms` and returns its answer and `Effects`:

* `Effects.records`: `__transaction_state` records to append (acks=all) BEFORE the answer is
  released. The shell serialises calls per partition and appends after each; if an append
  fails it answers the mapped error and reloads the partition from its log (as the group
  service does), so the in-memory state never runs ahead of the log for long.
* `Effects.markers`: COMMIT/ABORT markers to write (WriteTxnMarkers) to the leaders of the
  transaction's partitions once the records are durable. When every partition has its
  marker, the shell calls `complete_markers`, which moves the transaction to
  CompleteCommit/CompleteAbort (another record). After a load, `pending_markers()` lists
  the transactions that were in PrepareCommit/PrepareAbort (coordinator failover resumes
  them, EOS-04).
* Deadlines: `next_deadline_ms()` says when `tick(now_ms)` must run next: transactions open
  past their timeout are fenced and aborted (checked every
  `transaction.abort.timed.out.transaction.cleanup.interval.ms`), and ids unused for
  `transactional.id.expiration.ms` expire (every
  `transaction.remove.expired.transaction.cleanup.interval.ms`).

Kafka's rules (apache/kafka `TransactionCoordinator.scala`, `TransactionMetadata.scala`,
transaction version 0/1 clients), summarised:

* InitProducerId: a new id gets a fresh producer id at epoch 0. A known id in a complete
  state gets its epoch bumped (fencing the previous instance, whose requests now get
  PRODUCER_FENCED); at epoch 32766 a fresh producer id starts at epoch 0. An id with an open
  transaction first has it aborted with a bumped ("fence") epoch and answers
  CONCURRENT_TRANSACTIONS so the client retries once the abort is complete. KIP-360: a
  request naming its current producer id and epoch is a recovery after an abortable error;
  a retry of a bump whose answer was lost gets the same epoch again; a stale pair is
  PRODUCER_FENCED.
* AddPartitionsToTxn/AddOffsetsToTxn: the producer id must match
  (INVALID_PRODUCER_ID_MAPPING) and the epoch be current (PRODUCER_FENCED); in
  PrepareCommit/PrepareAbort the answer is CONCURRENT_TRANSACTIONS; otherwise the
  partitions join the transaction (Ongoing; its start time is set when it begins). The
  verification-only form (KIP-890 part 1, brokers asking before a transactional append)
  answers per partition NONE or INVALID_TXN_STATE and changes nothing.
* EndTxn: from Ongoing to PrepareCommit/PrepareAbort; a retried EndTxn of a complete
  transaction with the same result answers NONE, of a preparing one
  CONCURRENT_TRANSACTIONS; a different result, or an EndTxn with no transaction, is
  INVALID_TXN_STATE.

Deliberately left out: KIP-890 part 2 (transaction version 2: epoch bump on every EndTxn,
implicit AddPartitions), KIP-939 (two-phase commit), and Kafka's "pending state" (our shell
appends each call's records before the next call, so a transition is never in flight).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from trafka.txn.config import TransactionConfig
from trafka.txn.records import TopicPartitions, TransactionLogRecord, TransactionLogValue
from trafka.txn.state import TransactionState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767
"""Short.MAX_VALUE: an epoch at `MAX_PRODUCER_EPOCH - 1` or above is exhausted (a bump would
leave no room for the fence epoch), so the next InitProducerId rotates the producer id."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """Write a COMMIT (`committed`) or ABORT marker for `producer_id` to `partitions`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class Effects:
    records: tuple[TransactionLogRecord, ...] = ()
    markers: tuple[MarkerRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one id (KIP-664)."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    transaction_timeout_ms: int = 0
    start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(slots=True)
class _Transaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    last_update_ms: int
    start_ms: int = -1
    partitions: set[TopicPartition] = field(default_factory=set)
    last_producer_id: int = NO_PRODUCER_ID  # in memory only, as in Kafka (KIP-360 retries)
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def transition_to(self, target: TransactionState, now_ms: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.last_update_ms = now_ms

    def record(self) -> TransactionLogRecord:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        value = TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic.items()),
            last_update_timestamp_ms=self.last_update_ms,
            start_timestamp_ms=self.start_ms,
        )
        return TransactionLogRecord(self.transactional_id, value)

    def marker_request(self, coordinator_epoch: int) -> MarkerRequest:
        if not self.state.is_preparing:
            raise AssertionError(f"markers requested in state {self.state.kafka_name}")
        return MarkerRequest(
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
            coordinator_epoch,
            self.state is TransactionState.PREPARE_COMMIT,
            tuple(sorted(self.partitions)),
        )

    def description(self) -> TransactionDescription:
        return TransactionDescription(
            self.transactional_id,
            ErrorCode.none,
            self.state.kafka_name,
            self.timeout_ms,
            self.start_ms,
            self.producer_id,
            self.producer_epoch,
            tuple(sorted(self.partitions)),
        )


def _epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_PRODUCER_EPOCH - 1


class TransactionCoordinator:
    """The transactional ids of one `__transaction_state` partition. One owner (the shell).

    `coordinator_epoch` is the leader epoch of that partition on this node; it goes into
    every marker so partition leaders can refuse markers from a deposed coordinator.
    """

    def __init__(self, config: TransactionConfig, coordinator_epoch: int, now_ms: int = 0) -> None:
        self._config = config
        self.coordinator_epoch = coordinator_epoch
        self._transactions: dict[str, _Transaction] = {}
        self._next_abort_check_ms = now_ms + config.abort_timed_out_transaction_cleanup_interval_ms
        self._next_expiry_check_ms = now_ms + config.remove_expired_transaction_cleanup_interval_ms

    # --- loading (coordinator failover) ------------------------------------------------------

    @classmethod
    def load(
        cls,
        config: TransactionConfig,
        coordinator_epoch: int,
        records: Iterable[TransactionLogRecord],
        now_ms: int,
    ) -> TransactionCoordinator:
        """Rebuild from the partition's records in log order (the last one per id wins; a
        tombstone removes the id). Transactions found in PrepareCommit/PrepareAbort are
        listed by `pending_markers()`; Ongoing ones keep their start time, so their timeout
        still applies."""
        coordinator = cls(config, coordinator_epoch, now_ms)
        values: dict[str, TransactionLogValue] = {}
        for record in records:
            if record.value is None:
                values.pop(record.transactional_id, None)
            else:
                values[record.transactional_id] = record.value
        for transactional_id, value in values.items():
            if value.state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
                continue  # never written by Kafka or us; nothing to resume
            coordinator._transactions[transactional_id] = _Transaction(
                transactional_id,
                value.producer_id,
                value.producer_epoch,
                value.transaction_timeout_ms,
                value.state,
                value.last_update_timestamp_ms,
                value.start_timestamp_ms,
                {TopicPartition(tp.topic, p) for tp in value.partitions for p in tp.partitions},
            )
        return coordinator

    def pending_markers(self) -> tuple[MarkerRequest, ...]:
        """Markers of every transaction in PrepareCommit/PrepareAbort (to resend after a load)."""
        return tuple(
            txn.marker_request(self.coordinator_epoch)
            for txn in self._transactions.values()
            if txn.state.is_preparing
        )

    # --- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        fresh_producer_id: int,
        now_ms: int,
        *,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> tuple[InitProducerIdResult, Effects]:
        """`fresh_producer_id` is an unused producer id from the cluster-wide blocks, taken
        when the id is new or its epochs are exhausted (otherwise simply not used)."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.invalid_request), Effects()
        if not 0 < transaction_timeout_ms <= self._config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.invalid_transaction_timeout), Effects()
        txn = self._transactions.get(transactional_id)
        if txn is None:
            if len(self._transactions) >= self._config.max_transactional_ids:
                return InitProducerIdResult(ErrorCode.coordinator_not_available), Effects()
            txn = _Transaction(
                transactional_id,
                fresh_producer_id,
                0,
                transaction_timeout_ms,
                TransactionState.EMPTY,
                now_ms,
            )
            self._transactions[transactional_id] = txn
            return self._granted(txn), Effects(records=(txn.record(),))
        expected = expected_producer_id != NO_PRODUCER_ID
        if expected and not (
            expected_producer_id == txn.producer_id
            or (
                expected_producer_id == txn.last_producer_id
                and _epoch_exhausted(expected_producer_epoch)
            )
        ):
            return InitProducerIdResult(ErrorCode.producer_fenced), Effects()
        if txn.state.is_preparing:
            return InitProducerIdResult(ErrorCode.concurrent_transactions), Effects()
        if txn.state is TransactionState.ONGOING:
            # Abort the previous instance's transaction with a fence epoch first; the client
            # retries (CONCURRENT_TRANSACTIONS) and gets its own bump once the abort completes.
            effects = self._fence_and_abort(txn, now_ms)
            return InitProducerIdResult(ErrorCode.concurrent_transactions), effects
        if not txn.state.is_complete:
            raise AssertionError(f"{transactional_id} rests in {txn.state.kafka_name}")
        if expected and expected_producer_id == txn.last_producer_id:
            # A retry after a rotation whose answer was lost: the current pair again.
            return self._granted(txn), Effects()
        if expected and expected_producer_epoch != txn.producer_epoch:
            if expected_producer_epoch == txn.last_producer_epoch:
                return self._granted(txn), Effects()  # a retried bump: the same epoch again
            return InitProducerIdResult(ErrorCode.producer_fenced), Effects()
        if _epoch_exhausted(txn.producer_epoch):
            txn.last_producer_id, txn.last_producer_epoch = txn.producer_id, txn.producer_epoch
            txn.producer_id, txn.producer_epoch = fresh_producer_id, 0
        else:
            # Only a KIP-360 bump may be retried; a new instance's bump fences everything older.
            txn.last_producer_id = NO_PRODUCER_ID
            txn.last_producer_epoch = txn.producer_epoch if expected else NO_PRODUCER_EPOCH
            txn.producer_epoch += 1
        txn.timeout_ms = transaction_timeout_ms
        txn.partitions.clear()
        txn.start_ms = -1
        txn.transition_to(TransactionState.EMPTY, now_ms)
        return self._granted(txn), Effects(records=(txn.record(),))

    @staticmethod
    def _granted(txn: _Transaction) -> InitProducerIdResult:
        return InitProducerIdResult(ErrorCode.none, txn.producer_id, txn.producer_epoch)

    def _fence_and_abort(self, txn: _Transaction, now_ms: int) -> Effects:
        txn.transition_to(TransactionState.PREPARE_EPOCH_FENCE, now_ms)
        if txn.producer_epoch < MAX_PRODUCER_EPOCH:
            txn.producer_epoch += 1
        txn.last_producer_id = NO_PRODUCER_ID
        txn.last_producer_epoch = NO_PRODUCER_EPOCH
        txn.transition_to(TransactionState.PREPARE_ABORT, now_ms)
        return Effects(
            records=(txn.record(),), markers=(txn.marker_request(self.coordinator_epoch),)
        )

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> _Transaction | ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        txn = self._transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        return txn

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> tuple[ErrorCode, Effects]:
        """Add `partitions` to the open transaction (or begin one). One error for all of them
        (the handler answers it for every partition)."""
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn, Effects()
        if txn.state.is_preparing:
            return ErrorCode.concurrent_transactions, Effects()
        wanted = set(partitions)
        if txn.state is TransactionState.ONGOING and wanted <= txn.partitions:
            return ErrorCode.none, Effects()
        if len(txn.partitions | wanted) > self._config.max_partitions_per_transaction:
            return ErrorCode.invalid_request, Effects()
        if txn.state.is_complete:
            txn.partitions.clear()
            txn.start_ms = now_ms
        txn.partitions |= wanted
        txn.transition_to(TransactionState.ONGOING, now_ms)
        return ErrorCode.none, Effects(records=(txn.record(),))

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """KIP-890 part 1: are `partitions` in the producer's open transaction? Changes nothing.

        A top-level error (unknown id, wrong producer, fenced epoch, preparing) applies to
        every partition; otherwise each partition gets NONE or INVALID_TXN_STATE."""
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn, {}
        if txn.state.is_preparing:
            return ErrorCode.concurrent_transactions, {}
        ongoing = txn.state is TransactionState.ONGOING
        return ErrorCode.none, {
            tp: ErrorCode.none if ongoing and tp in txn.partitions else ErrorCode.invalid_txn_state
            for tp in partitions
        }

    # --- EndTxn ------------------------------------------------------------------------------

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> tuple[ErrorCode, Effects]:
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, ErrorCode):
            return txn, Effects()
        state = txn.state
        if state is TransactionState.ONGOING:
            target = (
                TransactionState.PREPARE_COMMIT if committed else TransactionState.PREPARE_ABORT
            )
            txn.transition_to(target, now_ms)
            marker = txn.marker_request(self.coordinator_epoch)
            return ErrorCode.none, Effects(records=(txn.record(),), markers=(marker,))
        same_result = committed == (
            state in (TransactionState.COMPLETE_COMMIT, TransactionState.PREPARE_COMMIT)
        )
        if state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            return (ErrorCode.none if same_result else ErrorCode.invalid_txn_state), Effects()
        if state.is_preparing:
            error = (
                ErrorCode.concurrent_transactions if same_result else ErrorCode.invalid_txn_state
            )
            return error, Effects()
        return ErrorCode.invalid_txn_state, Effects()

    def complete_markers(
        self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int
    ) -> Effects:
        """Every partition of the transaction has its marker: CompleteCommit/CompleteAbort.

        A completion for a transaction that moved on (another producer id or epoch, or not
        preparing: a duplicate) changes nothing."""
        txn = self._transactions.get(transactional_id)
        if (
            txn is None
            or not txn.state.is_preparing
            or txn.producer_id != producer_id
            or txn.producer_epoch != producer_epoch
        ):
            return Effects()
        target = (
            TransactionState.COMPLETE_COMMIT
            if txn.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        txn.transition_to(target, now_ms)
        txn.partitions.clear()
        return Effects(records=(txn.record(),))

    # --- timers ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int:
        return min(self._next_abort_check_ms, self._next_expiry_check_ms)

    def tick(self, now_ms: int) -> Effects:
        records: list[TransactionLogRecord] = []
        markers: list[MarkerRequest] = []
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = (
                now_ms + self._config.abort_timed_out_transaction_cleanup_interval_ms
            )
            for txn in self._transactions.values():
                if txn.state is TransactionState.ONGOING and txn.start_ms + txn.timeout_ms < now_ms:
                    effects = self._fence_and_abort(txn, now_ms)
                    records.extend(effects.records)
                    markers.extend(effects.markers)
        if now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = (
                now_ms + self._config.remove_expired_transaction_cleanup_interval_ms
            )
            expiry_ms = self._config.transactional_id_expiration_ms
            for txn in list(self._transactions.values()):
                if txn.state.is_complete and txn.last_update_ms + expiry_ms <= now_ms:
                    txn.transition_to(TransactionState.DEAD, now_ms)
                    del self._transactions[txn.transactional_id]
                    records.append(TransactionLogRecord(txn.transactional_id, None))
        return Effects(tuple(records), tuple(markers))

    # --- admin -------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        txn = self._transactions.get(transactional_id)
        if txn is None:
            return TransactionDescription(transactional_id, ErrorCode.transactional_id_not_found)
        return txn.description()

    def list_transactions(
        self,
        states: frozenset[TransactionState] | None = None,
        producer_ids: frozenset[int] | None = None,
    ) -> tuple[TransactionListing, ...]:
        """ListTransactions (KIP-664): empty filters match everything."""
        return tuple(
            TransactionListing(txn.transactional_id, txn.producer_id, txn.state.kafka_name)
            for txn in self._transactions.values()
            if (not states or txn.state in states)
            and (not producer_ids or txn.producer_id in producer_ids)
        )

    def transactional_ids(self) -> tuple[str, ...]:
        return tuple(self._transactions)
