"""Kafka's checkpoint files and meta.properties: exact text, atomic replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.log.checkpoint import (
    CheckpointError,
    read_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)


def test_offset_checkpoint_text_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(path, {("orders", 1): 17, ("orders", 0): 1234, ("a-b", 3): 0})
    assert path.read_text() == "0\n3\na-b 3 0\norders 0 1234\norders 1 17\n"
    assert read_offset_checkpoint(path) == {("orders", 1): 17, ("orders", 0): 1234, ("a-b", 3): 0}
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()
    assert read_offset_checkpoint(tmp_path / "missing") == {}


@pytest.mark.parametrize("text", ["", "\n", "1\n0\n", "x\n1\norders 0 1\n"])
def test_a_file_without_a_known_version_raises(tmp_path: Path, text: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


@pytest.mark.parametrize(
    "bad_line",
    [
        "orders x 1",  # partition not a number
        "orders 0",  # a field missing
        "orders 0 1 2",  # a field too many
        "orders -1 5",  # negative partition
        "orders 1 -5",  # negative offset
        "bad/name 0 5",  # an illegal topic name
        "orders\r 0 5",  # a control character in the name
        "a" * 250 + " 0 5",  # a name longer than 249
        ". 0 5",
        "",  # an empty line
        "\x00\x00\x00",
    ],
)
def test_a_bad_line_costs_that_line_not_the_file(
    tmp_path: Path, bad_line: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(f"0\n3\norders 0 10\n{bad_line}\norders 2 30\n")
    assert read_offset_checkpoint(path) == {("orders", 0): 10, ("orders", 2): 30}
    assert "skipped" in caplog.text


def test_a_topic_name_with_a_newline_splits_into_bad_lines_only(tmp_path: Path) -> None:
    """What an accepted `orders\\n` used to write: `orders\\n 0 5` is two bad lines."""
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n3\nkeep 0 1\norders\n 0 5\nkeep 1 2\n")
    assert read_offset_checkpoint(path) == {("keep", 0): 1, ("keep", 1): 2}


def test_a_wrong_count_line_keeps_the_entries(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n7\norders 0 1\n")
    assert read_offset_checkpoint(path) == {("orders", 0): 1}
    path.write_text("0\nseven\norders 0 1\norders 1 2\n")
    assert read_offset_checkpoint(path) == {("orders", 0): 1, ("orders", 1): 2}


def test_bytes_that_are_not_utf8_cost_their_line(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(b"0\n2\norders 0 1\nord\xffers 0 2\n")
    assert read_offset_checkpoint(path) == {("orders", 0): 1}


def test_a_bad_epoch_line_costs_that_line(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n3\n0 0\n1 x\n2 120\n")
    assert read_epoch_checkpoint(path) == [(0, 0), (2, 120)]


def test_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (1, 120)])
    assert path.read_text() == "0\n2\n0 0\n1 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (1, 120)]


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    write_meta_properties(
        path, {"version": "1", "node.id": "3", "cluster.id": "AbC-dEf_123"}, now_ms=0
    )
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1] == "#Thu Jan 01 00:00:00 UTC 1970"
    assert lines[2:] == ["cluster.id=AbC-dEf_123", "node.id=3", "version=1"]
    assert read_meta_properties(path) == {
        "version": "1",
        "node.id": "3",
        "cluster.id": "AbC-dEf_123",
    }
