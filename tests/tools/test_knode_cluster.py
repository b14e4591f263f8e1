"""`knode cluster up`'s configuration files: voters and broker-only nodes (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.node.config.broker import BrokerConfig
from trafka.tools.knode import cluster_properties, default_voter_count


def _config(tmp_path: Path, node_id: int, nodes: int, voters: int | None) -> BrokerConfig:
    text = cluster_properties(node_id, nodes, tmp_path, 9092, 19092, "s3cret", voters)
    properties = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    return BrokerConfig.build(None, properties)


@pytest.mark.parametrize(("nodes", "voters"), [(1, 1), (2, 2), (3, 3), (5, 3), (6, 3), (9, 3)])
def test_default_is_at_most_three_voters(nodes: int, voters: int) -> None:
    assert default_voter_count(nodes) == voters


def test_nodes_past_the_voters_are_broker_only_learners(tmp_path: Path) -> None:
    configs = [_config(tmp_path, node_id, 5, None) for node_id in range(1, 6)]
    for config in configs:
        assert config.quorum_properties()["controller.quorum.voters"] == (
            "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094"
        )
        assert config.get("controller.quorum.secret") == "s3cret"
        assert config.listeners[0].port == 9092 + config.node_id - 1
        assert config.log_dirs == [(tmp_path / f"node-{config.node_id}").resolve()]
    assert [c.process_roles for c in configs] == [["broker", "controller"]] * 3 + [["broker"]] * 2
    assert [c.is_quorum_voter for c in configs] == [True, True, True, False, False]


def test_voters_option_chooses_how_many(tmp_path: Path) -> None:
    all_voters = [_config(tmp_path, node_id, 4, 4) for node_id in range(1, 5)]
    assert all(c.is_controller and c.is_quorum_voter for c in all_voters)
    one_voter = [_config(tmp_path, node_id, 3, 1) for node_id in range(1, 4)]
    assert [c.is_controller for c in one_voter] == [True, False, False]
    assert one_voter[2].quorum_properties()["controller.quorum.voters"] == "1@127.0.0.1:19092"
