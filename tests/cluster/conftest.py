"""Fixtures for single-node client tests: one real knode process per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import KnodeCluster


@pytest.fixture(scope="module")
def knode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("knode")
    with KnodeCluster(
        base, node_count=1, settings=["group.initial.rebalance.delay.ms=0"]
    ) as cluster:
        yield cluster
