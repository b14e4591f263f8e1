"""Every example configuration under compose/ is a valid knode configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.node.config.broker import BrokerConfig, load_properties_file

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
FILES = sorted(COMPOSE.rglob("*.properties"))


def test_there_are_examples() -> None:
    assert len(FILES) >= 4


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(COMPOSE)))
def test_example_parses(path: Path) -> None:
    config = BrokerConfig.build(None, load_properties_file(path))
    assert config.node_id >= 1
    # A node with the controller role is a voter; a broker-only node is a learner.
    assert (config.node_id in {v.node_id for v in config.quorum_voters}) == config.is_controller
    assert config.quorum_properties()["controller.quorum.voters"]
    if len(config.quorum_voters) > 1:
        assert config.get("controller.quorum.secret") or config.get("controller.quorum.secret.file")
