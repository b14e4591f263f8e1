"""Replication on real processes (issue 5): three knode processes, RF=3, the controller and the
replica manager wired together, driven by confluent-kafka.

* the partition leader is SIGKILLed while an idempotent acks=all producer sends numbered
  messages; it is restarted; every acknowledged message is consumed exactly once, in order;
* the controller is SIGKILLed: another node becomes controller with epoch + 1 and brokers
  reject a request carrying the old epoch (STALE_CONTROLLER_EPOCH); when the old controller
  returns, the auto rebalance gives leadership back to the preferred replicas;
* a SIGSTOPped follower leaves the ISR after replica.lag.time.max.ms and rejoins after
  SIGCONT.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i64

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.net.client import KafkaConnection
from trafka.net.messages import update_metadata as um

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "group.initial.rebalance.delay.ms=0",
    "leader.imbalance.check.interval.seconds=2",
    # A consumer with a group.id makes librdkafka look up its coordinator, which creates
    # __consumer_offsets: 3 partitions instead of 50 keep that (and every shutdown) short.
    "offsets.topic.num.partitions=3",
]
CONTROLLER_LINE = re.compile(r"node (\d+) is the controller, epoch (\d+)")


def _cluster(tmp_path: Path, settings: list[str]) -> KnodeCluster:
    """Three voters; a fresh three-voter quorum can take a while to elect on 2 busy cores."""
    cluster = KnodeCluster(tmp_path, node_count=3, settings=settings, start=False)
    for node_id in cluster.nodes:
        cluster.start(node_id, wait=False)
    try:
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _create_topic(admin: AdminClient, name: str, partitions: int = 1) -> None:
    futures = admin.create_topics(
        [NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})]
    )
    for future in futures.values():
        future.result(timeout=30)


def _partition(admin: AdminClient, topic: str, partition: int = 0) -> tuple[int, list[int]]:
    """(leader, isr) as the answering broker sees them."""
    metadata = admin.list_topics(topic, timeout=5)
    state = metadata.topics[topic].partitions[partition]
    return int(state.leader), sorted(int(r) for r in state.isrs)


def _controller_terms(cluster: KnodeCluster) -> list[tuple[int, int]]:
    """(node, epoch) of every 'is the controller' line in the nodes' logs."""
    terms = []
    for node in cluster.nodes.values():
        if node.stderr_path.exists():
            for match in CONTROLLER_LINE.finditer(node.stderr_path.read_text()):
                terms.append((int(match.group(1)), int(match.group(2))))
    return sorted(terms, key=lambda term: term[1])


NUMBERED_TOTAL = 100_000
NUMBERED_PARTITIONS = 3
POLL_EVERY = 1000
"""The produce loop serves delivery reports every POLL_EVERY messages (and when full)."""


@dataclass
class NumberedRun:
    acked: dict[int, list[int]]
    """partition -> acknowledged numbers, in delivery-report order."""
    failed: list[str]
    new_leader: int = -1
    """partition 0's leader after the kill."""
    killed_at: int = -1
    """the last number handed over before the kill."""
    reported_before_kill: int = 0
    """how many of partition 0's numbers were acknowledged before the kill."""


def _produce_numbered(cluster: KnodeCluster, topic: str, victim: int) -> NumberedRun:
    """Send NUMBERED_TOTAL numbered messages, number n to partition n % NUMBERED_PARTITIONS,
    in batches (linger.ms, no flush in between). A third of the way in or later, once half of
    that third is acknowledged, `victim` (the leader of partition 0) is SIGKILLed just before
    a poll, so at least the POLL_EVERY - 1 messages handed over since the last one are
    outstanding (queued or in flight). Two thirds of the way in, once a survivor names a new
    leader for partition 0, the victim is started again."""
    run = NumberedRun(acked={p: [] for p in range(NUMBERED_PARTITIONS)}, failed=[])

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is None:
            partition = message.partition() or 0
            run.acked[partition].append(int(message.value()))  # type: ignore[arg-type]
        else:
            run.failed.append(str(error))

    def acked_count() -> int:
        return sum(len(numbers) for numbers in run.acked.values())

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "queue.buffering.max.messages": 50_000,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    kill_at = NUMBERED_TOTAL // 3
    restart_at = NUMBERED_TOTAL * 2 // 3
    survivor = next(node_id for node_id in cluster.nodes if node_id != victim)
    survivor_admin = AdminClient({"bootstrap.servers": cluster.address(survivor)})
    for number in range(NUMBERED_TOTAL):
        value = str(number).encode()
        while True:
            try:
                producer.produce(
                    topic, value, partition=number % NUMBERED_PARTITIONS, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.01)
        if number % POLL_EVERY == 0:
            producer.poll(0)
        if run.killed_at < 0:
            if (
                number >= kill_at
                and number % POLL_EVERY == POLL_EVERY - 1
                and acked_count() >= kill_at // 2
            ):
                cluster.kill(victim)
                run.killed_at = number
                run.reported_before_kill = len(run.acked[0])
        elif run.new_leader == -1 and number >= restart_at:
            run.new_leader = wait_until(
                lambda: _new_leader(survivor_admin, topic, victim),
                timeout_s=30,
                what="a new leader for partition 0",
            )
            cluster.start(victim, wait=False)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages neither acknowledged nor failed"
    assert run.killed_at >= 0 and run.new_leader != -1, "the leader was never killed"
    return run


def _new_leader(admin: AdminClient, topic: str, old_leader: int) -> int | None:
    leader, _ = _partition(admin, topic)
    return None if leader in (-1, old_leader) else leader


def _consume_all(cluster: KnodeCluster, topic: str) -> dict[int, list[int]]:
    """A fresh consumer reads every partition from the beginning to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "numbered-check",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 * 1024 * 1024,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(NUMBERED_PARTITIONS)
        }
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(NUMBERED_PARTITIONS)]
        )
        consumed: dict[int, list[int]] = {p: [] for p in range(NUMBERED_PARTITIONS)}
        next_offsets = dict.fromkeys(range(NUMBERED_PARTITIONS), 0)
        deadline = time.monotonic() + 60
        while any(next_offsets[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"consumed up to {next_offsets}, ends {ends}"
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                assert error is None, error
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                consumed[partition].append(int(message.value()))  # type: ignore[arg-type]
                next_offsets[partition] = offset + 1
        return consumed
    finally:
        consumer.close()


def test_leader_sigkill_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    """Must show 1 (issue 5): RF=3, min.insync.replicas=2, acks=all, idempotent producer;
    the leader of partition 0 is SIGKILLed while 100,000 numbered messages are produced and
    restarted later; a fresh consumer reads every acknowledged number exactly once, in order
    per partition (unacknowledged numbers may be missing, nothing appears twice).

    The consumer reads after the auto rebalance has made the restarted broker partition 0's
    leader again, so what it reads is the restarted replica's log: truncated to the new
    leader's epoch boundary (KIP-101) and caught up, with nothing from before the kill kept
    twice."""
    with _cluster(tmp_path, SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        _create_topic(admin, "numbers", partitions=NUMBERED_PARTITIONS)
        victim, isr = _partition(admin, "numbers")
        assert isr == [1, 2, 3], cluster.describe_failure()
        run = _produce_numbered(cluster, "numbers", victim)
        acked, failed = run.acked, run.failed
        assert run.new_leader != victim
        # Partition 0 had numbers outstanding at the kill, acknowledged after it.
        assert any(n <= run.killed_at for n in acked[0][run.reported_before_kill :])
        cluster.wait_ready(victim)
        wait_until(
            lambda: all(
                _partition(admin, "numbers", p)[1] == [1, 2, 3] for p in range(NUMBERED_PARTITIONS)
            ),
            timeout_s=30,
            what="the restarted broker back in every ISR",
        )
        wait_until(
            lambda: _partition(admin, "numbers")[0] == victim,
            timeout_s=30,
            what="the auto rebalance to make the restarted broker leader again",
        )
        consumed = _consume_all(cluster, "numbers")

        assert sum(len(numbers) for numbers in acked.values()) + len(failed) == NUMBERED_TOTAL
        assert len(failed) <= NUMBERED_TOTAL // 10, failed[:5]
        for partition in range(NUMBERED_PARTITIONS):
            numbers = consumed[partition]
            assert all(n % NUMBERED_PARTITIONS == partition for n in numbers)
            duplicates = len(numbers) - len(set(numbers))
            assert duplicates == 0, f"partition {partition}: {duplicates} numbers read twice"
            assert numbers == sorted(numbers), f"partition {partition}: out of order"
            lost = set(acked[partition]) - set(numbers)
            assert not lost, f"partition {partition}: acknowledged, then lost: {sorted(lost)[:10]}"
            # Idempotence keeps the send order: acknowledgements come in that order too.
            assert acked[partition] == sorted(acked[partition])


def _stale_update_metadata(controller_id: int, epoch: int) -> um.UpdateMetadataRequestV6:
    return um.UpdateMetadataRequestV6(
        controller_id=BrokerId(controller_id),
        controller_epoch=i32(epoch),
        broker_epoch=i64(-1),
        topic_states=(),
        live_brokers=(),
    )


async def _send(address: str, request: object) -> object:
    host, port = address.rsplit(":", 1)
    connection = await KafkaConnection.connect(host, int(port), request_timeout_s=10)
    try:
        return await connection.request(request)
    finally:
        await connection.close()


def test_controller_sigkill_moves_the_controller_and_fences_the_old_epoch(
    tmp_path: Path,
) -> None:
    with _cluster(tmp_path, SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        _create_topic(admin, "fenced", partitions=3)
        wait_until(lambda: _controller_terms(cluster), timeout_s=30, what="a controller")
        old_controller, old_epoch = _controller_terms(cluster)[-1]
        cluster.kill(old_controller)
        wait_until(
            lambda: _controller_terms(cluster)[-1][1] > old_epoch,
            timeout_s=30,
            what="a new controller",
        )
        new_controller, new_epoch = _controller_terms(cluster)[-1]
        assert new_controller != old_controller
        assert new_epoch == old_epoch + 1
        survivor = next(n for n in cluster.nodes if n != old_controller)
        wait_until(
            lambda: (
                set(admin.list_topics(timeout=5).brokers) == set(cluster.nodes) - {old_controller}
            ),
            timeout_s=30,
            what="the dead controller gone from the metadata",
        )
        # Wait until the survivor has seen the new epoch (the new controller's requests).
        wait_until(
            lambda: all(
                p.leader not in (-1, old_controller)
                for p in admin.list_topics("fenced", timeout=5).topics["fenced"].partitions.values()
            ),
            timeout_s=30,
            what="leaders moved off the dead controller",
        )
        stale = trio.run(
            _send, cluster.address(survivor), _stale_update_metadata(old_controller, old_epoch)
        )
        assert stale.error_code == ErrorCode.stale_controller_epoch  # type: ignore[attr-defined]
        current = trio.run(
            _send, cluster.address(survivor), _stale_update_metadata(new_controller, new_epoch)
        )
        # The current epoch without the survivor's broker epoch is a forgery (issue 12).
        assert current.error_code == ErrorCode.cluster_authorization_failed  # type: ignore[attr-defined]
        assert admin.list_topics(timeout=5).controller_id == new_controller

        # The old controller comes back as a plain broker; the auto rebalance (every 2 s)
        # gives every partition back to its preferred replica (EXT-11).
        cluster.start(old_controller, wait=False)
        cluster.wait_ready(old_controller, timeout_s=60)

        def preferred_leaders() -> bool:
            topic = admin.list_topics("fenced", timeout=5).topics["fenced"]
            return all(
                p.leader == p.replicas[0] and len(p.isrs) == 3 for p in topic.partitions.values()
            )

        wait_until(preferred_leaders, timeout_s=30, what="preferred leaders again")
        assert _controller_terms(cluster)[-1] == (new_controller, new_epoch)


def test_sigstopped_follower_leaves_and_rejoins_the_isr(tmp_path: Path) -> None:
    # Sessions outlive the stop, so it is the leader's lag rule that removes the follower.
    settings = [s for s in SETTINGS if not s.startswith("broker.session")] + [
        "broker.session.timeout.ms=20000"
    ]
    with _cluster(tmp_path, settings) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        _create_topic(admin, "lag")
        leader, isr = _partition(admin, "lag")
        assert isr == [1, 2, 3]
        wait_until(lambda: _controller_terms(cluster), timeout_s=30, what="a controller")
        controller = _controller_terms(cluster)[-1][0]
        follower = next(n for n in (1, 2, 3) if n not in (leader, controller))
        leader_admin = AdminClient({"bootstrap.servers": cluster.address(leader)})
        process = cluster.nodes[follower].process
        assert process is not None
        stopped_at = time.monotonic()
        os.kill(process.pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda: follower not in _partition(leader_admin, "lag")[1],
                timeout_s=15,
                what="the stopped follower out of the ISR",
            )
            left_after_s = time.monotonic() - stopped_at
        finally:
            os.kill(process.pid, signal.SIGCONT)
        assert left_after_s >= 2.0  # not before replica.lag.time.max.ms
        wait_until(
            lambda: _partition(leader_admin, "lag")[1] == [1, 2, 3],
            timeout_s=20,
            what="the follower back in the ISR",
        )
        # The controller propagated the ISR changes to every broker (isr_change_notification).
        wait_until(
            lambda: (
                _partition(AdminClient({"bootstrap.servers": cluster.address(controller)}), "lag")[
                    1
                ]
                == [1, 2, 3]
            ),
            timeout_s=20,
            what="the controller's metadata shows the full ISR",
        )


def test_rolling_sigterm_restart_under_load_loses_nothing(tmp_path: Path) -> None:
    """Each node in turn gets SIGTERM (controlled shutdown: its leaders move first) and is
    started again while an idempotent acks=all producer keeps sending."""
    with _cluster(tmp_path, SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        _create_topic(admin, "rolling", partitions=3)
        acked: list[int] = []
        fatal: list[str] = []

        def delivered(error: KafkaError | None, message: object) -> None:
            if error is None:
                acked.append(int(message.value()))  # type: ignore[attr-defined]
            else:
                fatal.append(str(error))

        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        number = 0

        def produce_for(seconds: float) -> None:
            nonlocal number
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                try:
                    producer.produce(
                        "rolling",
                        str(number).encode(),
                        key=str(number).encode(),
                        on_delivery=delivered,
                    )
                    number += 1
                except BufferError:
                    pass
                producer.poll(0.001)

        produce_for(1.0)
        for node_id in cluster.nodes:
            stopped_at = time.monotonic()
            assert cluster.stop(node_id) == 0
            assert time.monotonic() - stopped_at < 15
            produce_for(1.0)
            cluster.start(node_id, wait=False)
            cluster.wait_ready(node_id, timeout_s=60)
            wait_until(
                lambda: all(
                    sorted(p.isrs) == [1, 2, 3]
                    for p in admin.list_topics("rolling", timeout=5)
                    .topics["rolling"]
                    .partitions.values()
                ),
                timeout_s=30,
                what=f"node {node_id} back in every ISR",
            )
            produce_for(1.0)
        assert producer.flush(60) == 0
        assert not fatal, fatal[:5]
        assert len(acked) == number
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "rolling-check",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["rolling"])
        consumed: set[int] = set()
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(consumed) < number:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed.add(int(message.value()))  # type: ignore[arg-type]
        consumer.close()
        assert consumed == set(range(number))
        for node_id in cluster.nodes:
            log_text = cluster.nodes[node_id].stderr_path.read_text()
            assert "controlled shutdown succeeded" in log_text, cluster.describe_failure()
