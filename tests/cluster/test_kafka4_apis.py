"""Issue 18 items 4-5 on a real 3-node cluster with brokers in racks a, b and c and Kafka's
rack-aware replica selector: fetch from follower (KIP-392) seen through the bytes each
broker served, and the APIs Kafka 4 clients and tools call (DescribeTopicPartitions through
Kafka 4.4's kafka-topics, telemetry subscriptions from the Java client).

One cluster for the module; each node has its own metrics endpoint, read like a Prometheus
scrape (tests/cluster/test_metrics.py's `scrape`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.java_support import ToolShell, run_program, start_slowly
from tests.cluster.test_metrics import scrape
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from trafka.net import codec
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BTM = "kafka_server_brokertopicmetrics_"
REQ = "kafka_network_requestmetrics_"


class RackCluster:
    def __init__(self, cluster: KnodeCluster, metrics_ports: dict[int, int]) -> None:
        self.cluster = cluster
        self.metrics_ports = metrics_ports

    def metrics(self, node_id: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        return scrape(f"http://127.0.0.1:{self.metrics_ports[node_id]}/metrics")

    def bytes_out(self, node_id: int, topic: str) -> float:
        samples = self.metrics(node_id).get(BTM + "bytesout", {})
        key = (("__name__", BTM + "bytesout_total"), ("topic", topic))
        return samples.get(key, 0.0)

    def requests(self, node_id: int, api: str) -> float:
        samples = self.metrics(node_id).get(REQ + "requests", {})
        return samples.get((("__name__", REQ + "requests_total"), ("request", api)), 0.0)

    def errors(self, node_id: int, api: str) -> dict[str, float]:
        samples = self.metrics(node_id).get(REQ + "errors", {})
        out: dict[str, float] = {}
        for labels, count in samples.items():
            fields = dict(labels)
            if fields.get("request") == api:
                out[fields["error"]] = count
        return out


@pytest.fixture(scope="module")
def racks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RackCluster]:
    ports = {node_id: free_port() for node_id in RACKS}
    base = tmp_path_factory.mktemp("kafka4")
    node_settings = {
        node_id: [f"broker.rack={rack}", f"metrics.listener=http://127.0.0.1:{ports[node_id]}"]
        for node_id, rack in RACKS.items()
    }
    # broker 3 has two log dirs (AlterReplicaLogDirs)
    node_settings[3].append(f"log.dirs={base / 'node-3'},{base / 'node-3-second'}")
    with KnodeCluster(
        base,
        node_count=3,
        settings=["group.initial.rebalance.delay.ms=0", f"replica.selector.class={SELECTOR}"],
        node_settings=node_settings,
        start=False,
    ) as cluster:
        start_slowly(cluster)
        yield RackCluster(cluster, ports)


def _produce(cluster: KnodeCluster, topic: str, first: int, count: int) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    failures: list[object] = []
    for i in range(first, first + count):
        producer.produce(
            topic,
            value=f"value-{i:06d}".encode() + b"x" * 200,
            key=str(i).encode(),
            partition=0,
            on_delivery=lambda error, _m: failures.append(error) if error else None,
        )
    assert producer.flush(60) == 0
    assert failures == []


def _leader(cluster: KnodeCluster, topic: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partition = admin.list_topics(topic, timeout=30).topics[topic].partitions[0]
    return partition.leader, list(partition.isrs)


def _consume(consumer: Consumer, want: int, seen: list[int], timeout_s: float = 120.0) -> None:
    def caught_up() -> bool:
        for message in consumer.consume(500, timeout=0.5):
            assert message.error() is None, message.error()
            seen.append(int((message.value() or b"")[6:12]))
        return len(seen) >= want

    wait_until(caught_up, timeout_s=timeout_s, interval_s=0, what=f"{want} messages")


def test_a_consumer_reads_from_the_follower_in_its_rack_across_a_leader_change(
    racks: RackCluster,
) -> None:
    cluster = racks.cluster
    topic = f"ffl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # replicas 1 (rack a, the preferred leader), 2 (rack b), 3 (rack c)
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[
        topic
    ].result(60)
    wait_until(lambda: _leader(cluster, topic)[0] == 1, timeout_s=60, what="leader 1")
    _produce(cluster, topic, 0, 1000)
    wait_until(
        lambda: sorted(_leader(cluster, topic)[1]) == [1, 2, 3], timeout_s=60, what="full ISR"
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{topic}",
            "client.rack": "b",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        _consume(consumer, 1000, seen)
        # Every record came from broker 2 (rack b); the leader only named it.
        served = {node_id: racks.bytes_out(node_id, topic) for node_id in RACKS}
        assert served[2] >= 1000 * 200, served
        assert served[1] == 0 and served[3] == 0, served

        # A leader change: broker 1 stops; broker 2 or 3 leads. Right after it the new
        # leader may serve a fetch itself (it learns broker 2's log end offset from 2's
        # next fetch, as in Kafka), so only the data is checked across the change ...
        cluster.stop(1)
        wait_until(lambda: _leader(cluster, topic)[0] in (2, 3), timeout_s=90, what="new leader")
        _produce(cluster, topic, 1000, 500)
        _consume(consumer, 1500, seen)
        assert seen == list(range(1500))  # in order, no gap, no duplicate
        # ... and then rack b's broker serves again.
        before = {node_id: racks.bytes_out(node_id, topic) for node_id in (2, 3)}
        _produce(cluster, topic, 1500, 500)
        _consume(consumer, 2000, seen)
        assert seen == list(range(2000))
        after = {node_id: racks.bytes_out(node_id, topic) for node_id in (2, 3)}
        assert after[2] - before[2] >= 500 * 200, (before, after)
        assert after[3] == before[3], (before, after)
    finally:
        consumer.close()
        if not cluster.nodes[1].running:
            cluster.start(1, wait=False)
            cluster.wait_ready(1, timeout_s=240)


def test_the_java_consumer_reads_from_the_follower_in_its_rack(racks: RackCluster) -> None:
    cluster = racks.cluster
    topic = f"ffj-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])]
    )
    created[topic].result(60)
    wait_until(lambda: _leader(cluster, topic)[0] == 1, timeout_s=60, what="leader 1")
    _produce(cluster, topic, 0, 300)
    wait_until(
        lambda: sorted(_leader(cluster, topic)[1]) == [1, 2, 3], timeout_s=60, what="full ISR"
    )
    records, _ = run_program(
        "RackConsumer", cluster.bootstrap_servers, topic, "c", "300", timeout_s=180
    )
    assert records == [{"count": 300, "in_order": True}]
    served = {node_id: racks.bytes_out(node_id, topic) for node_id in RACKS}
    assert served[3] >= 300 * 200 and served[1] == served[2] == 0, served


# ---- Kafka 4.4's kafka-topics --describe uses DescribeTopicPartitions -------------------------
@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


def test_kafka_topics_describe_goes_through_describe_topic_partitions(
    racks: RackCluster, shell: ToolShell
) -> None:
    cluster = racks.cluster
    topic = f"dtp-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 5, 3)])[topic].result(60)
    wait_until(
        lambda: all(
            p.leader >= 0 and len(p.isrs) == 3
            for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
        ),
        timeout_s=60,
        what="leaders and full ISRs",
    )
    before = sum(racks.requests(n, "DescribeTopicPartitions") for n in RACKS)
    # --partition-size-limit-per-response 2: the client follows the cursor three times
    result = shell.run(
        "kafka-topics",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--describe",
        "--topic",
        topic,
        "--partition-size-limit-per-response",
        "2",
    ).ok()
    after = sum(racks.requests(n, "DescribeTopicPartitions") for n in RACKS)
    assert after - before >= 3, (before, after)
    metadata = admin.list_topics(topic, timeout=30).topics[topic]
    header = next(line for line in result.lines if line.startswith("Topic: "))
    assert f"Topic: {topic}\tTopicId: " in header and "PartitionCount: 5" in header
    assert "ReplicationFactor: 3" in header
    rows = {}
    for line in result.lines:
        if "\tPartition: " in line:
            fields = dict(re.findall(r"(\w+): (\S*)", line))
            rows[int(fields["Partition"])] = fields
    assert sorted(rows) == [0, 1, 2, 3, 4]
    for index, row in rows.items():
        partition = metadata.partitions[index]
        assert int(row["Leader"]) == partition.leader
        assert row["Replicas"] == ",".join(str(r) for r in partition.replicas)
        assert sorted(row["Isr"].split(",")) == sorted(str(r) for r in partition.isrs)


def test_java_clients_get_an_empty_telemetry_subscription(racks: RackCluster) -> None:
    cluster = racks.cluster
    topic = f"tel-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    before = sum(racks.requests(n, "GetTelemetrySubscriptions") for n in RACKS)
    records, _ = run_program("TelemetryProbe", cluster.bootstrap_servers, topic, timeout_s=180)
    (probe,) = records
    assert probe["offset"] == 0
    # The client instance id comes from the broker's GetTelemetrySubscriptions answer.
    instance = uuid.UUID(bytes=_kafka_uuid_bytes(probe["client_instance_id"]))
    assert instance.int != 0
    assert probe["finalized_features"] == "[]"  # DescribeFeatures: no feature flags
    after = sum(racks.requests(n, "GetTelemetrySubscriptions") for n in RACKS)
    assert after > before, (before, after)
    for node_id in RACKS:
        assert set(racks.errors(node_id, "GetTelemetrySubscriptions")) <= {"NONE"}
    # The subscription names no metrics, so the client never pushes.
    assert sum(racks.requests(n, "PushTelemetry") for n in RACKS) == 0


def _kafka_uuid_bytes(text: str) -> bytes:
    """Kafka's Uuid.toString is URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64decode(text + "==")


def test_api_versions_advertise_the_kafka4_apis(racks: RackCluster, shell: ToolShell) -> None:
    result = shell.run(
        "kafka-broker-api-versions", "--bootstrap-server", racks.cluster.bootstrap_servers
    ).ok()
    text = result.out
    assert "DescribeTopicPartitions(75): 0 [usable: 0]" in text
    assert "GetTelemetrySubscriptions(71): 0 [usable: 0]" in text
    assert "PushTelemetry(72): 0 [usable: 0]" in text
    assert "DescribeCluster(60): 0 to 2 [usable: 2]" in text
    assert "UpdateFeatures(57): 0 to 2 [usable: 2]" in text


def test_kafka_features_shows_none_and_an_upgrade_gets_kafkas_refusal(
    racks: RackCluster, shell: ToolShell
) -> None:
    bootstrap = racks.cluster.bootstrap_servers
    described = shell.run("kafka-features", "--bootstrap-server", bootstrap, "describe").ok()
    assert described.lines == []  # no feature flags finalized or supported
    upgrade = shell.run(
        "kafka-features",
        "--bootstrap-server",
        bootstrap,
        "upgrade",
        "--feature",
        "transaction.version=2",
    )
    assert upgrade.exit != 0
    assert "The controller does not support the given feature" in upgrade.out + upgrade.err


# ---- the wire: DescribeTopicPartitions paging, telemetry answers ----------------------------
def _request(
    cluster: KnodeCluster, api_key: int, data: dict[str, Any], node_id: int = 2, version: int = 0
) -> Any:
    async def run() -> Any:
        connection = await KafkaConnection.connect(
            "127.0.0.1", cluster.nodes[node_id].port, client_id="kafka4-apis-test"
        )
        try:
            await connection.negotiate_api_versions()
            request_class = codec.request_class(api_key, version)
            assert request_class is not None
            return await connection.request(build(request_class, data), version)
        finally:
            await connection.close()

    return trio.run(run)


def _page(
    cluster: KnodeCluster, names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    response = _request(
        cluster,
        75,
        {
            "topics": [{"name": name} for name in names],
            "response_partition_limit": limit,
            "cursor": None
            if cursor is None
            else {"topic_name": cursor[0], "partition_index": cursor[1]},
        },
    )
    topics = [
        (str(t.name), int(t.error_code), [int(p.partition_index) for p in t.partitions])
        for t in response.topics
    ]
    following = response.next_cursor
    return topics, (
        None if following is None else (str(following.topic_name), int(following.partition_index))
    )


def test_describe_topic_partitions_pages_with_kafkas_cursor(racks: RackCluster) -> None:
    cluster = racks.cluster
    prefix = f"dtpw-{uuid.uuid4().hex[:6]}"
    a, b, missing = f"{prefix}-a", f"{prefix}-b", f"{prefix}-zz"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for name, count in ((a, 3), (b, 2)):
        admin.create_topics([NewTopic(name, count, 1)])[name].result(60)
    wait_until(
        lambda: _page(cluster, [a, b], 10)[0] == [(a, 0, [0, 1, 2]), (b, 0, [0, 1])],
        timeout_s=60,
        what="both topics known to broker 2",
    )
    named = [missing, b, a]  # answered sorted, whatever the request's order
    assert _page(cluster, named, 2) == ([(a, 0, [0, 1])], (a, 2))
    assert _page(cluster, named, 2, (a, 2)) == ([(a, 0, [2]), (b, 0, [0])], (b, 1))
    assert _page(cluster, named, 2, (b, 1)) == ([(b, 0, [1]), (missing, 3, [])], None)
    # The limit used up exactly: the cursor names the next topic's first partition.
    assert _page(cluster, [a, b], 3) == ([(a, 0, [0, 1, 2])], (b, 0))
    assert _page(cluster, [a], 3) == ([(a, 0, [0, 1, 2])], None)
    # The cursor's topic must be among the named ones.
    assert _page(cluster, [a], 5, (b, 0)) == ([(a, 42, [])], None)
    # No names: every topic from the cursor on, nothing made up for names not asked.
    everything, _ = _page(cluster, [], 2000, (a, 1))
    assert everything[:2] == [(a, 0, [1, 2]), (b, 0, [0, 1])]
    assert all(error == 0 for _, error, _ in everything)
    assert all(name >= a for name, _, _ in everything)


def test_telemetry_subscription_is_empty_and_pushes_are_dropped(racks: RackCluster) -> None:
    cluster = racks.cluster
    zero = uuid.UUID(int=0)
    subscription = _request(cluster, 71, {"client_instance_id": zero})
    assert subscription.error_code == 0
    assert subscription.client_instance_id.int != 0
    assert subscription.requested_metrics == ()
    assert int(subscription.telemetry_max_bytes) == 1_048_576
    known = _request(cluster, 71, {"client_instance_id": subscription.client_instance_id})
    assert known.client_instance_id == subscription.client_instance_id

    def push(subscription_id: int, metrics: bytes = b"", instance: uuid.UUID | None = None) -> int:
        answer = _request(
            cluster,
            72,
            {
                "client_instance_id": instance or subscription.client_instance_id,
                "subscription_id": subscription_id,
                "terminating": False,
                "compression_type": 0,
                "metrics": metrics,
            },
        )
        return int(answer.error_code)

    assert push(int(subscription.subscription_id), b"\x0a\x00") == 0
    assert push(int(subscription.subscription_id) + 1) == 117  # UNKNOWN_SUBSCRIPTION_ID
    assert push(int(subscription.subscription_id), b"x" * 1_048_577) == 118  # TELEMETRY_TOO_LARGE
    assert push(int(subscription.subscription_id), instance=zero) == 42  # INVALID_REQUEST


# ---- AlterReplicaLogDirs: Kafka 4.4's kafka-reassign-partitions moves a replica's dir ---------
def test_kafka_reassign_partitions_moves_a_replica_between_log_dirs(
    racks: RackCluster, shell: ToolShell, tmp_path: Path
) -> None:
    cluster = racks.cluster
    first, second = cluster.nodes[3].data_dir, cluster.nodes[3].data_dir.parent / "node-3-second"
    topic = f"mv-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[
        topic
    ].result(60)
    wait_until(lambda: sorted(_leader(cluster, topic)[1]) == [1, 2, 3], timeout_s=60, what="ISR")
    _produce(cluster, topic, 0, 300)
    source = first if (first / f"{topic}-0").is_dir() else second
    destination = second if source == first else first
    assert (source / f"{topic}-0").is_dir()
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": topic,
                        "partition": 0,
                        "replicas": [1, 2, 3],
                        "log_dirs": ["any", "any", str(destination)],
                    }
                ],
            }
        )
    )
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    shell.run(
        "kafka-reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", str(plan)
    ).ok()
    verified = shell.run(
        "kafka-reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", str(plan)
    ).ok()
    assert f"Reassignment of replica {topic}-0-3 completed successfully." in verified.out, (
        verified.out
    )
    assert (destination / f"{topic}-0").is_dir() and not (source / f"{topic}-0").exists()
    # The moved replica still serves every record (broker 3 is the follower in rack c).
    _produce(cluster, topic, 300, 100)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{topic}",
            "client.rack": "c",
            "enable.auto.commit": False,
        }
    )
    seen: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        _consume(consumer, 400, seen)
    finally:
        consumer.close()
    assert seen == list(range(400))
    assert racks.bytes_out(3, topic) >= 400 * 200
    # Kafka's errors: an unknown dir, a partition without a replica here, an unknown topic.
    answer = _request(
        cluster,
        34,
        {
            "dirs": [
                {"path": "/nowhere", "topics": [{"name": topic, "partitions": [0]}]},
                {"path": str(source), "topics": [{"name": f"{topic}-none", "partitions": [0]}]},
            ]
        },
        node_id=3,
        version=2,
    )
    errors = {
        (str(t.topic_name), int(p.partition_index)): int(p.error_code)
        for t in answer.results
        for p in t.partitions
    }
    assert errors == {(topic, 0): 57, (f"{topic}-none", 0): 3}
