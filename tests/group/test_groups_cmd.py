"""The pure parts of `ktool groups`: tables, topic specs, reset arithmetic."""

from __future__ import annotations

import pytest

from trafka.tools.groups_cmd import (
    GroupsError,
    PartitionOffsets,
    compute_new_offset,
    format_table,
    parse_topic_partitions,
)


def test_format_table_aligns_columns() -> None:
    text = format_table(["GROUP", "LAG"], [["g", 7], ["longer-group", "-"]])
    assert text.splitlines() == ["GROUP        LAG", "g            7", "longer-group -"]


def test_parse_topic_partitions() -> None:
    assert parse_topic_partitions(["t", "u:0,2"]) == [("t", None), ("u", [0, 2])]
    with pytest.raises(GroupsError):
        parse_topic_partitions([":1"])
    with pytest.raises(GroupsError):
        parse_topic_partitions(["t:x"])


def _reset(**kwargs: object) -> int:
    base: dict[str, object] = {
        "earliest": 5,
        "latest": 20,
        "current": 10,
        "to_earliest": False,
        "to_latest": False,
        "to_offset": None,
        "shift_by": None,
        "at_datetime": None,
    }
    base.update(kwargs)
    return compute_new_offset(**base)  # type: ignore[arg-type]


def test_reset_rules_clamp_into_the_log() -> None:
    assert _reset(to_earliest=True) == 5
    assert _reset(to_latest=True) == 20
    assert _reset(to_offset=12) == 12
    assert _reset(to_offset=1) == 5
    assert _reset(to_offset=99) == 20
    assert _reset(shift_by=-3) == 7
    assert _reset(shift_by=-30) == 5
    assert _reset(shift_by=2, current=None) == 20  # no commit: from the log end
    assert _reset(at_datetime=15) == 15
    assert _reset(at_datetime=-1) == 20  # no record that late: the log end
    with pytest.raises(GroupsError):
        _reset()


def test_lag() -> None:
    row = PartitionOffsets("t", 0, 3, 10, "m", "/h", "c")
    assert row.lag == 7
    assert PartitionOffsets("t", 0, None, 10, "", "", "").lag is None
