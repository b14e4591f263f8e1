"""Transactional producers of kafka-python and kafkajs against one knode.

Each commits one transaction and aborts another; a read_committed consumer (confluent-kafka)
sees exactly the committed records, a read_uncommitted one both.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.test_kafkajs import KAFKAJS, _node
from tests.cluster.test_transactions import consume_all, create_topic
from tests.support.cluster import KnodeCluster

with warnings.catch_warnings():  # kafka-python 3.0.12 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

COMMITTED = [f"committed-{i}" for i in range(10)]
ABORTED = [f"aborted-{i}" for i in range(10)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("knode-txn-clients")
    settings = [
        "group.initial.rebalance.delay.ms=0",
        "transaction.state.log.num.partitions=4",
        "offsets.topic.num.partitions=4",
    ]
    with KnodeCluster(base, node_count=1, settings=settings) as cluster:
        yield cluster


def check_visibility(bootstrap: str, topic: str) -> None:
    assert sorted(consume_all(bootstrap, topic, "read_committed", 10)) == sorted(COMMITTED)
    everything = consume_all(bootstrap, topic, "read_uncommitted", 20)
    assert sorted(everything) == sorted(COMMITTED + ABORTED)


def test_kafka_python_transactional_producer(node: KnodeCluster) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "kp-txn", 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-txn")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in COMMITTED:
            producer.send("kp-txn", value.encode())
        producer.commit_transaction()
        producer.begin_transaction()
        for value in ABORTED:
            producer.send("kp-txn", value.encode())
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    check_visibility(bootstrap, "kp-txn")


def test_kafkajs_transactional_producer(node: KnodeCluster) -> None:
    executable = _node()
    script = Path(__file__).with_name("kafkajs_transactions.js")
    completed = subprocess.run(
        [executable, str(script), node.bootstrap_servers, str(KAFKAJS), "kjs-txn"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == {"ok": True}
    check_visibility(node.bootstrap_servers, "kjs-txn")
