"""Quorum secret files: 0600, refused (one line) when empty, short or readable by others;
generated atomically when missing; `knode cluster up` writes its files 0600."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trafka.metadata_quorum.config import (
    MIN_SECRET_FILE_CHARS,
    QuorumConfigError,
    Voter,
    config_from_properties,
    create_secret_file,
    load_secret,
    read_secret_file,
)
from trafka.tools.knode import app as knode
from trafka.tools.knode import write_private_file

VOTERS = (Voter(1, "127.0.0.1", 1), Voter(2, "127.0.0.1", 2), Voter(3, "127.0.0.1", 3))
GOOD = "a-long-enough-cluster-secret"


def _secret_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "quorum.secret"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("text", "mode", "problem"),
    [
        ("", 0o600, "empty"),
        ("\n  \n", 0o600, "empty"),
        ("short", 0o600, f"5 characters, fewer than {MIN_SECRET_FILE_CHARS}"),
        (GOOD, 0o644, "readable or writable by group or others (mode 0644); chmod 600 it"),
        (GOOD, 0o640, "mode 0640"),
        (GOOD, 0o604, "mode 0604"),
        (GOOD, 0o620, "mode 0620"),
    ],
)
def test_bad_secret_files_are_refused_with_one_line(
    tmp_path: Path, text: str, mode: int, problem: str
) -> None:
    path = _secret_file(tmp_path, text, mode)
    with pytest.raises(QuorumConfigError) as caught:
        read_secret_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"quorum secret file {path}: ")
    assert problem in message
    with pytest.raises(QuorumConfigError):  # the same through the node's configuration
        config_from_properties(
            {
                "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2",
                "controller.quorum.secret.file": str(path),
            },
            node_id=1,
            data_dir=tmp_path / "data",
        )


def test_a_directory_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(QuorumConfigError, match="not a regular file"):
        read_secret_file(tmp_path)
    with pytest.raises(QuorumConfigError, match="No such file"):
        read_secret_file(tmp_path / "missing")


def test_a_good_file_is_read(tmp_path: Path) -> None:
    assert read_secret_file(_secret_file(tmp_path, GOOD + "\n", 0o400)) == GOOD


def test_the_one_voter_generated_secret_is_checked_too(tmp_path: Path) -> None:
    _secret_file(tmp_path, "", 0o600)  # an empty generated file: a key derived from ""
    with pytest.raises(QuorumConfigError, match="empty"):
        load_secret(tmp_path, VOTERS[:1], None, None, node_id=1)


def test_a_voter_creates_a_missing_secret_file(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "quorum.secret"
    first = load_secret(tmp_path, VOTERS, None, str(path), node_id=1)
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(first) >= 40
    assert load_secret(tmp_path, VOTERS, None, str(path), node_id=2) == first


def test_learners_and_tools_never_create_one(tmp_path: Path) -> None:
    path = tmp_path / "quorum.secret"
    with pytest.raises(QuorumConfigError, match="No such file"):
        load_secret(tmp_path, VOTERS, None, str(path), node_id=9)  # a learner
    with pytest.raises(QuorumConfigError, match="No such file"):
        load_secret(tmp_path, VOTERS, None, str(path))  # ktool quorum --secret-file
    assert not path.exists()


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    path = tmp_path / "quorum.secret"
    results: list[tuple[str, bool]] = []
    threads = [
        threading.Thread(target=lambda: results.append(create_secret_file(path))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({secret for secret, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["quorum.secret"]  # no tmp files left


def test_private_files_are_0600_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "node-1.properties"
    path.write_text("old")
    path.chmod(0o644)
    write_private_file(path, "controller.quorum.secret=x\n")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text() == "controller.quorum.secret=x\n"


def test_cluster_up_refuses_a_readable_secret_file(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    directory.mkdir()
    _secret_file(directory, GOOD, 0o644)
    result = CliRunner().invoke(knode, ["cluster", "up", "--nodes", "1", "--dir", str(directory)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"knode: error: quorum secret file {directory / 'quorum.secret'}: readable or "
        "writable by group or others (mode 0644); chmod 600 it\n"
    )
    assert not list(directory.glob("node-*"))  # nothing started, nothing written


def test_umask_does_not_matter(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        value, created = create_secret_file(tmp_path / "s")
        write_private_file(tmp_path / "p", "x")
    finally:
        os.umask(old)
    assert created and value
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "p").stat().st_mode & 0o777 == 0o600
