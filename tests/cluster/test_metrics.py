"""The Prometheus endpoint of a real knode (docs/metrics.md): a known workload with
confluent-kafka, then a scrape over HTTP whose figures must match it."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MESSAGES = 300
PARTITIONS = 3

FAMILIES = [
    # BrokerTopicMetrics
    "kafka_server_brokertopicmetrics_messagesin",
    "kafka_server_brokertopicmetrics_bytesin",
    "kafka_server_brokertopicmetrics_bytesout",
    "kafka_server_brokertopicmetrics_failedproducerequests",
    "kafka_server_brokertopicmetrics_failedfetchrequests",
    # RequestMetrics
    "kafka_network_requestmetrics_requests",
    "kafka_network_requestmetrics_errors",
    "kafka_network_requestmetrics_totaltimems",
    "kafka_network_requestmetrics_requestqueuetimems",
    "kafka_network_requestmetrics_localtimems",
    "kafka_network_requestmetrics_remotetimems",
    "kafka_network_requestmetrics_responsesendtimems",
    # ReplicaManager
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_isrshrinks",
    "kafka_server_replicamanager_isrexpands",
    # controller
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_globaltopiccount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_controllerstats_leaderelectionrateandtimems",
    "kafka_controller_controllerstats_uncleanleaderelections",
    # group coordinator
    "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
    "kafka_coordinator_group_groupmetadatamanager_numgroupsempty",
    "kafka_coordinator_group_groupmetadatamanager_numgroups",
    "kafka_server_group_coordinator_metrics_offset_commit_count",
    "kafka_server_group_coordinator_metrics_group_completed_rebalance_count",
    # Log
    "kafka_log_log_size",
    "kafka_log_log_numlogsegments",
    "kafka_log_log_logendoffset",
    "kafka_log_log_logstartoffset",
    # network
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_socket_server_metrics_connection_creation",
    "kafka_server_socket_server_metrics_connection_close",
    # quorum
    "kafka_server_raft_metrics_current_leader",
    "kafka_server_raft_metrics_current_epoch",
    "kafka_server_raft_metrics_high_watermark",
    "kafka_server_raft_metrics_uncommitted_entries",
    "kafka_server_raft_metrics_commit_latency_ms",
    # process (prometheus-client's collectors)
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "python_gc_objects_collected",
    "python_info",
]


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """family -> {sorted labels (with the sample's name as "__name__"): value}."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        samples = out.setdefault(family.name, {})
        for sample in family.samples:
            labels = tuple(sorted({**sample.labels, "__name__": sample.name}.items()))
            samples[labels] = sample.value
    return out


def value(
    metrics: dict[str, dict[tuple[tuple[str, str], ...], float]],
    family: str,
    sample: str,
    **labels: str,
) -> float:
    key = tuple(sorted({**labels, "__name__": sample}.items()))
    return metrics[family][key]


@pytest.fixture(scope="module")
def metrics_node(tmp_path_factory: pytest.TempPathFactory) -> object:
    port = free_port()
    with KnodeCluster(
        tmp_path_factory.mktemp("metrics"),
        node_count=1,
        settings=[
            "group.initial.rebalance.delay.ms=0",
            f"metrics.listener=http://127.0.0.1:{port}",
        ],
    ) as cluster:
        yield cluster, f"http://127.0.0.1:{port}/metrics"


def test_scrape_matches_a_known_workload(metrics_node: tuple[KnodeCluster, str]) -> None:
    cluster, url = metrics_node
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "acks": "all"}
    )
    delivered: Counter[int] = Counter()
    failures: list[object] = []

    def on_delivery(error: object, message: object) -> None:
        if error is not None:
            failures.append(error)
        else:
            delivered[message.partition()] += 1  # type: ignore[attr-defined]

    for i in range(MESSAGES):
        producer.produce(
            topic, value=b"v" * (10 + i % 50), key=str(i).encode(), on_delivery=on_delivery
        )
    assert producer.flush(60) == 0
    assert not failures and sum(delivered.values()) == MESSAGES

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received = 0
    try:
        deadline_polls = 0
        while received < MESSAGES and deadline_polls < 600:
            message = consumer.poll(0.5)
            deadline_polls += 1
            if message is not None and message.error() is None:
                received += 1
        assert received == MESSAGES
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    metrics = scrape(url)
    missing = [name for name in FAMILIES if name not in metrics]
    assert not missing, f"families missing from the scrape: {missing}"

    btm = "kafka_server_brokertopicmetrics_"
    assert value(metrics, btm + "messagesin", btm + "messagesin_total", topic=topic) == MESSAGES
    bytes_in = value(metrics, btm + "bytesin", btm + "bytesin_total", topic=topic)
    sizes = {
        p: value(metrics, "kafka_log_log_size", "kafka_log_log_size", topic=topic, partition=str(p))
        for p in range(PARTITIONS)
    }
    # Uncompressed batches are stored as received: the bytes in are the log's bytes.
    assert bytes_in == sum(sizes.values()) > 0
    assert value(metrics, btm + "bytesout", btm + "bytesout_total", topic=topic) >= bytes_in
    assert value(metrics, btm + "messagesin", btm + "messagesin_total") >= MESSAGES
    for p in range(PARTITIONS):
        leo = value(
            metrics,
            "kafka_log_log_logendoffset",
            "kafka_log_log_logendoffset",
            topic=topic,
            partition=str(p),
        )
        assert leo == delivered[p]
        assert (
            value(
                metrics,
                "kafka_log_log_logstartoffset",
                "kafka_log_log_logstartoffset",
                topic=topic,
                partition=str(p),
            )
            == 0
        )
    req = "kafka_network_requestmetrics_"
    produces = value(metrics, req + "requests", req + "requests_total", request="Produce")
    assert 1 <= produces <= MESSAGES
    assert (
        value(metrics, req + "errors", req + "errors_total", request="Produce", error="NONE")
        >= PARTITIONS
    )
    assert (
        value(metrics, req + "totaltimems", req + "totaltimems_count", request="Produce")
        == produces
    )
    assert value(metrics, req + "requests", req + "requests_total", request="Fetch") >= 1
    rm = "kafka_server_replicamanager_"
    assert value(metrics, rm + "leadercount", rm + "leadercount") >= PARTITIONS
    assert value(metrics, rm + "underreplicatedpartitions", rm + "underreplicatedpartitions") == 0
    ctrl = "kafka_controller_kafkacontroller_"
    assert value(metrics, ctrl + "activecontrollercount", ctrl + "activecontrollercount") == 1
    assert value(metrics, ctrl + "globaltopiccount", ctrl + "globaltopiccount") >= 1
    elections = "kafka_controller_controllerstats_leaderelectionrateandtimems"
    # The new topic's partitions got their first leaders from this node's controller.
    assert value(metrics, elections, elections + "_count") >= PARTITIONS
    unclean = "kafka_controller_controllerstats_uncleanleaderelections"
    assert value(metrics, unclean, unclean + "_total") == 0
    gcm = "kafka_server_group_coordinator_metrics_"
    assert value(metrics, gcm + "offset_commit_count", gcm + "offset_commit_count_total") >= 1
    assert (
        value(
            metrics,
            gcm + "group_completed_rebalance_count",
            gcm + "group_completed_rebalance_count_total",
        )
        >= 1
    )
    sock = "kafka_server_socket_server_metrics_"
    assert (
        value(
            metrics,
            sock + "connection_creation",
            sock + "connection_creation_total",
            listener="PLAINTEXT",
        )
        >= 2
    )
    assert (
        value(
            metrics,
            "kafka_server_raft_metrics_current_leader",
            "kafka_server_raft_metrics_current_leader",
        )
        == 1
    )
    # Creating the topic and registering the node were quorum writes of this node.
    commits = "kafka_server_raft_metrics_commit_latency_ms"
    assert value(metrics, commits, commits + "_count") >= 1
    assert (
        0
        < value(metrics, commits, commits + "_sum")
        < 60_000 * value(metrics, commits, commits + "_count")
    )


@pytest.mark.parametrize("how", ["url", "bootstrap"])
def test_ktool_metrics_prints_headline_figures(
    metrics_node: tuple[KnodeCluster, str], how: str
) -> None:
    cluster, url = metrics_node
    where = ["--url", url] if how == "url" else ["--bootstrap-server", cluster.bootstrap_servers]
    out = subprocess.run(
        [sys.executable, "-m", "trafka.tools.ktool", "metrics", *where],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines()[1:] if line.strip())
    assert lines["ActiveControllerCount"].strip() == "1"
    assert int(lines["MessagesIn"]) >= 0
    assert out.stdout.splitlines()[0] == f"Metrics of {url}"


def test_ktool_metrics_without_endpoint_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trafka.tools.ktool",
            "metrics",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("Error: cannot scrape") and len(out.stderr.splitlines()) == 1
