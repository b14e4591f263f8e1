"""kafka-consumer-groups.sh's offsets table as ktool prints it (widths and row order)."""

from __future__ import annotations

from types import SimpleNamespace

from trafka.group.consumer_protocol import encode_assignment
from trafka.tools.groups_cmd import PartitionOffsets, _offset_rows, offsets_table


def test_offsets_table_uses_kafkas_printf_widths() -> None:
    rows = [PartitionOffsets("t", 0, 3, 10, "", "", "", leader_epoch=0)]
    header, line = offsets_table(rows, "g", verbose=True)
    assert header == (
        "GROUP           TOPIC           PARTITION  LEADER-EPOCH    CURRENT-OFFSET  "
        "LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID"
    )
    assert line == (
        "g               t               0          0               3               "
        "10              7               -               -               -"
    )
    plain = offsets_table(
        [PartitionOffsets("a-rather-long-topic-name", 1, None, None, "c", "h", "")],
        "g",
        verbose=False,
    )
    assert plain[1].split() == ["g", "a-rather-long-topic-name", "1", "-", "-", "-", "c", "h", "-"]
    assert plain[0].index("PARTITION") == plain[1].index(" 1 ") + 1


def _member(member_id: str, assignment: dict[str, list[int]]) -> SimpleNamespace:
    return SimpleNamespace(
        member_id=member_id,
        client_host="/127.0.0.1",
        client_id=f"client-{member_id}",
        member_assignment=encode_assignment(assignment),
    )


def test_rows_members_with_most_partitions_first_then_unowned() -> None:
    described = SimpleNamespace(
        members=[_member("small", {"t": [2]}), _member("big", {"u": [1], "t": [1, 0]})]
    )
    committed = {("t", 0): (5, 1), ("z", 0): (1, None), ("a", 3): (2, None)}
    rows = _offset_rows("g", described, committed, {("t", 0): 9})
    assert [(r.consumer_id, r.topic, r.partition) for r in rows] == [
        ("big", "t", 0),
        ("big", "t", 1),
        ("big", "u", 1),
        ("small", "t", 2),
        ("", "a", 3),
        ("", "z", 0),
    ]
    assert (rows[0].current_offset, rows[0].leader_epoch, rows[0].lag) == (5, 1, 4)
