"""The transaction states and their legal edges (Kafka's `TransactionState`)."""

from __future__ import annotations

import pytest

from trafka.txn.state import (
    VALID_PREVIOUS_STATES,
    TransactionState,
    check_transition,
    parse_state_filter,
)

S = TransactionState


def test_byte_ids_are_kafkas_transaction_status() -> None:
    assert [s.value for s in S] == list(range(8))
    assert [s.kafka_name for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]


def test_every_state_has_its_previous_states() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(S)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.EMPTY, S.ONGOING),
        (S.ONGOING, S.ONGOING),
        (S.ONGOING, S.PREPARE_COMMIT),
        (S.ONGOING, S.PREPARE_ABORT),
        (S.ONGOING, S.PREPARE_EPOCH_FENCE),
        (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
        (S.PREPARE_ABORT, S.COMPLETE_ABORT),
        (S.COMPLETE_COMMIT, S.ONGOING),
        (S.COMPLETE_ABORT, S.EMPTY),
        (S.COMPLETE_COMMIT, S.DEAD),
    ],
)
def test_legal_edges(current: TransactionState, target: TransactionState) -> None:
    check_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.EMPTY, S.PREPARE_COMMIT),
        (S.PREPARE_COMMIT, S.COMPLETE_ABORT),
        (S.PREPARE_ABORT, S.COMPLETE_COMMIT),
        (S.ONGOING, S.DEAD),
        (S.PREPARE_COMMIT, S.ONGOING),
        (S.DEAD, S.EMPTY),
        (S.EMPTY, S.PREPARE_EPOCH_FENCE),
    ],
)
def test_illegal_edges(current: TransactionState, target: TransactionState) -> None:
    with pytest.raises(AssertionError):
        check_transition(current, target)


def test_parse_state_filter() -> None:
    assert parse_state_filter("Ongoing") is S.ONGOING
    assert parse_state_filter("nope") is None
