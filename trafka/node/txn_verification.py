"""KIP-890 part 1 on the produce path: a transactional batch is appended only to a
partition the coordinator knows is in the producer's open transaction.

Without this, a client that writes a transactional batch to a partition it never added
(a bug, or a late retry after its transaction was aborted) leaves an open transaction in
that partition that no marker will ever close: a hanging transaction, which stops the
last stable offset and so every read_committed consumer.

Kafka verifies the first transactional batch of each transaction per partition; so do we:
when the log already has an open transaction of this producer and epoch, its first batch
was verified. Errors as Kafka's ReplicaManager returns them to producers: the retriable
coordinator errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) become NOT_ENOUGH_REPLICAS so every
client retries; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; the rest (a partition not
in the transaction, an unknown producer id) INVALID_TXN_STATE.

Not implemented: Kafka's VerificationGuard (a marker written between the verification and
the append is not detected; the window is one append).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.log.batch import parse_header
from trafka.log.errors import CorruptRecordError
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.topics import TopicManager
from trafka.node.txn_service import TransactionService
from trafka.txn.coordinator import TopicPartition

_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
    }
)


async def verify_transactional_batch(
    *,
    transactions: TransactionService,
    topics: TopicManager,
    replicas: ReplicaManager,
    node_id: int,
    transactional_id: str | None,
    topic: str,
    partition: int,
    records: bytes,
) -> int:
    """0 if the batch may be appended (or needs no verification), else a Produce error."""
    try:
        header = parse_header(records)
    except CorruptRecordError:
        return 0  # the append reports it
    if not header.is_transactional or header.is_control or header.producer_id < 0:
        return 0
    if not transactional_id:
        return int(ErrorCode.invalid_txn_state)  # Kafka: transactional batch, no id
    state = topics.partition(topic, partition)
    if state is None or state.leader != node_id:
        return 0  # the append answers NOT_LEADER / UNKNOWN_TOPIC
    log = replicas.get_or_create_log(topic, partition)
    with log.lock:
        entry = log.producer_state.producers.get(header.producer_id)
        if (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.producer_epoch == header.producer_epoch
        ):
            return 0
    error = await transactions.verify_before_append(
        transactional_id,
        header.producer_id,
        header.producer_epoch,
        TopicPartition(topic, partition),
    )
    if error == ErrorCode.none:
        return 0
    if error in _RETRIABLE:
        return int(ErrorCode.not_enough_replicas)
    if error == ErrorCode.producer_fenced:
        return int(ErrorCode.invalid_producer_epoch)
    return int(ErrorCode.invalid_txn_state)
