"""Long group / transactional ids are hashed off the event loop, with the same answer."""

from __future__ import annotations

import threading

import trio

from tests.group.test_hashing import _reference_hash
from trafka.group.hashing import kafka_utils_abs, partition_for
from trafka.node import coordinator_key


def test_a_long_key_is_hashed_on_a_worker_thread_with_the_same_answer() -> None:
    key = "g" * (coordinator_key.LONG_ID_CHARS + 1) + "\U0001f600"
    threads: list[str] = []
    real = coordinator_key.partition_for

    def spy(value: str, partitions: int) -> int:
        threads.append(threading.current_thread().name)
        return real(value, partitions)

    coordinator_key.partition_for = spy  # type: ignore[assignment]
    try:
        long_answer = trio.run(coordinator_key.partition_of_key, key, 50)
        short_answer = trio.run(coordinator_key.partition_of_key, "group-1", 50)
    finally:
        coordinator_key.partition_for = real  # type: ignore[assignment]
    assert long_answer == kafka_utils_abs(_reference_hash(key)) % 50
    assert short_answer == partition_for("group-1", 50)
    assert threads[0] != threading.main_thread().name
    assert threads[1] == threading.main_thread().name
