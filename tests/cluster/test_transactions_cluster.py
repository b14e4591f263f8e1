"""Exactly-once on three nodes (RF=3, min.insync.replicas=2) with failures (EOS-01/04/05).

A consume-transform-produce copier (`eos_copier.py`, confluent-kafka, its own process)
copies numbered records from `eos-in` to `eos-out` in transactions with
send_offsets_to_transaction, while

(a) the node coordinating its transactional id is SIGKILLed (and restarted),
(b) the leader of an output partition is SIGKILLed (and restarted),
(c) the copier itself is SIGKILLed and restarted with the same transactional.id (the new
    instance fences the old one and aborts its open transaction).

A read_committed consumer of `eos-out` then sees every number exactly once, and a
read_uncommitted one sees all of them too (plus whatever the aborted transactions wrote).

A copier that reports itself stuck (librdkafka#5511, see eos_copier.py) is restarted with
the same transactional.id by `Copiers`, at most three times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.cluster.eos_copier import STUCK_EXIT
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.group.hashing import partition_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOTAL = 100_000
PER_TRANSACTION = 500
STAGE = TOTAL // 20  # records copied between failures
PARTITIONS = 3
TRANSACTIONAL_ID = "eos-copier"
SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
    "auto.leader.rebalance.enable=false",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KnodeCluster]:
    cluster = KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False)
    with cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
        yield cluster


class Copier:
    """The copier process and the progress it reports."""

    def __init__(self, cluster: KnodeCluster) -> None:
        self.committed = 0
        self.events: list[dict[str, object]] = []
        self.stderr_path = cluster.base_dir / f"copier-{time.monotonic_ns()}.stderr.log"
        stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.cluster.eos_copier",
                "--bootstrap",
                cluster.bootstrap_servers,
                "--source",
                "eos-in",
                "--target",
                "eos-out",
                "--group",
                "eos-group",
                "--transactional-id",
                TRANSACTIONAL_ID,
                "--per-transaction",
                str(PER_TRANSACTION),
                "--idle-exit-s",
                "25",
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=Path(__file__).resolve().parents[2],
        )
        stderr.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            self.events.append(event)
            if event.get("event") == "committed":
                self.committed += int(event["count"])

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._close()

    def wait(self, timeout_s: float) -> int:
        code = self.process.wait(timeout=timeout_s)
        self._close()
        return code

    def describe(self) -> str:
        tail = self.stderr_path.read_text(errors="replace").splitlines()[-20:]
        return f"copier events {self.events[-8:]}\ncopier stderr:\n" + "\n".join(tail)

    def _close(self) -> None:
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        for name in ("eos-in", "eos-out")
    ]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)


def fill_input(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for number in range(TOTAL):
        producer.produce("eos-in", str(number).encode(), key=str(number).encode())
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[partition].leader)


def read_all(bootstrap: str, isolation: str, expected: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eos-check-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe(["eos-out"])
    numbers: list[int] = []
    idle = 0
    try:
        while idle < 10 or len(numbers) < expected:
            messages = [m for m in consumer.consume(1000, 1.0) if not m.error()]
            if not messages:
                idle += 1
                if idle > 90:
                    break
                continue
            idle = 0
            numbers.extend(int(m.value() or b"-1") for m in messages)
    finally:
        consumer.close()
    return numbers


def fully_replicated(bootstrap: str) -> bool:
    """Every partition has a leader and all three replicas in its ISR."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return all(
        p.leader >= 0 and len(p.isrs) == 3
        for topic in metadata.topics.values()
        for p in topic.partitions.values()
    )


def restart_when_down(cluster: KnodeCluster, node_id: int) -> None:
    """SIGKILL, restart, and wait until the node is back in every ISR: the failures are
    sequential (each one hits a healthy cluster), as the scenario describes."""
    cluster.kill(node_id)
    cluster.start(node_id, wait=False)
    cluster.wait_ready(node_id, timeout_s=90)
    wait_until(
        lambda: fully_replicated(cluster.bootstrap_servers),
        timeout_s=120,
        interval_s=0.5,
        what="every partition fully replicated again",
    )


class Copiers:
    """The copier processes, one after another, all with the same transactional.id.

    A copier that reports itself stuck (exit code 4: librdkafka's send_offsets_to_transaction
    can wait forever after the group coordinator left the metadata, see eos_copier.py) is
    restarted, as a supervisor would; at most MAX_STUCK times."""

    MAX_STUCK = 3

    def __init__(self, cluster: KnodeCluster) -> None:
        self.cluster = cluster
        self.all: list[Copier] = []
        self.stuck = 0
        self.start()

    @property
    def current(self) -> Copier:
        return self.all[-1]

    @property
    def committed(self) -> int:
        return sum(copier.committed for copier in self.all)

    def start(self) -> None:
        self.all.append(Copier(self.cluster))

    def supervise(self) -> None:
        if self.current.process.poll() == STUCK_EXIT:
            self.stuck += 1
            assert self.stuck <= self.MAX_STUCK, f"the copier got stuck {self.stuck} times"
            self.current.wait(timeout_s=10)
            self.start()

    def progressed_to(self, count: int) -> bool:
        self.supervise()
        return self.committed >= count

    def wait_done(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.current.wait(timeout_s=max(1.0, deadline - time.monotonic()))
            if code != STUCK_EXIT:
                return code
            self.supervise()


def test_exactly_once_copy_through_failures(cluster: KnodeCluster) -> None:
    create_topics(cluster.bootstrap_servers)
    fill_input(cluster.bootstrap_servers)
    copiers = Copiers(cluster)
    try:
        _copy_through_failures(cluster, copiers)
    except AssertionError as error:
        error.add_note(cluster.describe_failure())
        for copier in copiers.all:
            error.add_note(copier.describe())
        raise
    finally:
        if copiers.current.process.poll() is None:
            copiers.current.kill()


def _copy_through_failures(cluster: KnodeCluster, copiers: Copiers) -> None:
    bootstrap = cluster.bootstrap_servers
    wait_until(lambda: copiers.progressed_to(STAGE), timeout_s=180, what="copier progress")
    # (a) the transaction coordinator's node
    partition = partition_for(TRANSACTIONAL_ID, 3)
    coordinator = leader_of(bootstrap, "__transaction_state", partition)
    restart_when_down(cluster, coordinator)
    progress = copiers.committed
    wait_until(
        lambda: copiers.progressed_to(progress + STAGE),
        timeout_s=180,
        what="progress after the coordinator's node was killed",
    )
    # (b) an output partition's leader
    output_leader = leader_of(bootstrap, "eos-out", 0)
    restart_when_down(cluster, output_leader)
    progress = copiers.committed
    wait_until(
        lambda: copiers.progressed_to(progress + STAGE),
        timeout_s=180,
        what="progress after an output leader was killed",
    )
    # (c) the copier itself, restarted with the same transactional.id
    copiers.current.kill()
    copiers.start()
    code = copiers.wait_done(timeout_s=900)
    assert code == 0, copiers.current.events[-5:]
    committed = read_all(bootstrap, "read_committed", TOTAL)
    counts = Counter(committed)
    duplicates = [number for number, count in counts.items() if count > 1]
    assert not duplicates, f"{len(duplicates)} numbers twice, e.g. {duplicates[:10]}"
    assert set(counts) == set(range(TOTAL))
    uncommitted = read_all(bootstrap, "read_uncommitted", TOTAL)
    assert set(uncommitted) == set(range(TOTAL))
    assert len(uncommitted) >= len(committed)
