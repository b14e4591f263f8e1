"""`ktool consume`'s record lines (Kafka's DefaultMessageFormatter) and offset parsing."""

from __future__ import annotations

import pytest

from trafka.log.record_model import Record, RecordHeader
from trafka.tools.console_cmd import Formatter, _start_offset, key_partition, murmur2, parse_line
from trafka.tools.offsets_cmd import OffsetsCommandError


def test_value_only_by_default_and_null_for_missing() -> None:
    assert Formatter().line(Record(5, 100, b"k", b"v"), 0, 0) == "v"
    assert Formatter().line(Record(5, 100, b"k", None), 0, 0) == "null"


def test_every_field_in_kafkas_order() -> None:
    formatter = Formatter.from_properties(
        [
            "print.timestamp=true",
            "print.partition=true",
            "print.offset=true",
            "print.headers=true",
            "print.key=true",
            "key.separator=|",
            "null.literal=NULL",
        ]
    )
    record = Record(7, 123, None, b"v", (RecordHeader("h", b"1"), RecordHeader("g", None)))
    assert (
        formatter.line(record, 2, 1) == "LogAppendTime:123|Partition:2|Offset:7|h:1,g:NULL|NULL|v"
    )
    assert (
        formatter.line(Record(7, -1, b"k", b"v"), 2, 0)
        == "NO_TIMESTAMP|Partition:2|Offset:7|NO_HEADERS|k|v"
    )


def test_start_offsets() -> None:
    assert (_start_offset(None, False), _start_offset(None, True)) == (-1, -2)
    assert (_start_offset("earliest", False), _start_offset("latest", False)) == (-2, -1)
    assert _start_offset("42", False) == 42
    for bad in ("-3", "soon"):
        with pytest.raises(OffsetsCommandError, match="is incorrect"):
            _start_offset(bad, False)
    with pytest.raises(OffsetsCommandError):
        Formatter.from_properties(["print.key"])


def test_murmur2_matches_kafkas_utils() -> None:
    # Kafka's UtilsTest.testMurmur2 values
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"abc") == 479470107
    assert key_partition(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3


def test_parse_line() -> None:
    assert parse_line("k:v:w", 1, True, ":") == (b"k", b"v:w")
    assert parse_line("k:v", 1, False, ":") == (None, b"k:v")
    with pytest.raises(OffsetsCommandError, match="No key separator found on line number 4: 'kv'"):
        parse_line("kv", 4, True, ":")
