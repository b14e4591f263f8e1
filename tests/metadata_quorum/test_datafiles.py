"""Damaged quorum files (journal, meta, snapshot): one line naming the file and the recovery.

A real data dir is written by a one-voter quorum (entries, a snapshot, more entries), then
copied and damaged in each way; `check_data_dir` and the transport itself must refuse it
with `QuorumDataError` (an OSError, one line), never a traceback or a silent reset.
"""

from __future__ import annotations

import gzip
import pickle
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from tests.support.ports import free_ports
from trafka.metadata_quorum.bridge import open_metadata_quorum
from trafka.metadata_quorum.config import QuorumConfig, Voter
from trafka.metadata_quorum.datafiles import (
    JOURNAL_HEADER_SIZE,
    RECOVERY,
    QuorumDataError,
    check_data_dir,
    check_dump,
    check_journal,
    check_meta,
)
from trafka.metadata_quorum.transport import (
    DUMP_FILE,
    JOURNAL_FILE,
    RaftTransport,
    load_data_dir,
)
from trafka.tools.ktool import app as ktool

META_FILE = JOURNAL_FILE + ".meta"


def _config(data_dir: Path, port: int) -> QuorumConfig:
    return QuorumConfig(
        1,
        (Voter(1, "127.0.0.1", port),),
        data_dir,
        "datafiles-test-secret",
        election_timeout_ms=100,
        fsync_interval_ms=100,
        session_timeout_ms=1500,
        heartbeat_interval_ms=300,
    )


def _compacted(data_dir: Path) -> bool:
    try:
        return check_journal(data_dir / JOURNAL_FILE).first_index > 1
    except QuorumDataError:  # caught mid-write: look again
        return False


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with a snapshot and journal entries after it."""
    data_dir = tmp_path_factory.mktemp("quorum") / "node-1"
    (port,) = free_ports(1)
    config = _config(data_dir, port)

    async def write() -> None:
        async with open_metadata_quorum(config) as quorum:
            with trio.fail_after(20):
                await quorum.wait_ready()
            for index in range(5):
                await quorum.create(f"/before-{index}", b"x")
            quorum.force_snapshot()
            with trio.fail_after(20):
                # the snapshot is written, then the journal's head is dropped: wait for both
                # (the "missing after compaction" case needs a compacted journal)
                while not (data_dir / DUMP_FILE).exists() or not _compacted(data_dir):
                    await trio.sleep(0.02)
            for index in range(5):
                await quorum.create(f"/after-{index}", b"y")
            await quorum.sync()

    trio.run(write)
    check_data_dir(data_dir / JOURNAL_FILE, data_dir / META_FILE, data_dir / DUMP_FILE)
    return data_dir


def _damaged_copy(healthy: Path, tmp_path: Path, name: str, damage: Callable[[Path], None]) -> Path:
    copy = tmp_path / "node-1"
    shutil.copytree(healthy, copy)
    damage(copy / name)
    return copy


def _journal_records(path: Path) -> list[tuple[int, int]]:
    """(offset, size) of each journal record."""
    raw = path.read_bytes()
    end = struct.unpack_from("<I", raw, JOURNAL_HEADER_SIZE - 4)[0]
    records, offset = [], JOURNAL_HEADER_SIZE
    while offset < end:
        (size,) = struct.unpack_from("<I", raw, offset)
        records.append((offset, size))
        offset += size + 8
    return records


def _truncate_mid_record(path: Path) -> None:
    offset, size = _journal_records(path)[-1]
    with open(path, "r+b") as handle:
        handle.truncate(offset + size // 2)


def _garble_a_command(path: Path) -> None:
    offset, size = _journal_records(path)[-2]
    raw = bytearray(path.read_bytes())
    command = offset + 4 + 16
    raw[command + 1 : command + 4 + size - 16 - 4] = b"\xff" * (size - 16 - 4 - 1)
    path.write_bytes(bytes(raw))


def _break_a_size_field(path: Path) -> None:
    offset, _size = _journal_records(path)[1]
    raw = bytearray(path.read_bytes())
    raw[offset : offset + 4] = struct.pack("<I", 0x7FFFFFF0)
    path.write_bytes(bytes(raw))


def _garble_the_header(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[0:9] = b"NOTSYNCOB"
    path.write_bytes(bytes(raw))


def _zero_fill(path: Path) -> None:
    path.write_bytes(b"\x00" * path.stat().st_size)


JOURNAL_DAMAGE = {
    "truncated mid-record": _truncate_mid_record,
    "garbled command": _garble_a_command,
    "size field": _break_a_size_field,
    "header": _garble_the_header,
    "zero-filled": _zero_fill,
    "empty": lambda path: path.write_bytes(b""),
}
META_DAMAGE = {
    "garbage": lambda path: path.write_bytes(b"\x93garbage\x00"),
    "empty": lambda path: path.write_bytes(b""),
    "wrong type": lambda path: path.write_bytes(pickle.dumps(["not", "a", "dict"])),
    "bad term": lambda path: path.write_bytes(pickle.dumps({"currentTerm": "seven"})),
}
DUMP_DAMAGE = {
    "missing after compaction": lambda path: path.unlink(),
    "not gzip": lambda path: path.write_bytes(b"plain junk"),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "wrong structure": lambda path: path.write_bytes(gzip.compress(pickle.dumps({"a": 1}))),
}
CASES = (
    [(JOURNAL_FILE, "journal", k, f) for k, f in JOURNAL_DAMAGE.items()]
    + [(META_FILE, "meta file", k, f) for k, f in META_DAMAGE.items()]
    + [(DUMP_FILE, "snapshot", k, f) for k, f in DUMP_DAMAGE.items()]
)


@pytest.mark.parametrize(
    ("name", "kind", "damage"),
    [(name, kind, damage) for name, kind, _label, damage in CASES],
    ids=[f"{kind}: {label}" for _name, kind, label, _damage in CASES],
)
def test_a_damaged_file_is_one_line_naming_it(
    healthy: Path, tmp_path: Path, name: str, kind: str, damage: Callable[[Path], None]
) -> None:
    data_dir = _damaged_copy(healthy, tmp_path, name, damage)
    with pytest.raises(QuorumDataError) as caught:
        check_data_dir(data_dir / JOURNAL_FILE, data_dir / META_FILE, data_dir / DUMP_FILE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"damaged quorum {kind} {data_dir / name}: ")
    assert message.endswith(RECOVERY)


def test_the_transport_refuses_a_damaged_journal_before_pysyncobj_reads_it(
    healthy: Path, tmp_path: Path
) -> None:
    data_dir = _damaged_copy(healthy, tmp_path, JOURNAL_FILE, _truncate_mid_record)
    (port,) = free_ports(1)
    with pytest.raises(QuorumDataError, match="damaged quorum journal"):
        RaftTransport(_config(data_dir, port), lambda entry, applied: None)
    assert isinstance(QuorumDataError("x"), OSError)  # knode: "cannot start the metadata quorum"


def test_ktool_offline_reads_refuse_a_damaged_dir_with_one_line(
    healthy: Path, tmp_path: Path
) -> None:
    data_dir = _damaged_copy(healthy, tmp_path, META_FILE, META_DAMAGE["garbage"])
    with pytest.raises(QuorumDataError, match="damaged quorum meta file"):
        load_data_dir(data_dir)
    result = CliRunner().invoke(ktool, ["quorum", "status", "--data-dir", str(data_dir)])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert f"damaged quorum meta file {data_dir / META_FILE}" in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_files_are_a_new_node(tmp_path: Path) -> None:
    assert check_meta(tmp_path / "m") == {}
    assert check_journal(tmp_path / "j").entries == 0
    assert check_dump(tmp_path / "d") is None


def test_the_healthy_dir_restarts_with_its_tree(healthy: Path, tmp_path: Path) -> None:
    copy = tmp_path / "node-1"
    shutil.copytree(healthy, copy)
    (port,) = free_ports(1)

    async def read() -> list[str]:
        async with open_metadata_quorum(_config(copy, port)) as quorum:
            with trio.fail_after(20):
                await quorum.wait_ready()
            await quorum.sync()
            return sorted(quorum.children_local("/"))

    children = trio.run(read)
    assert {f"before-{i}" for i in range(5)} | {f"after-{i}" for i in range(5)} <= set(children)
