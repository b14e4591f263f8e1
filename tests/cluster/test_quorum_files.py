"""A real knode with a damaged quorum journal or a loose secret file: one documented line.

The journal of a stopped node is damaged; `knode start` must exit with status 2 and one
`knode: error:` line naming the file and pointing at the recovery in
docs/metadata-quorum.md (no traceback, no silent reset). Putting the saved copy back (the
first step of that recovery) starts the node again with its topics.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster
from trafka.metadata_quorum.datafiles import JOURNAL_HEADER_SIZE, RECOVERY

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _start_and_fail(cluster: KnodeCluster, node_id: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cluster.command(node_id),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=str(cluster.base_dir),
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("knode: error:")]


def _break_second_record(journal: Path) -> None:
    raw = bytearray(journal.read_bytes())
    (first_size,) = struct.unpack_from("<I", raw, JOURNAL_HEADER_SIZE)
    second = JOURNAL_HEADER_SIZE + first_size + 8
    raw[second : second + 4] = struct.pack("<I", 0x7FFFFFF0)  # a size running off the file
    journal.write_bytes(bytes(raw))


def test_a_damaged_quorum_journal_is_one_documented_line(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path, node_count=1) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("kept-topic", 1, 1)])["kept-topic"].result(timeout=30)
        assert cluster.stop(1) == 0
        quorum_dir = cluster.nodes[1].data_dir / "quorum"
        journal = quorum_dir / "quorum.journal"
        saved = tmp_path / "quorum-copy"
        shutil.copytree(quorum_dir, saved)
        _break_second_record(journal)

        result = _start_and_fail(cluster, 1)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        lines = _error_lines(result.stderr)
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(
            f"knode: error: cannot start the metadata quorum: damaged quorum journal {journal}: "
        )
        assert lines[0].endswith(RECOVERY)

        # the documented recovery, step one: put back the copy kept before touching anything
        shutil.rmtree(quorum_dir)
        shutil.copytree(saved, quorum_dir)
        cluster.start(1)
        topics = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
            timeout=30
        )
        assert "kept-topic" in topics.topics


def test_a_readable_secret_file_is_one_line(tmp_path: Path) -> None:
    secret = tmp_path / "quorum.secret"
    secret.write_text("a-long-enough-cluster-secret\n")
    secret.chmod(0o644)
    cluster = KnodeCluster(
        tmp_path,
        node_count=1,
        settings=[f"controller.quorum.secret.file={secret}"],
        start=False,
    )
    result = _start_and_fail(cluster, 1)
    assert result.returncode == 2, result.stderr
    assert _error_lines(result.stderr) == [
        f"knode: error: invalid quorum configuration: quorum secret file {secret}: readable "
        "or writable by group or others (mode 0644); chmod 600 it"
    ]
