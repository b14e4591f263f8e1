"""One SparkSession for the whole test session (startup costs ~6 s; PLATFORM.md §6)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from trafka.spark.session import build_session

    session = build_session("local[2]", "trafka-audit-tests")
    try:
        yield session
    finally:
        session.stop()
