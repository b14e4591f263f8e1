"""The chaos workload's client settings (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chaos import workload
from tests.chaos.runner import ChaosConfig
from tests.chaos.workload import Clock, ProducerWorker


def _config_of(monkeypatch: pytest.MonkeyPatch, *, idempotent: bool) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_producer(config: dict[str, Any]) -> object:
        seen.update(config)
        return object()

    monkeypatch.setattr(workload, "Producer", fake_producer)
    worker = ProducerWorker(
        "p",
        idempotent=idempotent,
        bootstrap="127.0.0.1:1",
        topic="t",
        partitions=6,
        rate=1.0,
        clock=Clock(),
        message_timeout_ms=ChaosConfig(seed=1, base_dir=Path("unused")).message_timeout_ms,
    )
    worker._producer()
    return seen


def test_idempotent_producers_keep_one_request_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """With more than one request in flight, librdkafka 2.16 answers the expected
    OUT_OF_ORDER_SEQUENCE_NUMBER after a refused request with an epoch bump that re-sends
    written-but-unacknowledged messages of other partitions as new ones (librdkafka issue
    #4953): the chaos runs' only idempotent duplicates, a client fault. One in flight keeps
    the harness measuring the broker."""
    config = _config_of(monkeypatch, idempotent=True)
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"
    assert config["max.in.flight.requests.per.connection"] == 1


def test_plain_producer_keeps_five_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config_of(monkeypatch, idempotent=False)
    assert config["enable.idempotence"] is False
    assert config["max.in.flight.requests.per.connection"] == 5


def test_message_timeout_outlasts_the_longest_unavailability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message timeout also makes librdkafka bump an idempotent producer's epoch."""
    assert _config_of(monkeypatch, idempotent=True)["message.timeout.ms"] >= 120_000
