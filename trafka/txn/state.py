"""Transaction states and their legal edges (apache/kafka `TransactionState.java`, KIP-98).

Each state's byte id is the `TransactionStatus` field of Kafka's `TransactionLogValue`.
"""

from __future__ import annotations

import enum


class TransactionState(enum.Enum):
    """The state of one transactional id, as the coordinator keeps it.

    EMPTY (0): the id has a producer id and epoch and no open transaction. InitProducerId
        bumps the epoch; AddPartitionsToTxn/AddOffsetsToTxn move to ONGOING; EndTxn answers
        INVALID_TXN_STATE; `transactional.id.expiration.ms` of inactivity moves to DEAD.
    ONGOING (1): partitions have been added; more may be. EndTxn moves to PREPARE_COMMIT or
        PREPARE_ABORT; the transaction timeout, or an InitProducerId from a new instance,
        fences the epoch (PREPARE_EPOCH_FENCE) and aborts.
    PREPARE_COMMIT (2) / PREPARE_ABORT (3): the decision is durable in `__transaction_state`;
        COMMIT/ABORT markers are being written to every partition of the transaction.
        Requests for the id answer CONCURRENT_TRANSACTIONS (a retry of the same EndTxn too),
        so the client retries. When every partition leader wrote its marker, the state moves
        to COMPLETE_COMMIT / COMPLETE_ABORT.
    COMPLETE_COMMIT (4) / COMPLETE_ABORT (5): the transaction is finished; behaves as EMPTY
        (a retried EndTxn with the same result answers NONE).
    DEAD (6): the id expired (`transactional.id.expiration.ms`); a tombstone is written and the
        metadata dropped. Never a resting state.
    PREPARE_EPOCH_FENCE (7): transient: the epoch of an ONGOING transaction was bumped to fence
        its producer (timeout or a new instance's InitProducerId) and the transaction is being
        aborted with the new epoch. Kafka never writes it to the log either; the record that
        follows is PREPARE_ABORT.
    """

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions/ListTransactions report (Kafka's `stateName`)."""
        return _NAMES[self]

    @property
    def is_complete(self) -> bool:
        """A state in which no transaction is open (a new one may begin)."""
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @property
    def is_preparing(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


_NAMES: dict[TransactionState, str] = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_COMPLETE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: _COMPLETE,
    TransactionState.ONGOING: _COMPLETE | {TransactionState.ONGOING},
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    TransactionState.PREPARE_ABORT: frozenset(
        {TransactionState.ONGOING, TransactionState.PREPARE_EPOCH_FENCE}
    ),
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: _COMPLETE,
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.ONGOING}),
}


def check_transition(current: TransactionState, target: TransactionState) -> None:
    """Raise AssertionError unless `current -> target` is a legal edge."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise AssertionError(
            f"illegal transaction state transition {current.kafka_name} -> {target.kafka_name}"
        )


def parse_state_filter(name: str) -> TransactionState | None:
    """ListTransactions' `state_filters` entries are Kafka's state names."""
    for state in TransactionState:
        if state.kafka_name == name:
            return state
    return None
