"""`partition_for` must agree with Kafka's `Utils.abs(groupId.hashCode) % partitions` (GRP-05)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trafka.group.hashing import java_string_hash_code, kafka_utils_abs, partition_for


def test_known_java_hash_codes() -> None:
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("a") == 97
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("Hello World") == -862545276
    assert java_string_hash_code("Aa") == java_string_hash_code("BB") == 2112
    # The famous string whose hashCode is Integer.MIN_VALUE (Math.abs would stay negative).
    assert java_string_hash_code("polygenelubricants") == -(2**31)


def test_hash_counts_utf16_code_units() -> None:
    assert java_string_hash_code("\u20ac") == 0x20AC  # one BMP unit
    # U+1F600 is the surrogate pair D83D DE00 in Java's UTF-16 string.
    assert java_string_hash_code("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash_code("gé") == ord("g") * 31 + 0xE9


def test_kafka_utils_abs_maps_min_value_to_zero() -> None:
    assert kafka_utils_abs(-(2**31)) == 0
    assert kafka_utils_abs(-1) == 2**31 - 1
    assert kafka_utils_abs(5) == 5
    assert partition_for("polygenelubricants", 50) == 0


def test_partition_for_group_1() -> None:
    # "group-1".hashCode() computed as Java does: 31-polynomial over the chars.
    expected_hash = 0
    for char in "group-1":
        expected_hash = (expected_hash * 31 + ord(char)) % 2**32
    assert java_string_hash_code("group-1") == expected_hash - 2**32 * (expected_hash >= 2**31)
    assert partition_for("group-1", 50) == (expected_hash & 0x7FFFFFFF) % 50
    assert partition_for("", 50) == 0
    assert partition_for("a", 50) == 97 % 50


@given(st.text(max_size=40), st.integers(min_value=1, max_value=200))
def test_partition_is_in_range_and_stable(group_id: str, partitions: int) -> None:
    partition = partition_for(group_id, partitions)
    assert 0 <= partition < partitions
    assert -(2**31) <= java_string_hash_code(group_id) < 2**31
    assert partition == partition_for(group_id, partitions)


def _reference_hash(value: str) -> int:
    """Java's definition, one UTF-16 code unit at a time."""
    utf16 = value.encode("utf-16-be", "surrogatepass")
    result = 0
    for index in range(0, len(utf16), 2):
        result = (result * 31 + ((utf16[index] << 8) | utf16[index + 1])) & 0xFFFFFFFF
    return result - (1 << 32) if result & 0x80000000 else result


@given(st.text(max_size=9000), st.integers(min_value=0, max_value=3))
def test_block_hash_agrees_with_the_definition(text: str, repeat: int) -> None:
    # Lengths around and across the 4096-unit blocks, astral characters included.
    value = text * (repeat + 1)
    assert java_string_hash_code(value) == _reference_hash(value)
