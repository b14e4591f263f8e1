"""Metadata's encoded topic answers (`EncodedTopics`): the bytes of a fresh encoding, kept
only while the topic's state and the live brokers are the ones they were written from."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net import metadata_encoding
from trafka.node.handlers.metadata import EncodedTopics, topic_metadata
from trafka.node.topics import PartitionState, TopicState


def _topic(name: str, partitions: int, leader: int = 1, epoch: int = 0) -> TopicState:
    states = {p: PartitionState(p, (1, 2, 3), leader, epoch, (1, 2, 3)) for p in range(partitions)}
    return TopicState(name, uuid.uuid4(), states)


def _fresh(version: int, live: frozenset[int], topic: TopicState) -> bytes:
    out = bytearray()
    metadata_encoding.encode_topic(version, topic_metadata(live, topic), out)
    return bytes(out)


def _partition_errors(version: int, encoded: bytes, partitions: int) -> list[int]:
    """The partitions' error codes of a v1 topic entry."""
    assert version == 1
    name_length = int.from_bytes(encoded[2:4], "big")
    at = 2 + 2 + name_length + 1 + 4  # error, name, is_internal, partition count
    errors = []
    for _ in range(partitions):
        errors.append(int.from_bytes(encoded[at : at + 2], "big", signed=True))
        at += 2 + 4 + 4  # error, index, leader
        for _array in ("replicas", "isr"):
            at += 4 + 4 * int.from_bytes(encoded[at : at + 4], "big")
    return errors


def test_an_answer_is_the_fresh_encoding_for_every_version() -> None:
    answers = EncodedTopics()
    live = frozenset({1, 2, 3})
    topic = _topic("orders", 12)
    for version in range(13):
        assert answers.encoded(version, live, topic, {"orders": topic}) == _fresh(
            version, live, topic
        )


def test_a_changed_topic_or_live_set_is_encoded_again() -> None:
    answers = EncodedTopics()
    live = frozenset({1, 2, 3})
    topic = _topic("orders", 3)
    first = answers.encoded(12, live, topic, {"orders": topic})
    assert answers.encoded(12, live, topic, {"orders": topic}) is first  # kept
    moved = dataclasses.replace(
        topic, partitions={**topic.partitions, 1: PartitionState(1, (1, 2, 3), 2, 5, (2, 3))}
    )
    changed = answers.encoded(12, live, moved, {"orders": moved})
    assert changed != first and changed == _fresh(12, live, moved)
    # broker 1 goes: partitions it leads are LEADER_NOT_AVAILABLE at once
    without_1 = frozenset({2, 3})
    errors = _partition_errors(1, answers.encoded(1, without_1, moved, {"orders": moved}), 3)
    assert errors == [ErrorCode.leader_not_available, 0, ErrorCode.leader_not_available]
    assert answers.encoded(1, live, moved, {"orders": moved}) == _fresh(1, live, moved)


def test_entries_of_replaced_and_deleted_topics_do_not_pile_up() -> None:
    answers = EncodedTopics()
    live = frozenset({1})
    current: dict[str, TopicState] = {}
    for round_ in range(200):  # every topic replaced 200 times, 50 topics deleted
        current = {f"t{n}": _topic(f"t{n}", 1, epoch=round_) for n in range(round_ % 50, 50)}
        for topic in current.values():
            assert answers.encoded(3, live, topic, current) == _fresh(3, live, topic)
    held = len(answers._entries)
    assert held <= 4 * 50 + 64 + 1, held


class _CountingTopics(dict[str, TopicState]):
    """Every topic's current state, counting the lookups made of it."""

    lookups = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


def test_many_versions_of_many_topics_do_not_make_each_entry_walk_the_others() -> None:
    """13 versions x 200 topics, all current: dropping stale entries is amortized (the
    entries are walked when they have doubled), not repeated at each new entry."""
    answers = EncodedTopics()
    live = frozenset({1, 2, 3})
    current = _CountingTopics({f"t{n}": _topic(f"t{n}", 1) for n in range(200)})
    for version in range(13):
        for topic in current.values():
            assert answers.encoded(version, live, topic, current) == _fresh(version, live, topic)
    assert current.lookups <= 4 * 13 * 200, current.lookups
