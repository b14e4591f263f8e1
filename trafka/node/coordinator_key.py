"""Which internal-topic partition a group or transactional id maps to, off the event loop
when the id is long.

`trafka.group.hashing.partition_for` is Java's `String.hashCode` in Python: linear in the
id's length (~0.1 us per character). Ids are client input and a flexible request carries
strings of tens of MB, so an id longer than `LONG_ID_CHARS` is hashed on a worker thread:
the hash still holds the GIL, but the loop thread gets it back every switch interval
instead of waiting seconds."""

from __future__ import annotations

from typing import Final

import trio

from trafka.group.hashing import partition_for

LONG_ID_CHARS: Final = 65_536
"""Hashed inline below this (at most a few ms)."""


async def partition_of_key(key: str, partitions: int) -> int:
    """`partition_for(key, partitions)`, on a worker thread for a long key."""
    if len(key) <= LONG_ID_CHARS:
        return partition_for(key, partitions)
    return await trio.to_thread.run_sync(partition_for, key, partitions)
