"""Shared test data: numbered keyed messages with headers and timestamps, and checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BASE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Sent:
    index: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_messages(count: int, tag: str = "") -> list[Sent]:
    return [
        Sent(
            i,
            f"key-{i % 97}".encode(),
            f"{tag}value-{i}-".encode() + b"x" * (i % 50),
            (("n", str(i).encode()), ("tag", tag.encode())),
            BASE_TIMESTAMP_MS + i,
        )
        for i in range(count)
    ]


def check_order_per_partition(received: Iterable[tuple[int, int, bytes]]) -> None:
    """(partition, offset, value) in arrival order: offsets strictly increase per partition
    and the message numbers (value-<n>-) too, i.e. the producer's order is kept."""
    last_offset: dict[int, int] = {}
    last_number: dict[int, int] = {}
    for partition, offset, value in received:
        number = int(value.split(b"-")[1])
        assert offset > last_offset.get(partition, -1), (partition, offset)
        assert number > last_number.get(partition, -1), (partition, number)
        last_offset[partition] = offset
        last_number[partition] = number
