"""`ktool consume`'s record lines (Kafka's DefaultMessageFormatter) and offset parsing."""

from __future__ import annotations

import re

import pytest

from trafka.log.batch import CompressionType
from trafka.log.record_model import NewRecord, Record, RecordHeader
from trafka.tools.console_cmd import (
    Formatter,
    LineReader,
    _start_offset,
    batches_of,
    compression_of,
    key_partition,
    murmur2,
    parse_line,
)
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


def test_line_reader_parses_headers_key_and_value_as_kafka() -> None:
    reader = LineReader.from_properties(
        {"parse.headers": "true", "parse.key": "true", "key.separator": ":", "null.marker": "NUL"}
    )
    record = reader.read("h1:v1,h2:NUL,h3:\tk:v:w", 1)
    assert record.key == b"k" and record.value == b"v:w"
    assert record.headers == (
        RecordHeader("h1", b"v1"),
        RecordHeader("h2", None),
        RecordHeader("h3", b""),
    )
    record = reader.read("NUL\tNUL:NUL", 2)
    assert (record.headers, record.key, record.value) == ((), None, None)
    with pytest.raises(OffsetsCommandError, match="No headers delimiter found on line number 3"):
        reader.read("k:v", 3)
    with pytest.raises(OffsetsCommandError, match="No header key separator found in pair 'h'"):
        reader.read("h\tk:v", 4)
    with pytest.raises(OffsetsCommandError, match="Header keys should not be equal"):
        reader.read("NUL:x\tk:v", 5)
    lenient = LineReader.from_properties({"parse.headers": "true", "ignore.error": "true"})
    assert lenient.read("just a value", 1).value == b"just a value"
    assert lenient.read("h,a:1,\tv", 1).headers == (
        RecordHeader("h", None),
        RecordHeader("a", b"1"),
    )


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"headers.delimiter": ","}, "headers.delimiter and headers.separator may not be equal"),
        ({"headers.separator": ":"}, "headers.separator and headers.key.separator may not be"),
        ({"null.marker": "\\t"}, "null.marker and key.separator may not be equal"),
        ({"headers.separator": "("}, "invalid headers.separator"),
    ],
)
def test_line_reader_refuses_ambiguous_settings(properties: dict[str, str], message: str) -> None:
    with pytest.raises(OffsetsCommandError, match=re.escape(message)):
        LineReader.from_properties(properties)


def test_compression_codecs_and_batches() -> None:
    assert compression_of("ZSTD") is CompressionType.ZSTD
    assert compression_of("none") is CompressionType.NONE
    with pytest.raises(OffsetsCommandError, match="Unknown compression codec 'brotli'"):
        compression_of("brotli")
    records = [(i % 2, NewRecord(value=bytes(10), key=str(i).encode())) for i in range(7)]
    batches = batches_of(records, 40)  # two 19-byte records fit in 40 bytes
    assert [(p, [r.key for r in rs]) for p, rs in batches] == [
        (0, [b"0", b"2"]),
        (1, [b"1", b"3"]),
        (0, [b"4", b"6"]),
        (1, [b"5"]),
    ]
    assert batches_of([(0, NewRecord(value=bytes(100)))], 10)[0][1][0].value == bytes(100)
