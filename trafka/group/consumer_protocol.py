"""Best-effort reading of the `consumer` protocol's opaque bytes (KIP-429 layouts).

The coordinator treats subscription and assignment bytes as opaque (GRP-04), but three
things need a peek: OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and offset expiry for topics a
Stable group no longer subscribes to (KIP-496), and `ktool groups describe` (which partitions a
member owns). Layouts (clients/.../ConsumerProtocolSubscription.json / ...Assignment.json,
never flexible):

    Subscription: version int16, topics [string], user_data nullable bytes,
                  owned_partitions [topic string, partitions [int32]] (v1+),
                  generation_id int32 (v2+), rack_id nullable string (v3+)
    Assignment:   version int16, assigned_partitions [topic string, partitions [int32]],
                  user_data nullable bytes

Only the leading fields we need are read; anything that does not parse yields None (a
client with a custom protocol type is not an error).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_MAX_ITEMS = 1_000_000


class _Cursor:
    __slots__ = ("data", "position")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise ValueError("null string")
        return self.take(length).decode("utf-8")

    def count(self) -> int:
        count = self.int32()
        if count < 0 or count > _MAX_ITEMS:
            raise ValueError("bad count")
        return count


def subscribed_topics(subscription: bytes) -> frozenset[str] | None:
    """Topics of a `consumer` protocol subscription, or None if the bytes do not parse."""
    try:
        cursor = _Cursor(subscription)
        if cursor.int16() < 0:
            return None
        return frozenset(cursor.string() for _ in range(cursor.count()))
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class Subscription:
    """A `consumer` protocol subscription as a KIP-848 consumer group reads a classic member's
    (online migration): its topics, the partitions it owns (v1+; eager clients send none)
    and its rack (v3+)."""

    topics: tuple[str, ...]
    owned: dict[str, tuple[int, ...]]
    rack_id: str | None


def parse_subscription(subscription: bytes) -> Subscription | None:
    """Every field of a `consumer` protocol subscription; None if the bytes do not parse."""
    try:
        cursor = _Cursor(subscription)
        version = cursor.int16()
        if version < 0:
            return None
        topics = tuple(cursor.string() for _ in range(cursor.count()))
        if cursor.position == len(cursor.data):
            return Subscription(topics, {}, None)
        user_data_size = cursor.int32()
        if user_data_size > 0:
            cursor.take(user_data_size)
        owned: dict[str, tuple[int, ...]] = {}
        rack_id = None
        if version >= 1 and cursor.position < len(cursor.data):
            for _ in range(cursor.count()):
                topic = cursor.string()
                owned[topic] = owned.get(topic, ()) + tuple(
                    cursor.int32() for _ in range(cursor.count())
                )
        if version >= 2 and cursor.position < len(cursor.data):
            cursor.int32()  # generation id
        if version >= 3 and cursor.position < len(cursor.data):
            length = cursor.int16()
            rack_id = cursor.take(length).decode("utf-8") if length >= 0 else None
        return Subscription(topics, owned, rack_id or None)
    except (ValueError, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> dict[str, tuple[int, ...]] | None:
    """Topic -> partitions of a `consumer` protocol assignment; None if it does not parse.

    Empty bytes (a member that has no assignment yet) give an empty mapping.
    """
    if not assignment:
        return {}
    try:
        cursor = _Cursor(assignment)
        if cursor.int16() < 0:
            return None
        result: dict[str, tuple[int, ...]] = {}
        for _ in range(cursor.count()):
            topic = cursor.string()
            partitions = tuple(cursor.int32() for _ in range(cursor.count()))
            result[topic] = result.get(topic, ()) + partitions
        return result
    except (ValueError, UnicodeDecodeError):
        return None


def encode_subscription(
    topics: list[str],
    user_data: bytes | None = None,
    owned: dict[str, list[int]] | None = None,
    rack_id: str | None = None,
) -> bytes:
    """A v0 subscription, or v3 when `owned` or `rack_id` is given (tests and tools)."""
    version = 3 if owned is not None or rack_id is not None else 0
    parts = [struct.pack(">hi", version, len(topics))]
    for topic in topics:
        data = topic.encode("utf-8")
        parts.append(struct.pack(">h", len(data)) + data)
    if user_data is None:
        parts.append(struct.pack(">i", -1))
    else:
        parts.append(struct.pack(">i", len(user_data)) + user_data)
    if version == 3:
        owned = owned or {}
        parts.append(struct.pack(">i", len(owned)))
        for topic, numbers in owned.items():
            data = topic.encode("utf-8")
            parts.append(struct.pack(">h", len(data)) + data + struct.pack(">i", len(numbers)))
            parts.extend(struct.pack(">i", number) for number in numbers)
        parts.append(struct.pack(">i", -1))  # generation id
        rack = (rack_id or "").encode("utf-8")
        parts.append(struct.pack(">h", len(rack)) + rack if rack_id is not None else b"\xff\xff")
    return b"".join(parts)


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A v0 assignment (tests and tools)."""
    parts = [struct.pack(">hi", 0, len(partitions))]
    for topic, numbers in partitions.items():
        data = topic.encode("utf-8")
        parts.append(struct.pack(">h", len(data)) + data)
        parts.append(struct.pack(">i", len(numbers)))
        parts.extend(struct.pack(">i", number) for number in numbers)
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)
