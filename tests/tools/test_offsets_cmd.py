"""The sans-I/O parts of `ktool get-offsets` / `ktool delete-records` (offsets_cmd)."""

from __future__ import annotations

import pytest

from trafka.tools.offsets_cmd import (
    OffsetsCommandError,
    java_exception,
    offset_lines,
    parse_filters,
    parse_offset_json,
    parse_time,
    select,
)

CLUSTER = [("a", 0), ("a", 1), ("a", 2), ("ab", 0), ("b", 0), ("__consumer_offsets", 0)]
INTERNAL = frozenset({"__consumer_offsets"})


def _select(
    topic: str | None = None,
    partitions: str | None = None,
    topic_partitions: str | None = None,
    exclude: bool = False,
) -> list[tuple[str, int]]:
    return select(CLUSTER, parse_filters(topic, partitions, topic_partitions), INTERNAL, exclude)


def test_time_names_numbers_and_bad_values() -> None:
    assert [parse_time(t) for t in ("latest", "earliest", "max-timestamp", "-1", "-2")] == [
        -1,
        -2,
        -3,
        -1,
        -2,
    ]
    assert parse_time("1700000000000") == 1700000000000
    for bad in ("soon", "-6", ""):
        with pytest.raises(OffsetsCommandError, match="Malformed time argument"):
            parse_time(bad)


def test_topic_regex_is_matched_whole_and_partitions_filter() -> None:
    assert _select("a") == [("a", 0), ("a", 1), ("a", 2)]
    assert _select("a.*") == [("a", 0), ("a", 1), ("a", 2), ("ab", 0)]
    assert _select("a", "0,2") == [("a", 0), ("a", 2)]
    assert _select() == sorted(CLUSTER)
    assert ("__consumer_offsets", 0) not in _select(exclude=True)


def test_topic_partition_rules() -> None:
    assert _select(topic_partitions="a:1,b") == [("a", 1), ("b", 0)]
    assert _select(topic_partitions="a:1-") == [("a", 1), ("a", 2)]
    assert _select(topic_partitions="a:-2") == [("a", 0), ("a", 1)]  # upper bound exclusive
    assert _select(topic_partitions=":0", exclude=True) == [("a", 0), ("ab", 0), ("b", 0)]
    with pytest.raises(OffsetsCommandError, match="cannot be used with"):
        parse_filters("a", None, "a:1")
    with pytest.raises(OffsetsCommandError, match="Invalid topic-partition rule"):
        parse_filters(None, None, "a:x")


def test_lines_leave_out_partitions_without_an_offset() -> None:
    assert offset_lines({("b", 0): 3, ("a", 1): -1, ("a", 0): 7}) == ["a:0:7", "b:0:3"]


def test_java_exception_names() -> None:
    assert java_exception("OFFSET_OUT_OF_RANGE") == (
        "org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not "
        "within the range of offsets maintained by the server."
    )
    assert java_exception("GROUP_ID_NOT_FOUND") == (
        "org.apache.kafka.common.errors.GroupIdNotFoundException"
    )


def test_offset_json_file() -> None:
    text = '{"version": 1, "partitions": [{"topic": "a", "partition": 0, "offset": 5}]}'
    assert parse_offset_json(text) == [("a", 0, 5)]
    for bad, message in (
        ("nope", "not a valid JSON"),
        ('{"partitions": [{"topic": "a"}]}', "doesn't contain valid JSON"),
        ('{"version": 2, "partitions": []}', "Not supported version"),
        (
            '{"partitions": [{"topic": "a", "partition": 0, "offset": 1},'
            ' {"topic": "a", "partition": 0, "offset": 2}]}',
            "duplicate topic partitions: a-0",
        ),
    ):
        with pytest.raises(OffsetsCommandError, match=message):
            parse_offset_json(bad)
