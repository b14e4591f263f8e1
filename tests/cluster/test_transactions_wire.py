"""Transactions over the wire with hand-built requests: Kafka's error code for bad input.

Out-of-order and stale requests (EndTxn with no transaction, a stale epoch, an unknown
transactional id), a transactional batch for a partition not added to the transaction
(KIP-890 part 1: refused, so no hanging transaction), a forged control batch, an
over-long timeout; then DescribeTransactions, ListTransactions and DescribeProducers show a
transaction in progress.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.describe_producers.v0 import request as producers_v0
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta

from tests.cluster.test_transactions import create_topic
from tests.support.cluster import KnodeCluster
from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.records import NewRecord, build_batch
from trafka.net.client import KafkaConnection

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TXN = "wire-tx"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("knode-txn-wire")
    settings = ["transaction.state.log.num.partitions=2", "transaction.max.timeout.ms=60000"]
    with KnodeCluster(base, node_count=1, settings=settings) as cluster:
        create_topic(cluster.bootstrap_servers, "wire", 2)
        yield cluster


async def connect(node: KnodeCluster) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", node.nodes[1].port, client_id="wire")


def produce(transactional_id: str | None, partition: int, records: bytes) -> Any:
    return produce_v9.ProduceRequest(
        transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName("wire"),
                partition_data=(
                    produce_v9.PartitionProduceData(index=i32(partition), records=Records(records)),
                ),
            ),
        ),
    )


def produce_code(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


def txn_batch(pid: int, epoch: int, sequence: int) -> bytes:
    return build_batch(
        [NewRecord(b"v", timestamp=1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def add(pid: int, epoch: int, partition: int, txn: str = TXN) -> Any:
    return add_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn),
        v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(
            add_v3.AddPartitionsToTxnTopic(name=TopicName("wire"), partitions=(i32(partition),)),
        ),
    )


def add_code(response: Any) -> int:
    return int(
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    )


def end(pid: int, epoch: int, committed: bool, txn: str = TXN) -> EndTxnRequest:
    return EndTxnRequest(
        transactional_id=TransactionalId(txn),
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        committed=committed,
    )


async def init(connection: KafkaConnection, txn: str, timeout_ms: int = 10_000) -> Any:
    with trio.fail_after(60):
        while True:
            found = await connection.request(
                FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(txn,))
            )
            if int(found.coordinators[0].error_code) == 0:
                break
            await trio.sleep(0.2)
        while True:
            response = await connection.request(
                InitProducerIdRequest(
                    transactional_id=TransactionalId(txn),
                    transaction_timeout=i32Timedelta.parse(
                        datetime.timedelta(milliseconds=timeout_ms)
                    ),
                )
            )
            if int(response.error_code) not in (
                int(ErrorCode.coordinator_load_in_progress),
                int(ErrorCode.not_coordinator),
                int(ErrorCode.coordinator_not_available),
                int(ErrorCode.concurrent_transactions),
            ):
                return response
            await trio.sleep(0.2)


async def test_bad_input_gets_kafkas_error_codes(node: KnodeCluster) -> None:
    connection = await connect(node)
    try:
        too_long = await init(connection, "wire-too-long", timeout_ms=60_001)
        assert int(too_long.error_code) == int(ErrorCode.invalid_transaction_timeout)
        started = await init(connection, TXN)
        assert int(started.error_code) == 0
        pid, epoch = int(started.producer_id), int(started.producer_epoch)

        # No transaction open yet.
        response = await connection.request(end(pid, epoch, True))
        assert int(response.error_code) == int(ErrorCode.invalid_txn_state)
        response = await connection.request(end(pid, epoch, True, txn="wire-unknown"))
        assert int(response.error_code) == int(ErrorCode.invalid_producer_id_mapping)
        # A transactional batch for a partition not added: refused (KIP-890 part 1).
        response = await connection.request(produce(TXN, 0, txn_batch(pid, epoch, 0)))
        assert produce_code(response) == int(ErrorCode.invalid_txn_state)
        # A forged control batch from a client.
        forged = build_end_transaction_batch(
            EndTransactionMarker(ControlRecordType.COMMIT, 0),
            producer_id=pid,
            producer_epoch=epoch,
            now_ms=1_700_000_000_000,
        )
        response = await connection.request(produce(TXN, 0, forged))
        assert produce_code(response) == int(ErrorCode.invalid_record)
        # Stale epoch and foreign producer id on AddPartitionsToTxn.
        assert add_code(await connection.request(add(pid, epoch + 1, 0))) == int(
            ErrorCode.producer_fenced
        )
        assert add_code(await connection.request(add(pid + 1, epoch, 0))) == int(
            ErrorCode.invalid_producer_id_mapping
        )
        # The real thing: add, produce, and the admin APIs see it open.
        assert add_code(await connection.request(add(pid, epoch, 0))) == 0
        response = await connection.request(produce(TXN, 0, txn_batch(pid, epoch, 0)))
        assert produce_code(response) == 0
        response = await connection.request(produce(TXN, 1, txn_batch(pid, epoch, 0)))
        assert produce_code(response) == int(ErrorCode.invalid_txn_state)  # partition 1 not added

        described = await connection.request(
            DescribeTransactionsRequest(
                transactional_ids=(TransactionalId(TXN), TransactionalId("nope"))
            )
        )
        state, missing = described.transaction_states
        assert (state.transaction_state, int(state.producer_id)) == ("Ongoing", pid)
        assert [(str(t.topic), list(t.partitions)) for t in state.topics] == [("wire", [0])]
        assert int(missing.error_code) == int(ErrorCode.transactional_id_not_found)
        listed = await connection.request(
            ListTransactionsRequest(state_filters=("Ongoing", "Bogus"), producer_id_filters=())
        )
        assert [str(t.transactional_id) for t in listed.transaction_states] == [TXN]
        assert list(listed.unknown_state_filters) == ["Bogus"]
        producers = await connection.request(
            producers_v0.DescribeProducersRequest(
                topics=(
                    producers_v0.TopicRequest(name=TopicName("wire"), partition_indexes=(i32(0),)),
                )
            )
        )
        (active,) = producers.topics[0].partitions[0].active_producers
        assert (int(active.producer_id), int(active.current_txn_start_offset)) == (pid, 0)

        # EndTxn with a stale epoch, then the right one; a retry answers NONE.
        response = await connection.request(end(pid, epoch + 1, True))
        assert int(response.error_code) == int(ErrorCode.producer_fenced)
        assert int((await connection.request(end(pid, epoch, True))).error_code) == 0
        with trio.fail_after(30):
            while True:  # CONCURRENT_TRANSACTIONS until the marker is written
                retry = await connection.request(end(pid, epoch, True))
                if int(retry.error_code) == 0:
                    break
                assert int(retry.error_code) == int(ErrorCode.concurrent_transactions)
                await trio.sleep(0.1)
        response = await connection.request(end(pid, epoch, False))
        assert int(response.error_code) == int(ErrorCode.invalid_txn_state)
        producers = await connection.request(
            producers_v0.DescribeProducersRequest(
                topics=(
                    producers_v0.TopicRequest(name=TopicName("wire"), partition_indexes=(i32(0),)),
                )
            )
        )
        (active,) = producers.topics[0].partitions[0].active_producers
        assert int(active.current_txn_start_offset) == -1
    finally:
        await connection.close()
