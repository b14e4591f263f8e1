"""Issue 14 item 3: the transaction APIs check Kafka's ACLs, on a real knode.

One knode with an ``AclAuthorizer`` and SASL PLAIN users (`test_acls.acl_node_settings`):

* alice may WRITE ``txn-out``, READ ``txn-in``, WRITE her transactional id ``alice-tx`` and
  READ her group ``alice-group``: her confluent-kafka consume-transform-produce transaction
  commits;
* bob may WRITE ``txn-out`` and only DESCRIBE his transactional id ``bob-tx``: confluent-kafka's
  ``init_transactions`` fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
* hand-built requests show each API's check and error code (AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions,
  DescribeProducers, WriteTxnMarkers) and that an unauthorized transactional Produce never
  reaches the transaction coordinator (its first use creates ``__transaction_state``).

The first test must see a node whose coordinator was never used: keep it first.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.add_partitions_to_txn.v4 import request as add_v4
from kio.schema.describe_producers.v0 import request as producers_v0
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.txn_offset_commit.v3 import request as commit_v3
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.schema.write_txn_markers.v1 import request as markers_v1
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from tests.cluster.test_acls import SecuredNode, _binding, acl_node_settings
from tests.cluster.test_transactions_wire import init
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from trafka.log.records import NewRecord, build_batch
from trafka.net.client import KafkaConnection
from trafka.net.client_security import ClientSecurity

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

IN, OUT, HIDDEN = "txn-in", "txn-out", "txn-hidden"
ALICE_TX, BOB_TX, GROUP = "alice-tx", "bob-tx", "alice-group"
TXN_STATE = "__transaction_state"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    base: Path = tmp_path_factory.mktemp("acls-txn")
    cluster = KnodeCluster(base, node_count=1, start=False)
    node = cluster.nodes[1]
    sasl_port = free_port()
    node.extra = [
        *acl_node_settings(sasl_port, node.port),
        "transaction.state.log.num.partitions=1",
        "transaction.max.timeout.ms=60000",
    ]
    with cluster:
        cluster.start_all()
        secured = SecuredNode(cluster, sasl_port)
        _setup(secured)
        yield secured


def _setup(node: SecuredNode) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclOperation,
        AdminClient,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient(node.client("admin"))
    topics = [NewTopic(IN, 1, 1), NewTopic(OUT, 1, 1), NewTopic(HIDDEN, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(60)
    topic, txn, group = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.GROUP
    bindings = [
        _binding(topic, OUT, "User:alice", AclOperation.WRITE),
        _binding(topic, IN, "User:alice", AclOperation.READ),
        _binding(txn, ALICE_TX, "User:alice", AclOperation.WRITE),
        _binding(group, GROUP, "User:alice", AclOperation.READ),
        _binding(topic, OUT, "User:bob", AclOperation.WRITE),
        _binding(txn, BOB_TX, "User:bob", AclOperation.DESCRIBE),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(30) is None
    source = _producer(node, "admin")
    for number in range(5):
        source.produce(IN, f"in-{number}".encode())
    assert source.flush(30) == 0


def _producer(node: SecuredNode, user: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer(node.client(user, **{"message.timeout.ms": 20000, **extra}))


def _topics(node: SecuredNode) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(node.client("admin")).list_topics(timeout=30).topics)


async def _connect(node: SecuredNode, user: str) -> KafkaConnection:
    security = ClientSecurity(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        username=user,
        password=f"{user}-secret",
    )
    return await KafkaConnection.connect(
        "127.0.0.1", node.sasl_port, client_id=f"acl-txn-{user}", security=security
    )


def _txn_produce(transactional_id: str, topic: str, pid: int = 4242, epoch: int = 0) -> Any:
    batch = build_batch(
        [NewRecord(b"v", timestamp=1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    return produce_v9.ProduceRequest(
        transactional_id=TransactionalId(transactional_id),
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(index=i32(0), records=Records(batch)),
                ),
            ),
        ),
    )


def _produce_code(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


async def test_an_unauthorized_transactional_produce_never_reaches_the_coordinator(
    secured: SecuredNode,
) -> None:
    assert TXN_STATE not in _topics(secured), "the coordinator was used before this test"
    bob, alice = await _connect(secured, "bob"), await _connect(secured, "alice")
    try:
        # bob may not WRITE bob-tx: the whole request is refused, nothing is verified.
        response = await bob.request(_txn_produce(BOB_TX, OUT))
        assert _produce_code(response) == int(ErrorCode.transactional_id_authorization_failed)
        # alice may not WRITE txn-hidden: TOPIC_AUTHORIZATION_FAILED, nothing is verified.
        response = await alice.request(_txn_produce(ALICE_TX, HIDDEN))
        assert _produce_code(response) == int(ErrorCode.topic_authorization_failed)
        assert TXN_STATE not in _topics(secured)
        # An authorized one is verified with the coordinator (which creates its topic): the
        # partition is in no transaction, so INVALID_TXN_STATE (KIP-890 part 1), or
        # NOT_ENOUGH_REPLICAS while the new coordinator loads.
        response = await alice.request(_txn_produce(ALICE_TX, OUT))
        assert _produce_code(response) in (
            int(ErrorCode.invalid_txn_state),
            int(ErrorCode.not_enough_replicas),
        )
        assert TXN_STATE in _topics(secured)
    finally:
        await bob.close()
        await alice.close()


def test_confluent_kafka_without_write_on_its_transactional_id_is_refused(
    secured: SecuredNode,
) -> None:
    from confluent_kafka import KafkaError, KafkaException

    producer = _producer(secured, "bob", **{"transactional.id": BOB_TX})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(30)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_confluent_kafka_transaction_commits_with_the_right_acls(secured: SecuredNode) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        secured.client(
            "alice",
            **{
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    consumer.subscribe([IN])
    producer = _producer(secured, "alice", **{"transactional.id": ALICE_TX})
    producer.init_transactions(30)
    try:
        messages: list[Any] = []
        for _ in range(60):
            messages += [m for m in consumer.consume(10, 1.0) if not m.error()]
            if len(messages) >= 5:
                break
        assert len(messages) == 5
        producer.begin_transaction()
        for message in messages:
            producer.produce(OUT, b"copied-" + message.value())
        producer.send_offsets_to_transaction(
            [TopicPartition(IN, 0, messages[-1].offset() + 1)],
            consumer.consumer_group_metadata(),
            30,
        )
        producer.commit_transaction(30)
    finally:
        consumer.close()
    check = Consumer(
        secured.client(
            "admin",
            **{"group.id": "admin-check", "isolation.level": "read_committed"},
        )
    )
    check.assign([TopicPartition(OUT, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(30):
            values += [m.value() or b"" for m in check.consume(10, 1.0) if not m.error()]
            if len(values) >= 5:
                break
    finally:
        check.close()
    assert sorted(values) == sorted(b"copied-in-%d" % n for n in range(5))
    admin_view = Consumer(secured.client("admin", **{"group.id": GROUP}))
    try:
        committed = admin_view.committed([TopicPartition(IN, 0)], 30)
    finally:
        admin_view.close()
    assert committed[0].offset == 5


def _add_v3(transactional_id: str, pid: int, topics: dict[str, int]) -> Any:
    return add_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(transactional_id),
        v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(0),
        v3_and_below_topics=tuple(
            add_v3.AddPartitionsToTxnTopic(name=TopicName(name), partitions=(i32(partition),))
            for name, partition in topics.items()
        ),
    )


def _add_codes(response: Any) -> dict[str, int]:
    return {
        str(topic.name): int(topic.results_by_partition[0].partition_error_code)
        for topic in response.results_by_topic_v3_and_below
    }


def _txn_commit(transactional_id: str, group: str, pid: int, topic: str) -> Any:
    return commit_v3.TxnOffsetCommitRequest(
        transactional_id=TransactionalId(transactional_id),
        group_id=GroupId(group),
        producer_id=ProducerId(pid),
        producer_epoch=i16(0),
        topics=(
            commit_v3.TxnOffsetCommitRequestTopic(
                name=TopicName(topic),
                partitions=(
                    commit_v3.TxnOffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(1), committed_metadata=None
                    ),
                ),
            ),
        ),
    )


def _commit_code(response: Any) -> int:
    return int(response.topics[0].partitions[0].error_code)


async def test_each_transaction_api_checks_kafkas_acl(secured: SecuredNode) -> None:
    bob, alice = await _connect(secured, "bob"), await _connect(secured, "alice")
    try:
        with trio.fail_after(120):
            started = await init(alice, ALICE_TX)
        assert int(started.error_code) == 0
        pid = int(started.producer_id)
        refused_txn = int(ErrorCode.transactional_id_authorization_failed)

        # AddPartitionsToTxn: WRITE on the id, then WRITE on each topic.
        response = await bob.request(_add_v3(ALICE_TX, pid, {OUT: 0}))
        assert _add_codes(response) == {OUT: refused_txn}
        response = await alice.request(_add_v3(ALICE_TX, pid, {OUT: 0, HIDDEN: 0}))
        assert _add_codes(response) == {
            OUT: int(ErrorCode.operation_not_attempted),
            HIDDEN: int(ErrorCode.topic_authorization_failed),
        }
        # v4+ is for brokers only: CLUSTER_ACTION.
        response = await alice.request(
            add_v4.AddPartitionsToTxnRequest(
                transactions=(
                    add_v4.AddPartitionsToTxnTransaction(
                        transactional_id=TransactionalId(ALICE_TX),
                        producer_id=ProducerId(pid),
                        producer_epoch=i16(0),
                        verify_only=True,
                        topics=(add_v4.AddPartitionsToTxnTopic(name=TopicName(OUT)),),
                    ),
                )
            )
        )
        assert int(response.error_code) == int(ErrorCode.cluster_authorization_failed)
        assert not response.results_by_transaction

        # AddOffsetsToTxn: WRITE on the id, then READ on the group.
        def add_offsets(group: str) -> AddOffsetsToTxnRequest:
            return AddOffsetsToTxnRequest(
                transactional_id=TransactionalId(ALICE_TX),
                producer_id=ProducerId(pid),
                producer_epoch=i16(0),
                group_id=GroupId(group),
            )

        assert int((await bob.request(add_offsets(GROUP))).error_code) == refused_txn
        response = await alice.request(add_offsets("not-alices"))
        assert int(response.error_code) == int(ErrorCode.group_authorization_failed)

        # EndTxn: WRITE on the id (bob cannot end alice's transaction).
        end = EndTxnRequest(
            transactional_id=TransactionalId(ALICE_TX),
            producer_id=ProducerId(pid),
            producer_epoch=i16(0),
            committed=True,
        )
        assert int((await bob.request(end)).error_code) == refused_txn

        # TxnOffsetCommit: WRITE on the id, READ on the group, READ on each topic.
        response = await bob.request(_txn_commit(ALICE_TX, GROUP, pid, IN))
        assert _commit_code(response) == refused_txn
        response = await alice.request(_txn_commit(ALICE_TX, "not-alices", pid, IN))
        assert _commit_code(response) == int(ErrorCode.group_authorization_failed)
        response = await alice.request(_txn_commit(ALICE_TX, GROUP, pid, HIDDEN))
        assert _commit_code(response) == int(ErrorCode.topic_authorization_failed)

        # DescribeTransactions: DESCRIBE on each id; ListTransactions leaves the others out.
        describe = DescribeTransactionsRequest(transactional_ids=(TransactionalId(ALICE_TX),))
        (state,) = (await bob.request(describe)).transaction_states
        assert int(state.error_code) == refused_txn
        (state,) = (await alice.request(describe)).transaction_states
        assert int(state.error_code) == 0 and int(state.producer_id) == pid
        listing = ListTransactionsRequest(state_filters=(), producer_id_filters=())
        alice_list = (await alice.request(listing)).transaction_states
        bob_list = (await bob.request(listing)).transaction_states
        assert ALICE_TX in [str(t.transactional_id) for t in alice_list]
        assert ALICE_TX not in [str(t.transactional_id) for t in bob_list]

        # DescribeProducers: READ on the topic.
        producers = producers_v0.DescribeProducersRequest(
            topics=(producers_v0.TopicRequest(name=TopicName(IN), partition_indexes=(i32(0),)),)
        )
        response = await bob.request(producers)
        assert int(response.topics[0].partitions[0].error_code) == int(
            ErrorCode.topic_authorization_failed
        )
        response = await alice.request(producers)
        assert int(response.topics[0].partitions[0].error_code) == 0

        # WriteTxnMarkers: CLUSTER_ACTION (a client is no broker).
        markers = markers_v1.WriteTxnMarkersRequest(
            markers=(
                markers_v1.WritableTxnMarker(
                    producer_id=ProducerId(pid),
                    producer_epoch=i16(0),
                    transaction_result=False,
                    coordinator_epoch=i32(0),
                    topics=(
                        markers_v1.WritableTxnMarkerTopic(
                            name=TopicName(OUT), partition_indexes=(i32(0),)
                        ),
                    ),
                ),
            )
        )
        response = await alice.request(markers)
        assert int(response.markers[0].topics[0].partitions[0].error_code) == int(
            ErrorCode.cluster_authorization_failed
        )
    finally:
        await bob.close()
        await alice.close()
