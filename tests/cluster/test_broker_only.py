"""Broker-only nodes (KRaft's `process.roles=broker`) on real processes: three voters and two
broker-only nodes, which run as learners of the metadata quorum (a full local replica of the
tree, no vote) and never become the controller.

One cluster, one test (starting five processes dominates the cost):

* every node, learners included, is registered and serves Metadata; the controller is a voter;
  DescribeQuorum (`ktool quorum status/replication`) lists the voters and the two learners as
  observers, asked of a learner or of a voter;
* an RF=3 topic led by a broker-only node takes idempotent acks=all writes; SIGKILL of that
  leader in the middle moves leadership to another replica and no acknowledged message is
  lost; restarted, it rejoins the ISR;
* a broker-only node SIGSTOPped past `broker.session.timeout.ms` loses its registration;
  after SIGCONT its quorum session is replaced, it registers again and rejoins the ISR;
* no broker-only node ever logged that it is the controller.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from typer.testing import CliRunner

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app as ktool

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=1",
]
TOPIC = "on-learners"
MESSAGES = 3000
CONTROLLER_LINE = re.compile(r"node (\d+) is the controller, epoch (\d+)")


def _metadata(cluster: KnodeCluster, node_id: int, topic: str | None = None) -> ClusterMetadata:
    """Metadata as node `node_id` answers it: a fresh client knows only that node, so the
    request cannot go to a SIGSTOPped broker that an older client still holds a connection to."""
    admin = AdminClient({"bootstrap.servers": cluster.address(node_id)})
    return admin.list_topics(topic, timeout=5)


def _partition(cluster: KnodeCluster, node_id: int) -> tuple[int, list[int]]:
    """(leader, isr) of partition 0 as node `node_id` sees them."""
    state = _metadata(cluster, node_id, TOPIC).topics[TOPIC].partitions[0]
    return int(state.leader), sorted(int(r) for r in state.isrs)


def _brokers(cluster: KnodeCluster, node_id: int) -> list[int]:
    return sorted(int(b) for b in _metadata(cluster, node_id).brokers)


def _quorum(address: str, command: str) -> str:
    """stdout of `ktool quorum <command> --bootstrap-server <address>` (DescribeQuorum)."""
    result = CliRunner().invoke(ktool, ["quorum", command, "--bootstrap-server", address])
    assert result.exit_code == 0, result.output
    return result.stdout


def _quorum_status(address: str) -> dict[str, str]:
    lines = _quorum(address, "status").splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _controllers(cluster: KnodeCluster) -> set[int]:
    """Every node that logged 'node N is the controller'."""
    found = set()
    for node in cluster.nodes.values():
        if node.stderr_path.exists():
            for match in CONTROLLER_LINE.finditer(node.stderr_path.read_text()):
                found.add(int(match.group(1)))
    return found


def _produce(cluster: KnodeCluster, victim: int) -> tuple[list[int], list[str]]:
    """MESSAGES numbered idempotent acks=all writes; `victim` is SIGKILLed once a third is
    acknowledged, with the rest still to be sent or in flight."""
    acked: list[int] = []
    failed: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acked.append(int(message.value()))  # type: ignore[arg-type]
        else:
            failed.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )
    killed = False
    for number in range(MESSAGES):
        producer.produce(TOPIC, str(number).encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
        if not killed and number >= MESSAGES // 2:
            wait_until(
                lambda: producer.poll(0.05) >= 0 and len(acked) >= MESSAGES // 3,
                timeout_s=30,
                what="a third of the messages acknowledged",
            )
            cluster.kill(victim)
            killed = True
    assert producer.flush(60) == 0, "messages still queued after 60 s"
    return acked, failed


def _consume(cluster: KnodeCluster) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "on-learners-check",
            "enable.auto.commit": False,
        }
    )
    try:
        end = consumer.get_watermark_offsets(KafkaTopicPartition(TOPIC, 0), timeout=10)[1]
        consumer.assign([KafkaTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        numbers: list[int] = []
        offset = -1

        def read_to_end() -> bool:
            nonlocal offset
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                numbers.append(int(message.value()))  # type: ignore[arg-type]
                offset = int(message.offset() or 0)
            return offset + 1 >= end

        wait_until(read_to_end, timeout_s=30, interval_s=0, what=f"{end} messages consumed")
        return numbers
    finally:
        consumer.close()


def test_broker_only_nodes_lead_fail_over_and_reregister(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path, node_count=5, voter_count=3, settings=SETTINGS) as cluster:
        assert cluster.broker_only_ids == [4, 5]
        # A broker-only node answers Metadata listing every node, learners included.
        wait_until(lambda: _brokers(cluster, 4) == [1, 2, 3, 4, 5], timeout_s=30, what="5 brokers")
        controller = _metadata(cluster, 4).controller_id
        assert controller in (1, 2, 3)
        # The learners are the quorum's observers, whichever node answers DescribeQuorum.
        for asked in (cluster.address(4), cluster.address(1)):
            status = _quorum_status(asked)
            assert status["LeaderId"] in ("1", "2", "3"), status
            assert status["CurrentVoters"] == "[1,2,3]", status
            assert status["CurrentObservers"] == "[4,5]", status
        roles = {
            int(row.split()[0]): row.split()[-1]
            for row in _quorum(cluster.address(5), "replication").splitlines()[1:]
        }
        assert roles[4] == roles[5] == "Observer", roles
        assert sorted(roles) == [1, 2, 3, 4, 5] and "Leader" in roles.values(), roles

        admin = AdminClient({"bootstrap.servers": cluster.address(4)})
        futures = admin.create_topics(
            [
                NewTopic(
                    TOPIC,
                    num_partitions=1,
                    replica_assignment=[[4, 5, 1]],
                    config={"min.insync.replicas": "2"},
                )
            ]
        )
        futures[TOPIC].result(timeout=30)
        wait_until(
            lambda: _partition(cluster, 4) == (4, [1, 4, 5]),
            timeout_s=30,
            what="broker-only node 4 leading with the full ISR",
        )

        # SIGKILL the broker-only leader under load: another replica takes over.
        acked, failed = _produce(cluster, victim=4)
        assert failed == []
        assert sorted(acked) == list(range(MESSAGES))
        leader, isr = wait_until(
            lambda: (state := _partition(cluster, 5))[0] in (1, 5) and 4 not in state[1] and state,
            timeout_s=30,
            what="a new leader without node 4",
        )
        assert leader in (1, 5) and 4 not in isr
        numbers = _consume(cluster)
        assert sorted(numbers) == list(range(MESSAGES)), "acknowledged messages lost or doubled"

        # Restarted, it catches up and rejoins the ISR.
        cluster.start(4)
        wait_until(
            lambda: _partition(cluster, 5)[1] == [1, 4, 5], timeout_s=30, what="node 4 in the ISR"
        )

        # SIGSTOP a learner past its session timeout: its registration goes, and after
        # SIGCONT it comes back under a new session (as a voter's does).
        paused = cluster.nodes[5].process
        assert paused is not None
        os.kill(paused.pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda: 5 not in _brokers(cluster, 1) and 5 not in _partition(cluster, 1)[1],
                timeout_s=20,
                what="node 5's session to expire",
            )
            assert _quorum_status(cluster.address(1))["CurrentObservers"] == "[4]"
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        wait_until(
            lambda: 5 in _brokers(cluster, 1) and _partition(cluster, 1)[1] == [1, 4, 5],
            timeout_s=30,
            what="node 5 registered again and back in the ISR",
        )
        assert "registering again" in cluster.nodes[5].stderr_path.read_text()
        wait_until(
            lambda: _quorum_status(cluster.address(1))["CurrentObservers"] == "[4,5]",
            timeout_s=30,
            what="both learners observers again",
        )
        assert _controllers(cluster) <= {1, 2, 3}, "a broker-only node ran the controller"
