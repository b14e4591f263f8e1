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


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders x 1\n", "0\n1\norders 0\n"]
)
def test_bad_checkpoints_raise(tmp_path: Path, text: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


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
