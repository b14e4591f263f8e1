"""Which `__consumer_offsets` partition (and so which coordinator) owns a group (GRP-05, §18).

Kafka: `partitionFor(groupId) = Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`.
The hash is Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` in wrapping 32-bit
arithmetic over the string's UTF-16 code units (characters outside the BMP count as two
surrogate units). `Utils.abs(n)` is `n & 0x7fffffff` (so `Integer.MIN_VALUE` maps to 0, unlike
`Math.abs`). Every client and broker must agree on this, or a group's offsets land on a
partition another coordinator reads.
"""

from __future__ import annotations

_INT32_MASK = 0xFFFFFFFF


def java_string_hash_code(value: str) -> int:
    """Java's `String.hashCode()` as a signed 32-bit int."""
    utf16 = value.encode("utf-16-be", "surrogatepass")
    result = 0
    for index in range(0, len(utf16), 2):
        code_unit = (utf16[index] << 8) | utf16[index + 1]
        result = (result * 31 + code_unit) & _INT32_MASK
    return result - (1 << 32) if result & 0x80000000 else result


def kafka_utils_abs(value: int) -> int:
    """Kafka's `Utils.abs`: `value & 0x7fffffff` (not `Math.abs`; MIN_VALUE -> 0)."""
    return value & 0x7FFFFFFF


def partition_for(group_id: str, offsets_topic_num_partitions: int) -> int:
    """The `__consumer_offsets` partition storing `group_id` (transactional ids hash alike)."""
    if offsets_topic_num_partitions <= 0:
        raise ValueError("offsets_topic_num_partitions must be positive")
    return kafka_utils_abs(java_string_hash_code(group_id)) % offsets_topic_num_partitions
