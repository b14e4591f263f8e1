"""A full log dir halts a knode process in order (issue 16, docs/reliability.md): Kafka takes
the dir offline and, with no log dir left, halts the broker with one line and exit code 1.
Before, the node died of SIGBUS (the quorum journal is an mmap'ed file grown sparsely in the
log dir) or of a LogDirFailedError traceback out of the replica fetcher.

One knode whose log dir (with the quorum's journal) is a small tmpfs: acknowledged writes,
then the tmpfs is filled and writes go on until the node stops. It must exit with 1 (not
SIGBUS, not a traceback) after Kafka's line, and after the space is freed and the node
started again, every acknowledged write is read back. Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "full"
TMPFS_MIB = 48


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m", f"chaosfull{os.getpid()}",
         str(mount_point)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> int:
    written = 0
    chunk = b"\0" * (1 << 20)
    fd = os.open(directory / "fill", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    written += os.write(fd, chunk[:size])
                except OSError:
                    break
    finally:
        os.close(fd)
    return written


def test_a_full_log_dir_halts_the_node_and_loses_nothing_acknowledged(
    tmp_path: Path, small_disk: Path
) -> None:
    (tmp_path / "cluster").mkdir()
    cluster = KnodeCluster(
        tmp_path / "cluster",
        settings=[
            "num.partitions=1",
            "offsets.topic.num.partitions=1",
            "log.segment.bytes=1048576",
        ],
        start=False,
    )
    node = cluster.nodes[1]
    node.data_dir = small_disk / "node-1"
    acked: list[str] = []
    with cluster:
        cluster.start(1)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 20_000,
                "linger.ms": 5,
            }
        )

        def delivered(error: object, message: object) -> None:
            if error is None:
                acked.append(message.value().decode())  # type: ignore[attr-defined]

        sent = 0

        def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                producer.produce(TOPIC, f"v{sent}-".encode() + b"x" * 2000, callback=delivered)
                sent += 1
            producer.poll(0)

        send(200)
        assert producer.flush(30) == 0
        before_fill = len(acked)
        assert before_fill == 200
        _fill(small_disk)
        deadline = time.monotonic() + 90
        while node.running and time.monotonic() < deadline:
            send(50)
            producer.poll(0.2)
        assert not node.running, (
            f"the node kept running on a full disk\n{cluster.describe_failure()}"
        )
        assert node.process is not None
        code = node.process.returncode
        stderr = node.stderr_path.read_text(errors="replace")
        after_fill = stderr[stderr.rfind("===== start") :]
        assert code == 1, f"exit code {code} (-7 is SIGBUS)\n{cluster.describe_failure()}"
        assert "Shutdown broker because" in after_fill, cluster.describe_failure()
        assert "Traceback" not in after_fill, cluster.describe_failure()
        producer.flush(1)

        # space back, the node starts again: every acknowledged write is there
        (small_disk / "fill").unlink()
        node.process = None
        cluster.start(1)
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "full-check",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        seen: set[str] = set()
        try:
            consumer.subscribe([TOPIC])
            wanted = {value.split("-", 1)[0] for value in acked}

            def all_read() -> bool:
                for message in consumer.consume(500, timeout=1.0):
                    if message.error() is None:
                        seen.add((message.value() or b"").decode().split("-", 1)[0])
                return wanted <= seen

            wait_until(all_read, timeout_s=60, what="every acknowledged write read back")
        finally:
            consumer.close()


JOURNAL_ON_FULL_DISK = """
import errno, sys
from pysyncobj.journal import FileJournal
from trafka.metadata_quorum.transport import _PreallocatedJournalFile
journal = FileJournal(sys.argv[1])
journal._FileJournal__journalFile = _PreallocatedJournalFile(
    journal._FileJournal__journalFile, sys.argv[1]
)
open(sys.argv[2], "wb").close()  # the disk is full from here on (the test fills it)
import time
while not open(sys.argv[2], "rb").read():
    time.sleep(0.05)
try:
    for index in range(1_000_000):
        journal.add(b"x" * 4000, index + 1, 1)
except OSError as error:
    sys.exit(3 if error.errno == errno.ENOSPC else 4)
sys.exit(0)
"""


def test_the_quorum_journal_fails_with_enospc_not_sigbus(tmp_path: Path, small_disk: Path) -> None:
    """pysyncobj grows its journal with `mmap.resize` (a sparse file): on a full disk the
    first store into a new page was SIGBUS. The journal file now allocates before it maps."""
    go = tmp_path / "go"
    process = subprocess.Popen(
        [sys.executable, "-c", JOURNAL_ON_FULL_DISK, str(small_disk / "quorum.journal"), str(go)],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        wait_until(go.exists, timeout_s=30, what="the journal to open")
        _fill(small_disk)
        go.write_bytes(b"1")
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 3, f"exit code {code} (-7 is SIGBUS; 3 is ENOSPC as an OSError)"
