"""`ktool transactions` against one knode: list, describe, describe-producers, and a
hanging transaction found and aborted.

The hanging transaction is made the way it happens in the field: a transactional batch in
a partition's log whose producer no coordinator knows (here written into the stopped node's
log, an hour old). It holds the last stable offset, so a read_committed consumer sees
nothing after it; `find-hanging` lists it, `abort --start-offset` writes the ABORT marker
and the consumer moves on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from tests.cluster.test_transactions import consume_all, create_topic, producer
from tests.support.cluster import KnodeCluster
from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

HANGING_PRODUCER = 987_654


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("knode-txn-ktool")
    settings = [
        "group.initial.rebalance.delay.ms=0",
        "transaction.state.log.num.partitions=2",
        "offsets.topic.num.partitions=2",
    ]
    with KnodeCluster(base, node_count=1, settings=settings) as cluster:
        yield cluster


def ktool(node: KnodeCluster, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["transactions", *args, "--bootstrap-server", node.bootstrap_servers]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def table(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.strip().splitlines()]


def test_list_describe_and_describe_producers(node: KnodeCluster) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "kt-txn", 1)
    p = producer(bootstrap, "kt-tx")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("kt-txn", b"open")
    p.flush(10)
    code, out = ktool(node, "list")
    assert code == 0
    rows = table(out)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert rows[1][:2] == ["kt-tx", "1"] and rows[1][3] == "Ongoing"
    code, out = ktool(node, "describe", "--transactional-id", "kt-tx")
    assert code == 0
    header, row = table(out)
    assert header[0] == "CoordinatorId" and header[-1] == "TopicPartitions"
    assert row[4] == "Ongoing" and row[-1] == "kt-txn-0"
    code, out = ktool(node, "describe-producers", "--topic", "kt-txn", "--partition", "0")
    assert code == 0
    header, row = table(out)
    assert header == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert row[-1] == "0"
    p.commit_transaction(30)
    code, out = ktool(node, "describe-producers", "--topic", "kt-txn", "--partition", "0")
    assert table(out)[1][-1] == "None"
    code, _ = ktool(node, "describe", "--transactional-id", "no-such-id")
    assert code == 1


def test_hanging_transaction_is_found_and_aborted(node: KnodeCluster) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap, "kt-hang", 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("kt-hang", b"before")
    assert plain.flush(10) == 0
    node.stop(1)
    hour_ago = int(time.time() * 1000) - 3_600_000
    log = PartitionLog.open(
        node.nodes[1].data_dir / "kt-hang-0", LogConfig(), now_ms=hour_ago, had_clean_shutdown=True
    )
    start_offset = log.log_end_offset
    log.append_as_leader(
        build_batch(
            [NewRecord(b"hanging", timestamp=hour_ago)],
            producer_id=HANGING_PRODUCER,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        ),
        leader_epoch=log.latest_epoch or 0,
        now_ms=hour_ago,
    )
    log.close()
    node.start(1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("kt-hang", b"after")
    assert plain.flush(30) == 0
    code, out = ktool(node, "find-hanging", "--topic", "kt-hang")
    assert code == 0
    rows = table(out)
    assert rows[0][:6] == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
    ]
    assert rows[1][:3] == ["kt-hang", "0", str(HANGING_PRODUCER)]
    assert rows[1][5] == str(start_offset)
    assert consume_all(bootstrap, "kt-hang", "read_committed", 1) == ["before"]  # stuck
    code, _ = ktool(
        node, "abort", "--topic", "kt-hang", "--partition", "0", "--start-offset", str(start_offset)
    )
    assert code == 0
    assert consume_all(bootstrap, "kt-hang", "read_committed", 2) == ["before", "after"]
    code, out = ktool(node, "find-hanging", "--topic", "kt-hang")
    assert len(table(out)) == 1  # the header only
