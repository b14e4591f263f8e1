"""Replication cost and failover time on a local three-node cluster (issue 5).

    .venv/bin/python bench/replication.py [--messages 200000] [--repeat 3]
                                          [--session-timeout-ms 2000]

Starts three `knode` processes (tests/support/cluster.py, data in a temporary directory,
`broker.session.timeout.ms` 2000 unless given, heartbeats every sixth of it, at most 1 s),
then, in ONE run:

* throughput: the same load (one confluent-kafka producer, 100-byte values, linger 5 ms, no
  keys, partition 0) first to a topic with RF=1 and acks=1, then to a topic with RF=3,
  `min.insync.replicas=2` and acks=all; rate = messages / (flush done - first produce).
  The ratio RF3-acks=all / RF1-acks=1 is the figure of merit (goal >= 0.5; Kafka's 2014
  benchmark gave 0.51). Repeated `--repeat` times, median and range printed.
* failover: an acks=all producer sends one message every 10 ms to an RF=3 topic; the
  partition leader is SIGKILLed: time from the kill to the first acknowledged message
  produced after it (goal <= broker.session.timeout.ms + 1 s), twice: a leader that is not
  the controller, then a leader that is the controller too (a combined node: its broker
  session, the controller and often the quorum leader die at once, so a Raft election comes
  first). Each killed node is restarted; then the leader of the first topic gets SIGTERM
  (controlled shutdown): the same measurement (goal <= 1 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

SESSION_TIMEOUT_MS = 2000
VALUE = b"x" * 100


def _rate(bootstrap: str, topic: str, acks: str, messages: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    started = time.monotonic()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    return messages / (time.monotonic() - started)


def _leader(admin: AdminClient, topic: str) -> int:
    return int(admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader)


def _create_led_by(admin: AdminClient, topic: str, replicas: list[int]) -> None:
    """An RF=3 topic, min.insync.replicas=2, whose preferred (and first) leader is
    replicas[0]."""
    new = NewTopic(topic, 1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout=30)
    wait_until(lambda: _leader(admin, topic) == replicas[0], timeout_s=30, what=f"{topic} led")


def _controller(admin: AdminClient) -> int:
    return int(admin.describe_cluster(request_timeout=10).result().controller.id)


def _failover_s(
    cluster: KnodeCluster, admin: AdminClient, *, hard: bool, topic: str = "rf3"
) -> float:
    """Seconds from killing/stopping the leader to the first ack of a message sent after."""
    leader = _leader(admin, topic)
    acked_at: list[float] = []
    killed_at = 0.0

    def delivered(error: object, message: object) -> None:
        if error is None and message.key() == b"after":  # type: ignore[attr-defined]
            acked_at.append(time.monotonic())

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 20,
            "topic.metadata.refresh.interval.ms": 200,
        }
    )
    for _ in range(50):
        producer.produce(topic, VALUE, partition=0, on_delivery=delivered)
        producer.poll(0.01)
    producer.flush(10)
    killed_at = time.monotonic()
    if hard:
        cluster.kill(leader)
    else:
        cluster.nodes[leader].process.terminate()  # type: ignore[union-attr]
    while not acked_at and time.monotonic() - killed_at < 30:
        producer.produce(topic, VALUE, key=b"after", partition=0, on_delivery=delivered)
        producer.poll(0.01)
    producer.flush(30)
    if not hard:
        cluster.stop(leader)
    cluster.start(leader, wait=False)
    cluster.wait_ready(leader, timeout_s=90)
    wait_until(
        lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs) == 3,
        timeout_s=60,
        what="the full ISR again",
    )
    return (acked_at[0] - killed_at) if acked_at else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trafka-bench-") as base:
        cluster = KnodeCluster(
            Path(base),
            node_count=3,
            settings=[
                f"broker.session.timeout.ms={args.session_timeout_ms}",
                f"broker.heartbeat.interval.ms={min(1000, args.session_timeout_ms // 6)}",
                "replica.fetch.wait.max.ms=500",
            ],
            start=False,
        )
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        with cluster:
            for node_id in cluster.nodes:
                cluster.wait_ready(node_id, timeout_s=90)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            futures = admin.create_topics(
                [
                    NewTopic("rf1", 1, 1),
                    NewTopic("rf3", 1, 3, config={"min.insync.replicas": "2"}),
                ]
            )
            for future in futures.values():
                future.result(timeout=30)
            ratios = []
            for run in range(args.repeat):
                rf1 = _rate(cluster.bootstrap_servers, "rf1", "1", args.messages)
                rf3 = _rate(cluster.bootstrap_servers, "rf3", "all", args.messages)
                ratios.append(rf3 / rf1)
                print(
                    f"run {run + 1}: RF=1 acks=1 {rf1:,.0f} msgs/s, RF=3 acks=all "
                    f"{rf3:,.0f} msgs/s, ratio {rf3 / rf1:.2f}",
                    flush=True,
                )
            print(
                f"ratio median {statistics.median(ratios):.2f} "
                f"(range {min(ratios):.2f}-{max(ratios):.2f}; goal >= 0.5)"
            )
            goal = f"goal <= {args.session_timeout_ms / 1000 + 1:.1f} s"
            # The plain case: the leader is not the controller.
            controller = _controller(admin)
            others = [n for n in cluster.nodes if n != controller]
            _create_led_by(admin, "rf3p", [*others, controller])
            hard = _failover_s(cluster, admin, hard=True, topic="rf3p")
            print(f"leader SIGKILL -> first acks=all ack: {hard:.2f} s ({goal})", flush=True)
            # A combined node: the leader is also the controller (and often the quorum leader).
            controller = _controller(admin)
            others = [n for n in cluster.nodes if n != controller]
            _create_led_by(admin, "rf3c", [controller, *others])
            both = _failover_s(cluster, admin, hard=True, topic="rf3c")
            print(
                f"leader that is also the controller SIGKILL -> first ack: {both:.2f} s ({goal})",
                flush=True,
            )
            soft = _failover_s(cluster, admin, hard=False)
            print(f"leader SIGTERM (controlled shutdown) -> first ack: {soft:.2f} s (goal <= 1 s)")


if __name__ == "__main__":
    main()
