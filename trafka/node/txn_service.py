"""The trio shell around the pure transaction coordinator (`trafka.txn`), one per broker.

What it adds to the logic (STYLE 1: keep this short; it mirrors `group_service.py`):

* **Where a transactional id lives**: `partition_for(transactional_id, partitions of
  __transaction_state)` (Kafka hashes transactional ids as it hashes group ids); this node
  coordinates the ids of the `__transaction_state` partitions it leads and answers
  NOT_COORDINATOR for the others.
* **`__transaction_state`** is created on the first FindCoordinator for a transaction
  (compacted, `transaction.state.log.num.partitions` partitions, replication factor
  `transaction.state.log.replication.factor` capped by the live brokers,
  `min.insync.replicas` = `transaction.state.log.min.isr` capped by that factor,
  `transaction.state.log.segment.bytes`).
* **Loading**: the first request for a partition this node leads (or leads in a new leader
  epoch, after a failover) reads it from log start to log end and rebuilds the coordinator
  with `TransactionCoordinator.load`, its leader epoch being the coordinator epoch; the
  transactions found preparing get their markers (re)sent. A partition whose leadership
  moved away is unloaded.
* **Records** of every call are appended with acks=all before the answer is released; an
  append failure answers Kafka's mapped error and unloads the partition (the next request
  reloads it from the log).
* **Markers**: each `MarkerRequest` runs as a task: the partitions are grouped by leader;
  this node's own partitions are written through the replica manager, others' by
  WriteTxnMarkers over the inter-broker channel; failed partitions are retried (leaders
  move, followers catch up) until each has its marker, a deleted topic's partitions being
  dropped, and the task gives up if this node stops coordinating the id. Then
  `complete_markers` writes CompleteCommit/CompleteAbort.
* **Time**: a timer task sleeps until the earliest deadline of the loaded coordinators (or
  1 s, to notice leadership changes) and calls `tick`.

Wiring: the broker (the composition root) builds the service, puts it in `NodeServices`
(`transactions`) and runs `service.run` in its nursery before the listener opens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
from kio.schema.add_partitions_to_txn.v4.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import i16, i32

from trafka.group.config import OFFSETS_TOPIC
from trafka.log.records import NewRecord, build_batch
from trafka.net.client import ClientError, KafkaConnection
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.coordinator_key import partition_of_key
from trafka.node.group_service import GroupService, _iter_batches
from trafka.node.metadata_cache import BrokerInfo, MetadataCache
from trafka.node.producer_ids import ProducerIdManager
from trafka.node.replication.ids import TopicPartition as ReplicaPartition
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.security.inter_broker import InterBrokerClient
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicError, TopicManager
from trafka.txn.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from trafka.txn.coordinator import (
    Effects,
    InitProducerIdResult,
    MarkerRequest,
    TopicPartition,
    TransactionCoordinator,
    TransactionDescription,
    TransactionListing,
)
from trafka.txn.records import (
    CorruptTransactionRecordError,
    TransactionLogRecord,
    decode_record,
    encode_record,
)
from trafka.txn.state import TransactionState

log = logging.getLogger("trafka.node.txn_service")

T = TypeVar("T")

LEADERSHIP_CHECK_INTERVAL_S = 1.0
LOAD_READ_BYTES = 1 << 20
MARKER_RETRY_BACKOFF_S = 0.1
MARKER_RETRY_BACKOFF_MAX_S = 2.0
MARKER_TIMEOUT_MS = 30_000
CONCURRENT_WAIT_S = 0.5
INTER_BROKER_REQUEST_TIMEOUT_S = 30.0
_ATTRIBUTE = "_trafka_transaction_service"

# Kafka's TransactionStateManager mapping of append errors to coordinator errors.
_APPEND_ERRORS: dict[int, ErrorCode] = {
    int(ErrorCode.unknown_topic_or_partition): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_enough_replicas): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_enough_replicas_after_append): ErrorCode.coordinator_not_available,
    int(ErrorCode.request_timed_out): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_leader_or_follower): ErrorCode.not_coordinator,
    int(ErrorCode.kafka_storage_error): ErrorCode.not_coordinator,
}
# Marker errors after which the partition is dropped from the marker (Kafka's
# TransactionMarkerRequestCompletionHandler): the partition no longer exists.
_MARKER_DROPPED = frozenset({int(ErrorCode.unknown_topic_or_partition)})


def transaction_config_of(config: BrokerConfig) -> TransactionConfig:
    return TransactionConfig(
        transaction_max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        abort_timed_out_transaction_cleanup_interval_ms=config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ),
        remove_expired_transaction_cleanup_interval_ms=config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ),
    )


@dataclass(eq=False)
class _Partition:
    partition: int
    leader_epoch: int
    lock: trio.Lock = field(default_factory=trio.Lock)
    coordinator: TransactionCoordinator | None = None  # None until loaded
    unloaded: bool = False
    writing_markers: dict[str, trio.Event] = field(default_factory=dict)
    """transactional id -> set when the marker task under way for it ends."""


class TransactionService:
    """Transaction coordination for one broker. Public methods are called from handlers."""

    def __init__(
        self,
        *,
        node_id: int,
        topics: TopicManager,
        metadata: MetadataCache,
        admin: TopicAdmin,
        replicas: ReplicaManager,
        producer_ids: ProducerIdManager,
        groups: GroupService,
        config: Callable[[], BrokerConfig],
        inter_broker: InterBrokerClient | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`inter_broker`: how markers and verifications reach other brokers (the
        inter-broker listener's security); None: plain connections (tests)."""
        self._inter_broker = inter_broker or InterBrokerClient()
        self._node_id = node_id
        self._topics = topics
        self._metadata = metadata
        self._admin = admin
        self._replicas = replicas
        self._producer_ids = producer_ids
        self._groups = groups
        self._broker_config = config
        self._clock = clock
        self._config = transaction_config_of(config())
        self._partitions: dict[int, _Partition] = {}
        self._wakeup = trio.Event()
        self._create_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._pending_tasks: list[Callable[[], Any]] = []
        self._connections: dict[int, KafkaConnection] = {}
        self._connection_locks: dict[int, trio.Lock] = {}

    # --- coordinator discovery -----------------------------------------------------------

    def _topic_partitions(self) -> int | None:
        state = self._topics.get(TRANSACTION_STATE_TOPIC)
        return len(state.partitions) if state is not None and state.partitions else None

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, BrokerInfo | None]:
        """The node leading the id's `__transaction_state` partition (creating the topic)."""
        if not transactional_id:
            return ErrorCode.invalid_request, None
        if self._topic_partitions() is None:
            await self._create_topic()
        count = self._topic_partitions()
        if count is None:
            return ErrorCode.coordinator_not_available, None
        partition_state = self._topics.partition(
            TRANSACTION_STATE_TOPIC, await partition_of_key(transactional_id, count)
        )
        if partition_state is None or partition_state.leader < 0:
            return ErrorCode.coordinator_not_available, None
        if partition_state.leader not in self._metadata.brokers:
            await self._metadata.refresh_brokers()
        info = self._metadata.brokers.get(partition_state.leader)
        if info is None:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, info

    async def _create_topic(self) -> None:
        async with self._create_lock:
            if self._topics.get(TRANSACTION_STATE_TOPIC) is not None:
                return
            config = self._broker_config()
            live = max(len(self._metadata.live_broker_ids()), 1)
            factor = min(config.get_int("transaction.state.log.replication.factor"), live)
            min_isr = min(config.get_int("transaction.state.log.min.isr"), factor)
            try:
                await self._admin.create_topic(
                    TRANSACTION_STATE_TOPIC,
                    config.get_int("transaction.state.log.num.partitions"),
                    factor,
                    {},
                    {
                        "cleanup.policy": "compact",
                        "compression.type": "uncompressed",
                        "min.insync.replicas": str(min_isr),
                        "unclean.leader.election.enable": "false",
                        "segment.bytes": str(config.get_int("transaction.state.log.segment.bytes")),
                    },
                    validate_only=False,
                )
            except TopicError as error:
                log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, error)

    # --- partitions: leadership and loading ----------------------------------------------

    async def _partition_of(self, transactional_id: str) -> _Partition | ErrorCode:
        count = self._topic_partitions()
        if count is None:
            return ErrorCode.not_coordinator
        return await self._partition(await partition_of_key(transactional_id, count))

    def _led_epoch(self, partition: int) -> int | None:
        """The leader epoch of `__transaction_state-<partition>` if this node leads it.

        The replica manager's view (the controller's LeaderAndIsr), not the metadata cache:
        a node restarted after a failover reads its cache from a tree replica that may not
        have caught up yet, and would otherwise load the partition and act as a coordinator
        it no longer is (resending old markers with a stale coordinator epoch)."""
        leader = self._replicas.leaders.get(ReplicaPartition(TRANSACTION_STATE_TOPIC, partition))
        return None if leader is None else int(leader.leader_epoch)

    async def _partition(self, partition: int) -> _Partition | ErrorCode:
        leader_epoch = self._led_epoch(partition)
        if leader_epoch is None:
            self._unload(partition)
            return ErrorCode.not_coordinator
        current = self._partitions.get(partition)
        if current is not None and current.leader_epoch != leader_epoch:
            self._unload(partition)
            current = None
        if current is None:
            current = _Partition(partition, leader_epoch)
            self._partitions[partition] = current
        if current.coordinator is None:
            async with current.lock:
                if current.unloaded:
                    return ErrorCode.not_coordinator
                if current.coordinator is None:
                    coordinator = self._load(partition, current.leader_epoch)
                    current.coordinator = coordinator
                    pending = coordinator.pending_markers()
                    log.info(
                        "coordinating %s-%d (coordinator epoch %d): %d transaction(s) to finish",
                        TRANSACTION_STATE_TOPIC,
                        partition,
                        current.leader_epoch,
                        len(pending),
                    )
                    for marker in pending:
                        self._start_markers(current, marker)
        return current

    def _load(self, partition: int, leader_epoch: int) -> TransactionCoordinator:
        """Read the partition from its log start to its log end (as the group service)."""
        partition_log = self._replicas.get_or_create_log(TRANSACTION_STATE_TOPIC, partition)
        end_offset = int(partition_log.log_end_offset)
        offset = int(partition_log.log_start_offset)
        records: list[TransactionLogRecord] = []
        while offset < end_offset:
            data = partition_log.read(
                offset, max_bytes=LOAD_READ_BYTES, max_offset=end_offset, with_bytes=True
            )
            next_offset = offset
            for batch_next_offset, batch_records, _ in _iter_batches(data.to_bytes()):
                next_offset = max(next_offset, batch_next_offset)
                for record_offset, key, value in batch_records:
                    if key is None or record_offset < offset:
                        continue
                    try:
                        records.append(decode_record(key, value))
                    except CorruptTransactionRecordError:
                        log.warning("corrupt record in %s-%d", TRANSACTION_STATE_TOPIC, partition)
            if next_offset <= offset:
                break
            offset = next_offset
        log.debug("loaded %d records of %s-%d", len(records), TRANSACTION_STATE_TOPIC, partition)
        return TransactionCoordinator.load(
            self._config, leader_epoch, records, self._clock.now_ms()
        )

    def _unload(self, partition: int) -> None:
        current = self._partitions.pop(partition, None)
        if current is not None:
            current.unloaded = True

    def _still_coordinating(self, current: _Partition) -> bool:
        return not current.unloaded and self._partitions.get(current.partition) is current

    # --- running coordinator calls -------------------------------------------------------

    async def _call(
        self,
        transactional_id: str,
        operation: Callable[[TransactionCoordinator, int], tuple[T, Effects]],
    ) -> T | ErrorCode:
        current = await self._partition_of(transactional_id)
        if isinstance(current, ErrorCode):
            return current
        return await self._call_on(current, operation)

    async def _call_after_markers(
        self,
        transactional_id: str,
        operation: Callable[[TransactionCoordinator, int], tuple[T, Effects]],
        busy: Callable[[T | ErrorCode], bool],
    ) -> T | ErrorCode:
        """`_call`, and once more after this node's marker task for the id ends (at most
        CONCURRENT_WAIT_S) when the first answer was CONCURRENT_TRANSACTIONS (`busy`).

        A client begins its next transaction as soon as EndTxn is answered, usually before
        the markers are written: its AddPartitionsToTxn would get CONCURRENT_TRANSACTIONS
        and back off (20-100 ms in librdkafka and the Java client), which bounded small
        transactions and cost a third of transactional throughput. The answer after the
        wait is the one the client's retry would have got."""
        outcome = await self._call(transactional_id, operation)
        if not busy(outcome):
            return outcome
        count = self._topic_partitions()
        current = (
            self._partitions.get(await partition_of_key(transactional_id, count)) if count else None
        )
        done = None if current is None else current.writing_markers.get(transactional_id)
        if done is None:
            return outcome
        with trio.move_on_after(CONCURRENT_WAIT_S):
            await done.wait()
        return await self._call(transactional_id, operation)

    async def _call_on(
        self,
        current: _Partition,
        operation: Callable[[TransactionCoordinator, int], tuple[T, Effects]],
    ) -> T | ErrorCode:
        async with current.lock:
            if current.unloaded or current.coordinator is None:
                return ErrorCode.not_coordinator
            value, effects = operation(current.coordinator, self._clock.now_ms())
            error = await self._append(current.partition, effects.records)
        if error is not None:
            self._unload(current.partition)
            return error
        for marker in effects.markers:
            self._start_markers(current, marker)
        return value

    async def _append(
        self, partition: int, records: Iterable[TransactionLogRecord]
    ) -> ErrorCode | None:
        batch = [NewRecord(key=k, value=v) for k, v in map(encode_record, records)]
        if not batch:
            return None
        result = await self._replicas.append(
            TRANSACTION_STATE_TOPIC,
            partition,
            build_batch(batch, now_ms=self._clock.now_ms()),
            required_acks=-1,
            timeout_ms=MARKER_TIMEOUT_MS,
        )
        if result.error_code == 0:
            return None
        log.warning(
            "append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, result.error_code
        )
        return _APPEND_ERRORS.get(result.error_code, ErrorCode.unknown_server_error)

    # --- markers -------------------------------------------------------------------------

    def _start_markers(self, current: _Partition, marker: MarkerRequest) -> None:
        done = trio.Event()
        current.writing_markers[marker.transactional_id] = done

        async def task() -> None:
            try:
                await self._write_markers(current, marker)
            finally:
                done.set()
                if current.writing_markers.get(marker.transactional_id) is done:
                    del current.writing_markers[marker.transactional_id]

        if self._nursery is None:
            self._pending_tasks.append(task)
        else:
            self._nursery.start_soon(task)

    async def _write_markers(self, current: _Partition, marker: MarkerRequest) -> None:
        remaining = set(marker.partitions)
        backoff = MARKER_RETRY_BACKOFF_S
        while remaining:
            if not self._still_coordinating(current):
                return  # the next coordinator resends them after its load
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                state = self._topics.get(tp.topic)
                if state is None or tp.partition not in state.partitions:
                    remaining.discard(tp)  # the topic or partition was deleted
                    continue
                leader = state.partitions[tp.partition].leader
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, partitions in by_leader.items():
                if leader == self._node_id:
                    results = await self._write_local(marker, partitions)
                else:
                    results = await self._write_remote(leader, marker, partitions)
                for tp, code in results.items():
                    if code != 0:
                        log.debug(
                            "marker of %s at %s (leader %d): %d",
                            marker.transactional_id,
                            tp,
                            leader,
                            code,
                        )
                    if code == 0 or code in _MARKER_DROPPED:
                        remaining.discard(tp)
                    elif code == int(ErrorCode.transaction_coordinator_fenced):
                        log.warning("markers of %s fenced at %s", marker.transactional_id, tp)
                        return
            if remaining:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_BACKOFF_MAX_S)
        if self._still_coordinating(current):
            await self._call_on(
                current,
                lambda coordinator, now: (
                    None,
                    coordinator.complete_markers(
                        marker.transactional_id, marker.producer_id, marker.producer_epoch, now
                    ),
                ),
            )

    async def _write_local(
        self, marker: MarkerRequest, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: await self.write_marker_locally(marker, tp) for tp in partitions}

    async def write_marker_locally(self, marker: MarkerRequest, tp: TopicPartition) -> int:
        """Write one partition's marker on this leader (WriteTxnMarkers and the coordinator's
        own partitions); on a `__consumer_offsets` partition the group coordinator then
        applies or drops the producer's pending TxnOffsetCommit offsets. Returns a Kafka
        error code."""
        code = await self._replicas.append_end_transaction_marker(
            tp.topic,
            tp.partition,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            committed=marker.committed,
            timeout_ms=MARKER_TIMEOUT_MS,
        )
        if code == 0 and tp.topic == OFFSETS_TOPIC:
            await self._groups.complete_txn_offsets(
                tp.partition, marker.producer_id, marker.committed
            )
        return code

    async def _inter_broker_request(self, broker_id: int, request: Any) -> Any | None:
        """One request on the pooled connection to `broker_id`; None if it failed."""
        endpoint = self._metadata.endpoint_for(broker_id)
        if endpoint is None:
            return None
        lock = self._connection_locks.setdefault(broker_id, trio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            try:
                if connection is None or connection.closed:
                    connection = await self._inter_broker.connect(
                        endpoint[0],
                        endpoint[1],
                        client_id=f"txn-coordinator-{self._node_id}",
                        request_timeout_s=INTER_BROKER_REQUEST_TIMEOUT_S,
                    )
                    self._connections[broker_id] = connection
                return await connection.request(request)
            except (ClientError, OSError) as error:
                log.info("%s to broker %d: %s", type(request).__name__, broker_id, error)
                if connection is not None:
                    await connection.close()
                self._connections.pop(broker_id, None)
                return None

    async def verify_before_append(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """KIP-890 part 1: a partition leader asks the coordinator whether `tp` is in the
        producer's open transaction before appending its first transactional batch there
        (AddPartitionsToTxn v4 verify_only when the coordinator is another node)."""
        error, info = await self.find_coordinator(transactional_id)
        if info is None:
            return error
        if info.node_id == self._node_id:
            top, per = await self.verify_partitions(
                transactional_id, producer_id, producer_epoch, (tp,)
            )
            return per.get(tp, top)
        request = AddPartitionsToTxnRequest(
            transactions=(
                AddPartitionsToTxnTransaction(
                    transactional_id=TransactionalId(transactional_id),
                    producer_id=ProducerId(producer_id),
                    producer_epoch=i16(producer_epoch),
                    verify_only=True,
                    topics=(
                        AddPartitionsToTxnTopic(
                            name=TopicName(tp.topic), partitions=(i32(tp.partition),)
                        ),
                    ),
                ),
            )
        )
        response = await self._inter_broker_request(info.node_id, request)
        if response is None:
            return ErrorCode.coordinator_not_available
        if int(response.error_code) != 0:
            return ErrorCode(int(response.error_code))
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    return ErrorCode(int(partition.partition_error_code))
        return ErrorCode.invalid_txn_state

    async def _write_remote(
        self, leader: int, marker: MarkerRequest, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=ProducerId(marker.producer_id),
                    producer_epoch=i16(marker.producer_epoch),
                    transaction_result=marker.committed,
                    topics=tuple(
                        WritableTxnMarkerTopic(
                            name=TopicName(topic), partition_indexes=tuple(i32(p) for p in ids)
                        )
                        for topic, ids in by_topic.items()
                    ),
                    coordinator_epoch=i32(marker.coordinator_epoch),
                ),
            )
        )
        failed = {tp: int(ErrorCode.network_exception) for tp in partitions}
        response = await self._inter_broker_request(leader, request)
        if response is None:
            return failed
        results = dict(failed)
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    tp = TopicPartition(str(topic.name), int(partition.partition_index))
                    results[tp] = int(partition.error_code)
        return results

    # --- the transaction APIs ------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int,
        expected_producer_epoch: int,
    ) -> InitProducerIdResult:
        fresh_producer_id = await self._producer_ids.allocate()
        outcome = await self._call_after_markers(
            transactional_id,
            lambda coordinator, now: coordinator.init_producer_id(
                transactional_id,
                transaction_timeout_ms,
                fresh_producer_id,
                now,
                expected_producer_id=expected_producer_id,
                expected_producer_epoch=expected_producer_epoch,
            ),
            lambda outcome: (
                isinstance(outcome, InitProducerIdResult)
                and outcome.error == ErrorCode.concurrent_transactions
            ),
        )
        return InitProducerIdResult(outcome) if isinstance(outcome, ErrorCode) else outcome

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[TopicPartition, ...],
    ) -> ErrorCode:
        return await self._call_after_markers(
            transactional_id,
            lambda coordinator, now: coordinator.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, now
            ),
            lambda outcome: outcome == ErrorCode.concurrent_transactions,
        )

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[TopicPartition, ...],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        outcome = await self._call(
            transactional_id,
            lambda coordinator, now: (
                coordinator.verify_partitions(
                    transactional_id, producer_id, producer_epoch, partitions
                ),
                Effects(),
            ),
        )
        return (outcome, {}) if isinstance(outcome, ErrorCode) else outcome

    async def offsets_partition(self, group_id: str) -> TopicPartition:
        """The `__consumer_offsets` partition AddOffsetsToTxn adds for `group_id`."""
        state = self._topics.get(OFFSETS_TOPIC)
        count = (
            len(state.partitions)
            if state is not None and state.partitions
            else self._broker_config().get_int("offsets.topic.num.partitions")
        )
        return TopicPartition(OFFSETS_TOPIC, await partition_of_key(group_id, count))

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        return await self._call(
            transactional_id,
            lambda coordinator, now: coordinator.end_transaction(
                transactional_id, producer_id, producer_epoch, committed, now
            ),
        )

    async def describe(self, transactional_id: str) -> TransactionDescription:
        outcome = await self._call(
            transactional_id,
            lambda coordinator, now: (coordinator.describe(transactional_id), Effects()),
        )
        if isinstance(outcome, ErrorCode):
            return TransactionDescription(transactional_id, outcome)
        return outcome

    async def list_transactions(
        self, states: frozenset[TransactionState], producer_ids: frozenset[int]
    ) -> tuple[ErrorCode, tuple[TransactionListing, ...]]:
        """The ids of every `__transaction_state` partition this node leads."""
        listings: list[TransactionListing] = []
        for partition in range(self._topic_partitions() or 0):
            if self._led_epoch(partition) is None:
                continue
            current = await self._partition(partition)
            if isinstance(current, ErrorCode):
                continue
            outcome = await self._call_on(
                current,
                lambda coordinator, now: (
                    coordinator.list_transactions(states, producer_ids),
                    Effects(),
                ),
            )
            if not isinstance(outcome, ErrorCode):
                listings.extend(outcome)
        return ErrorCode.none, tuple(listings)

    # --- timers --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire deadlines, notice leadership changes, run marker tasks. Until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for task in self._pending_tasks:
                nursery.start_soon(task)
            self._pending_tasks.clear()
            task_status.started()
            try:
                await self._timer_loop()
            finally:
                with trio.CancelScope(shield=True):
                    for connection in self._connections.values():
                        await connection.close()

    async def _timer_loop(self) -> None:
        while True:
            now_ms = self._clock.now_ms()
            deadline_ms = now_ms + int(LEADERSHIP_CHECK_INTERVAL_S * 1000)
            for current in list(self._partitions.values()):
                if current.coordinator is not None:
                    deadline_ms = min(deadline_ms, current.coordinator.next_deadline_ms())
            with trio.move_on_after(max(deadline_ms - now_ms, 0) / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            try:
                await self._tick_all()
            except Exception:  # a timer bug must not take the node down
                log.exception("transaction coordinator timer failed")
                await trio.sleep(LEADERSHIP_CHECK_INTERVAL_S)

    async def _tick_all(self) -> None:
        for partition in range(self._topic_partitions() or 0):
            current = self._partitions.get(partition)
            leader_epoch = self._led_epoch(partition)
            if leader_epoch is not None and (
                current is None or current.leader_epoch != leader_epoch
            ):
                await self._partition(partition)  # load what this node now leads
            elif leader_epoch is None and current is not None:
                self._unload(partition)
        for current in list(self._partitions.values()):
            coordinator = current.coordinator
            if coordinator is None or coordinator.next_deadline_ms() > self._clock.now_ms():
                continue
            await self._call_on(current, lambda coordinator, now: (None, coordinator.tick(now)))


def client_error(error: ErrorCode, api_version: int, fenced_since_version: int) -> int:
    """PRODUCER_FENCED for clients that know it, INVALID_PRODUCER_EPOCH for older ones
    (KIP-588: InitProducerId v4, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn/TxnOffsetCommit v2)."""
    if error == ErrorCode.producer_fenced and api_version < fenced_since_version:
        return int(ErrorCode.invalid_producer_epoch)
    return int(error)
