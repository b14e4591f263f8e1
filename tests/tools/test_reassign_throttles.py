"""`ktool reassign --throttle`: the throttled-replica lists kafka-reassign-partitions.sh
computes (calculateProposedMoveMap, calculateLeaderThrottles, calculateFollowerThrottles)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trafka.tools.reassign_cmd import (
    CommandError,
    PartitionMove,
    follower_throttles,
    leader_throttles,
    proposed_move_map,
    reassign_app,
    reassigning_brokers,
)


def test_a_move_throttles_sources_as_leaders_and_new_replicas_as_followers() -> None:
    moves = proposed_move_map(
        {},
        {("t", 0): [2, 3], ("t", 1): [3, 1], ("u", 0): [4]},
        {("t", 0): [1, 2], ("t", 1): [2, 1], ("u", 0): [4], ("t", 2): [9]},
    )
    assert moves["t"][0] == PartitionMove(frozenset({1, 2}), frozenset({3}))
    assert moves["u"][0] == PartitionMove(frozenset({4}), frozenset())
    assert leader_throttles(moves) == {"t": "0:1,0:2,1:1,1:2", "u": "0:4"}
    assert follower_throttles(moves) == {"t": "0:3,1:3", "u": ""}
    assert reassigning_brokers(moves) == [1, 2, 3, 4]


def test_ongoing_reassignments_keep_their_sources_and_are_throttled_too() -> None:
    # t-0 is moving {1,2} -> {3,4}: replicas 1,2,3,4 with 3,4 adding.
    ongoing = {("t", 0): ([1, 2, 3, 4], [3, 4]), ("v", 5): ([7, 8], [8])}
    moves = proposed_move_map(ongoing, {("t", 0): [2, 5]}, {("t", 0): [1, 2, 3, 4]})
    assert moves["t"][0] == PartitionMove(frozenset({1, 2}), frozenset({5}))
    assert moves["v"][5] == PartitionMove(frozenset({7}), frozenset({8}))
    assert leader_throttles(moves) == {"t": "0:1,0:2", "v": "5:7"}
    assert follower_throttles(moves) == {"t": "0:5", "v": "5:8"}


def test_entries_sort_as_strings_like_a_java_treeset() -> None:
    moves = proposed_move_map({}, {("t", 10): [1], ("t", 2): [1]}, {("t", 10): [3], ("t", 2): [3]})
    assert leader_throttles(moves) == {"t": "10:3,2:3"}


def test_a_partition_without_replicas_is_an_error() -> None:
    with pytest.raises(CommandError, match="with 0 replicas"):
        proposed_move_map({}, {("t", 0): [1]}, {})


def test_help_names_the_throttle_options() -> None:
    runner = CliRunner()
    execute_help = runner.invoke(reassign_app, ["execute", "--help"], env={"COLUMNS": "300"})
    assert execute_help.exit_code == 0
    text = " ".join(execute_help.output.replace("│", " ").split())
    assert "--throttle" in text
    assert "(--replica-alter-log-dirs-throttle is not supported" in text
    verify_help = runner.invoke(reassign_app, ["verify", "--help"], env={"COLUMNS": "300"})
    assert "--preserve-throttles" in verify_help.output


async def test_clearing_skips_an_unreachable_broker_but_setting_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from types import SimpleNamespace

    from tests.support.ports import free_port
    from trafka.tools.reassign_cmd import BROKER_LEVEL_THROTTLES, OP_DELETE, _alter_broker_configs

    metadata = SimpleNamespace(
        brokers=[SimpleNamespace(node_id=5, host="127.0.0.1", port=free_port())]
    )
    deletes: list[tuple[str, int, str | None]] = [
        (k, OP_DELETE, None) for k in BROKER_LEVEL_THROTTLES
    ]
    await _alter_broker_configs(metadata, [5, 6], deletes, tolerate_unreachable=True)
    assert "Warning: cannot reach broker 5" in capsys.readouterr().err
    with pytest.raises(CommandError, match="cannot connect"):
        await _alter_broker_configs(metadata, [5], deletes)
