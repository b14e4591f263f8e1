"""Which `__consumer_offsets` partition (and so which coordinator) owns a group (GRP-05, §18).

Kafka: `partitionFor(groupId) = Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`.
The hash is Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` in wrapping 32-bit
arithmetic over the string's UTF-16 code units (characters outside the BMP count as two
surrogate units). `Utils.abs(n)` is `n & 0x7fffffff` (so `Integer.MIN_VALUE` maps to 0, unlike
`Math.abs`). Every client and broker must agree on this, or a group's offsets land on a
partition another coordinator reads.
"""

from __future__ import annotations

import sys
from array import array
from operator import mul
from typing import Final

_INT32_MASK: Final = 0xFFFFFFFF
_BLOCK: Final = 4096
_POWERS: Final = tuple(pow(31, k, 1 << 32) for k in range(_BLOCK - 1, -1, -1))
"""31^(BLOCK-1) .. 31^0, mod 2^32: one block's weights."""
_BLOCK_WEIGHT: Final = pow(31, _BLOCK, 1 << 32)


def java_string_hash_code(value: str) -> int:
    """Java's `String.hashCode()` as a signed 32-bit int.

    Block by block (h = h * 31^B + block's weighted sum, mod 2^32), each block's sum taken
    in C (`sum(map(mul, ...))`): a group or transactional id is as long as a request lets a
    client make it (tens of MB in one flexible string), and a character-by-character loop
    held the event loop ~0.2 s per million characters."""
    units = array("H")
    units.frombytes(value.encode("utf-16-be", "surrogatepass"))
    if sys.byteorder == "little":
        units.byteswap()
    count = len(units)
    head = count % _BLOCK
    result = int(sum(map(mul, units[:head], _POWERS[_BLOCK - head :]))) & _INT32_MASK
    for start in range(head, count, _BLOCK):
        block = int(sum(map(mul, units[start : start + _BLOCK], _POWERS)))
        result = (result * _BLOCK_WEIGHT + block) & _INT32_MASK
    return result - (1 << 32) if result & 0x80000000 else result


def kafka_utils_abs(value: int) -> int:
    """Kafka's `Utils.abs`: `value & 0x7fffffff` (not `Math.abs`; MIN_VALUE -> 0)."""
    return value & 0x7FFFFFFF


def partition_for(group_id: str, offsets_topic_num_partitions: int) -> int:
    """The `__consumer_offsets` partition storing `group_id` (transactional ids hash alike)."""
    if offsets_topic_num_partitions <= 0:
        raise ValueError("offsets_topic_num_partitions must be positive")
    return kafka_utils_abs(java_string_hash_code(group_id)) % offsets_topic_num_partitions
