"""Group states and their legal edges are data (STYLE 4, GRP-12/13)."""

from __future__ import annotations

import itertools

import pytest

from trafka.group.state import (
    VALID_PREVIOUS_STATES,
    GroupState,
    check_transition,
    parse_state_filter,
)

LEGAL = {
    (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
    (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
    (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
    (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
} | {(state, GroupState.DEAD) for state in GroupState}


def test_every_edge_is_checked() -> None:
    for current, target in itertools.product(GroupState, GroupState):
        if (current, target) in LEGAL:
            check_transition(current, target)
        else:
            with pytest.raises(AssertionError):
                check_transition(current, target)


def test_every_state_has_an_entry_and_kafka_names() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(GroupState)
    assert [s.kafka_name for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_state_filter_is_case_insensitive() -> None:
    assert parse_state_filter("stable") is GroupState.STABLE
    assert parse_state_filter("COMPLETINGREBALANCE") is GroupState.COMPLETING_REBALANCE
    assert parse_state_filter("Awaiting") is None
