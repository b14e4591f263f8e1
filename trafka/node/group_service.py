"""The trio shell around the pure group coordinator (`trafka.group`), one per broker.

What it adds to the logic (STYLE 1: keep this short):

* **Where a group lives** (GRP-05): `partition_for(group_id, partitions of __consumer_offsets)`;
  this node coordinates the groups of the `__consumer_offsets` partitions it leads and
  answers NOT_COORDINATOR for the others, so clients look the coordinator up again.
* **`__consumer_offsets`** is created on the first FindCoordinator (compacted,
  `offsets.topic.num.partitions` partitions, replication factor
  `offsets.topic.replication.factor` capped by the live brokers).
* **Loading**: the first request for a partition this node leads (or leads in a new leader
  epoch, i.e. after a failover) reads the partition from its log start to its log end
  and rebuilds the coordinator with `GroupCoordinator.load`; a partition whose leadership
  moved away is unloaded (its parked requests get NOT_COORDINATOR).
* **Records**: every call's records are appended with acks=all (Kafka's offsets topic
  semantics) before its answers are released. If an append fails, the callers get Kafka's
  mapped error (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE) and the partition is unloaded,
  so the next request reloads it from the log: the in-memory state never runs ahead of the
  log for long (Kafka reverts instead; we rebuild).
* **Parking**: JoinGroup/SyncGroup callers wait on a `_Waiter` keyed by `RequestId` until a
  `Reply` addresses them. Calls on one partition are serialised by a `trio.Lock`.
* **Time**: a timer task sleeps until the earliest `next_deadline_ms()` of the loaded
  coordinators (or a wake-up after each call, or 1 s to notice leadership changes) and
  calls `tick(now_ms)`.

Wiring: the broker builds the service from the node's topic cache, metadata cache, topic
admin and replica manager, and runs `service.run` in its nursery before the listener opens,
so timers and loading start with the node; handlers reach it as `ctx.services.groups`.

Partitions this node leads are also loaded by the timer without waiting for a request, so
restored sessions and offset retention run.

KIP-848 consumer groups (ConsumerGroupHeartbeat/Describe) are plain calls, never parked:
each gets the topics image (name -> topic id and partition count) built from the topic
cache, rebuilt only after the topic manager reports a change, so groups see topics created,
deleted or grown on their members' next heartbeat.

Transactional offsets (TxnOffsetCommit): written as the producer's transactional batch,
pending in the coordinator until the transaction's marker is written to the partition
(`complete_txn_offsets`, called by the marker path); a load keeps them pending until it
reads the marker.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import trio
from kio.schema.errors import ErrorCode

from trafka.group.config import OFFSETS_TOPIC
from trafka.group.consumer_group import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    TopicsImage,
)
from trafka.group.consumer_records import TopicMetadataEntry, normalized_racks
from trafka.group.coordinator import Effects, GroupCoordinator, Reply
from trafka.group.group_configs import GroupConfigOverrides
from trafka.group.hashing import partition_for
from trafka.group.messages import (
    GroupDeletion,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    OffsetCommitRequest,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    RequestId,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
)
from trafka.group.records import (
    CorruptOffsetsRecordError,
    OffsetCommitRecord,
    OffsetsTopicRecord,
    decode_record,
    encode_record,
)
from trafka.group.state import GroupState
from trafka.log.control import ControlRecordType, decode_end_transaction_marker
from trafka.log.errors import CorruptRecordError
from trafka.log.records import NewRecord, build_batch, iter_batches
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.config.group import group_config_of
from trafka.node.coordinator_key import partition_of_key
from trafka.node.metadata_cache import BrokerInfo, MetadataCache
from trafka.node.replication.ids import TopicPartition as ReplicaPartition
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicError, TopicManager, TopicState

log = logging.getLogger("trafka.node.group_service")

T = TypeVar("T")

LEADERSHIP_CHECK_INTERVAL_S = 1.0
LOAD_READ_BYTES = 1 << 20
PARKED_GRACE_MS = 30_000
RACKS_CHECK_INTERVAL_MS = 1_000  # beyond the rebalance timeout, a parked call gives up

# Kafka's GroupMetadataManager mapping of append errors to coordinator errors.
_APPEND_ERRORS: dict[int, ErrorCode] = {
    int(ErrorCode.unknown_topic_or_partition): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_enough_replicas): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_enough_replicas_after_append): ErrorCode.coordinator_not_available,
    int(ErrorCode.request_timed_out): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_leader_or_follower): ErrorCode.not_coordinator,
    int(ErrorCode.kafka_storage_error): ErrorCode.not_coordinator,
    int(ErrorCode.invalid_producer_epoch): ErrorCode.producer_fenced,  # TxnOffsetCommit
}


@dataclass(eq=False)
class _Waiter:
    partition: int
    event: trio.Event = field(default_factory=trio.Event)
    result: JoinGroupResult | SyncGroupResult | None = None


@dataclass(eq=False)
class _Partition:
    partition: int
    leader_epoch: int
    lock: trio.Lock = field(default_factory=trio.Lock)
    coordinator: GroupCoordinator | None = None  # None until loaded
    unloaded: bool = False


class GroupService:
    """Group coordination for one broker. All public methods are called from handlers."""

    def __init__(
        self,
        *,
        node_id: int,
        topics: TopicManager,
        metadata: MetadataCache,
        admin: TopicAdmin,
        replicas: ReplicaManager,
        config: Callable[[], BrokerConfig],
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self._node_id = node_id
        self._topics = topics
        self._metadata = metadata
        self._admin = admin
        self._replicas = replicas
        self._broker_config = config
        self._clock = clock
        self._config = group_config_of(config())
        self._rng = rng or random.Random()
        self._partitions: dict[int, _Partition] = {}
        self._waiters: dict[RequestId, _Waiter] = {}
        self._request_ids = itertools.count(1)
        self._wakeup = trio.Event()
        self._timer_deadline_ms = 0
        self._create_lock = trio.Lock()
        self._image: TopicsImage | None = None
        self._group_configs: dict[str, GroupConfigOverrides] = {}
        self._broker_racks: dict[int, str] = {}
        self._racks_checked_ms = -RACKS_CHECK_INTERVAL_MS
        topics.listeners.append(self._topics_changed)

    def apply_group_config(self, group_id: str, properties: Mapping[str, str]) -> None:
        """A group's dynamic configs (`/config/groups/<g>`, read by the config service on a
        change notification or a rescan): kept for partitions loaded later and handed to
        the loaded coordinator of the group's partition, which applies them on the members'
        next heartbeats. (`partition_for` on the loop: a group id with configs is bounded,
        `trafka.node.config.service.MAX_GROUP_ENTITY_BYTES`.)"""
        overrides = GroupConfigOverrides.from_properties(properties)
        if overrides.is_empty():
            self._group_configs.pop(group_id, None)
        else:
            self._group_configs[group_id] = overrides
        offsets_topic = self._topics.get(OFFSETS_TOPIC)
        if offsets_topic is None or not offsets_topic.partitions:
            return
        current = self._partitions.get(partition_for(group_id, len(offsets_topic.partitions)))
        if current is not None and current.coordinator is not None and not current.unloaded:
            current.coordinator.set_group_config(group_id, overrides)

    def _group_configs_of(self, partition: int) -> dict[str, GroupConfigOverrides]:
        offsets_topic = self._topics.get(OFFSETS_TOPIC)
        count = len(offsets_topic.partitions) if offsets_topic is not None else 0
        if not count:
            return {}
        return {
            group_id: overrides
            for group_id, overrides in self._group_configs.items()
            if partition_for(group_id, count) == partition
        }

    def _topics_changed(self, name: str) -> None:
        self._image = None

    def topics_image(self) -> TopicsImage:
        """Name -> (topic id, partition count, replica racks) of every topic: what KIP-848
        groups subscribe to, rebuilt after a topic is created, changed or deleted, or a
        broker's rack becomes known or changes (looked at once a second at most). A broker
        that goes away keeps its last known rack, so a broker failure does not move the
        groups' epochs."""
        now_ms = self._clock.now_ms()
        if now_ms >= self._racks_checked_ms + RACKS_CHECK_INTERVAL_MS:
            self._racks_checked_ms = now_ms
            racks = {**self._broker_racks}
            racks.update((b, r) for b, r in self._metadata.racks().items() if r is not None)
            if racks != self._broker_racks:
                self._broker_racks = racks
                self._image = None
        if self._image is None:
            self._image = {
                name: TopicMetadataEntry(
                    state.topic_id,
                    name,
                    len(state.partitions),
                    normalized_racks(
                        (self._broker_racks[b] for b in p.replicas if b in self._broker_racks)
                        for _, p in sorted(state.partitions.items())
                    )
                    if self._broker_racks
                    else (),
                )
                for name, state in self._topics.topics.items()
            }
        return self._image

    # --- coordinator discovery -----------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, BrokerInfo | None]:
        """The node leading `key`'s `__consumer_offsets` partition (creating the topic)."""
        state = self._topics.get(OFFSETS_TOPIC)
        if state is None:
            state = await self._create_offsets_topic()
            if state is None:
                return ErrorCode.coordinator_not_available, None
        partition = await partition_of_key(key, len(state.partitions))
        partition_state = self._topics.partition(OFFSETS_TOPIC, partition)
        if partition_state is None or partition_state.leader < 0:
            return ErrorCode.coordinator_not_available, None
        if partition_state.leader not in self._metadata.brokers:
            await self._metadata.refresh_brokers()
        info = self._metadata.brokers.get(partition_state.leader)
        if info is None:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, info

    async def _create_offsets_topic(self) -> TopicState | None:
        async with self._create_lock:
            state = self._topics.get(OFFSETS_TOPIC)
            if state is not None:
                return state
            config = self._broker_config()
            live = max(len(self._metadata.live_broker_ids()), 1)
            factor = min(config.get_int("offsets.topic.replication.factor"), live)
            try:
                return await self._admin.create_topic(
                    OFFSETS_TOPIC,
                    self._config.offsets_topic_num_partitions,
                    factor,
                    {},
                    {
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(config.get_int("offsets.topic.segment.bytes")),
                    },
                    validate_only=False,
                )
            except TopicError as error:
                log.warning("cannot create %s: %s", OFFSETS_TOPIC, error)
                return self._topics.get(OFFSETS_TOPIC)

    # --- partitions: leadership and loading ----------------------------------------------

    async def _partition_of(self, group_id: str) -> _Partition | ErrorCode:
        state = self._topics.get(OFFSETS_TOPIC)
        if state is None or not state.partitions:
            return ErrorCode.not_coordinator
        return await self._partition(await partition_of_key(group_id, len(state.partitions)))

    def _led_epoch(self, partition: int) -> int | None:
        """The leader epoch of `__consumer_offsets-<partition>` if this node leads it: the
        replica manager's view (the controller's LeaderAndIsr), not the metadata cache, which
        a node restarted after a failover may read stale (it would load its own stale log
        and answer OffsetFetch with old offsets)."""
        leader = self._replicas.leaders.get(ReplicaPartition(OFFSETS_TOPIC, partition))
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
                    current.coordinator = self._load(partition)
        return current

    def group_states(self) -> list[str]:
        """Kafka's state name of every group this node coordinates (metrics, at scrape time)."""
        return [
            listing.state
            for current in self._partitions.values()
            if current.coordinator is not None and not current.unloaded
            for listing in current.coordinator.list_groups()
        ]

    def _load(self, partition: int) -> GroupCoordinator:
        """Read the partition from its log start to its log end (not the high watermark: a
        new leader's HW may trail its log end until the followers fetch, and the records in
        between may have been acknowledged by the old leader; Kafka loads to the log end)."""
        partition_log = self._replicas.get_or_create_log(OFFSETS_TOPIC, partition)
        end_offset = int(partition_log.log_end_offset)
        offset = int(partition_log.log_start_offset)
        records: list[OffsetsTopicRecord] = []
        # TxnOffsetCommit records wait for their producer's marker (COMMIT: they apply there).
        pending: dict[int, list[OffsetsTopicRecord]] = {}
        while offset < end_offset:
            data = partition_log.read(
                offset, max_bytes=LOAD_READ_BYTES, max_offset=end_offset, with_bytes=True
            )
            next_offset = offset
            for batch_next_offset, batch_records, txn in _iter_batches(data.to_bytes()):
                next_offset = max(next_offset, batch_next_offset)
                if txn is not None and txn.committed is not None:
                    done = pending.pop(txn.producer_id, [])
                    if txn.committed:
                        records.extend(done)
                    continue
                target = records if txn is None else pending.setdefault(txn.producer_id, [])
                for record_offset, key, value in batch_records:
                    if key is None or record_offset < offset:
                        continue
                    try:
                        target.append(decode_record(key, value))
                    except CorruptOffsetsRecordError:
                        log.warning("corrupt record in %s-%d", OFFSETS_TOPIC, partition)
            if next_offset <= offset:
                break  # nothing readable here (an empty tail); what we have is the state
            offset = next_offset
        log.debug("loaded %d records of %s-%d", len(records), OFFSETS_TOPIC, partition)
        coordinator = GroupCoordinator.load(
            self._config,
            self._rng,
            records,
            self._clock.now_ms(),
            self._group_configs_of(partition),
        )
        for producer_id, open_records in pending.items():
            commits = [r for r in open_records if isinstance(r, OffsetCommitRecord)]
            coordinator.restore_txn_offsets(producer_id, commits, self._clock.now_ms())
        return coordinator

    def _unload(self, partition: int) -> None:
        current = self._partitions.pop(partition, None)
        if current is None:
            return
        current.unloaded = True
        for request_id, waiter in list(self._waiters.items()):
            if waiter.partition == partition and waiter.result is None:
                self._answer_with_error(request_id, ErrorCode.not_coordinator)

    # --- running coordinator calls -------------------------------------------------------

    async def _call(
        self,
        group_id: str,
        operation: Callable[[GroupCoordinator, int], tuple[T, Effects]],
        producer: tuple[int, int] | None = None,
    ) -> T | ErrorCode:
        current = await self._partition_of(group_id)
        if isinstance(current, ErrorCode):
            return current
        return await self._call_on(current, operation, producer)

    async def _call_on(
        self,
        current: _Partition,
        operation: Callable[[GroupCoordinator, int], tuple[T, Effects]],
        producer: tuple[int, int] | None = None,
    ) -> T | ErrorCode:
        async with current.lock:
            if current.unloaded or current.coordinator is None:
                return ErrorCode.not_coordinator
            value, effects = operation(current.coordinator, self._clock.now_ms())
            error = await self._append(current.partition, effects.records, producer)
        self._deliver(effects.replies, error)
        if error is not None:
            self._unload(current.partition)
            return error
        coordinator = current.coordinator
        if coordinator is not None and coordinator.next_deadline_ms() < self._timer_deadline_ms:
            self._wakeup.set()  # the timer sleeps past a deadline this call created
        return value

    async def _append(
        self,
        partition: int,
        records: Iterable[OffsetsTopicRecord],
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode | None:
        """`producer` (id, epoch): a TxnOffsetCommit, written as that producer's
        transactional batch (no sequence, as Kafka's coordinator writes it)."""
        batch = [NewRecord(key=k, value=v) for k, v in map(encode_record, records)]
        if not batch:
            return None
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        result = await self._replicas.append(
            OFFSETS_TOPIC,
            partition,
            build_batch(
                batch,
                now_ms=self._clock.now_ms(),
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                is_transactional=producer is not None,
            ),
            required_acks=-1,
            timeout_ms=self._broker_config().get_int("offsets.commit.timeout.ms"),
        )
        if result.error_code == 0:
            return None
        log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, result.error_code)
        return _APPEND_ERRORS.get(result.error_code, ErrorCode.unknown_server_error)

    def _deliver(self, replies: Iterable[Reply], error: ErrorCode | None) -> None:
        for reply in replies:
            waiter = self._waiters.get(reply.request_id)
            if waiter is None or waiter.result is not None:
                continue
            result = reply.result
            if error is not None:
                result = dataclasses.replace(result, error=error)
            waiter.result = result
            waiter.event.set()

    def _answer_with_error(self, request_id: RequestId, error: ErrorCode) -> None:
        waiter = self._waiters.get(request_id)
        if waiter is None or waiter.result is not None:
            return
        waiter.result = JoinGroupResult(error)  # the caller converts to its own result type
        waiter.event.set()

    async def _parked_call(
        self,
        group_id: str,
        wait_ms: int,
        operation: Callable[[GroupCoordinator, RequestId, int], Effects],
    ) -> JoinGroupResult | SyncGroupResult | ErrorCode:
        current = await self._partition_of(group_id)
        if isinstance(current, ErrorCode):
            return current
        request_id = RequestId(next(self._request_ids))
        waiter = _Waiter(current.partition)
        self._waiters[request_id] = waiter
        try:
            outcome = await self._call_on(
                current, lambda coordinator, now: (None, operation(coordinator, request_id, now))
            )
            if isinstance(outcome, ErrorCode):
                return outcome
            with trio.move_on_after((wait_ms + PARKED_GRACE_MS) / 1000):
                await waiter.event.wait()
            if waiter.result is None:
                return ErrorCode.coordinator_not_available
            return waiter.result
        finally:
            del self._waiters[request_id]

    # --- the group APIs ------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResult:
        wait_ms = max(request.rebalance_timeout_ms, request.session_timeout_ms)
        wait_ms += self._config.group_initial_rebalance_delay_ms
        outcome = await self._parked_call(
            request.group_id,
            wait_ms,
            lambda coordinator, request_id, now: coordinator.join_group(
                request_id, request, now, self.topics_image()
            ),
        )
        if isinstance(outcome, ErrorCode):
            return JoinGroupResult(outcome, member_id=request.member_id)
        if isinstance(outcome, SyncGroupResult):
            raise AssertionError("a SyncGroup reply addressed a JoinGroup")
        return outcome

    async def sync_group(
        self, request: SyncGroupRequest, rebalance_timeout_ms: int
    ) -> SyncGroupResult:
        outcome = await self._parked_call(
            request.group_id,
            rebalance_timeout_ms,
            lambda coordinator, request_id, now: coordinator.sync_group(request_id, request, now),
        )
        if isinstance(outcome, ErrorCode):
            return SyncGroupResult(outcome)
        if isinstance(outcome, JoinGroupResult):
            return SyncGroupResult(outcome.error)  # an error delivered by _answer_with_error
        return outcome

    async def heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        outcome = await self._call(
            request.group_id,
            lambda coordinator, now: (coordinator.heartbeat(request, now), Effects()),
        )
        return outcome

    async def consumer_group_heartbeat(
        self, request: ConsumerHeartbeatRequest
    ) -> ConsumerHeartbeatResult:
        outcome = await self._call(
            request.group_id,
            lambda coordinator, now: coordinator.consumer_group_heartbeat(
                request, self.topics_image(), now
            ),
        )
        if isinstance(outcome, ErrorCode):
            return ConsumerHeartbeatResult(outcome, member_epoch=-1)
        return outcome

    async def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription:
        outcome = await self._call(
            group_id,
            lambda coordinator, now: (
                coordinator.consumer_group_describe(group_id, self.topics_image()),
                Effects(),
            ),
        )
        if isinstance(outcome, ErrorCode):
            return ConsumerGroupDescription(group_id, outcome)
        return outcome

    async def leave_group(
        self, group_id: str, members: tuple[LeavingMember, ...]
    ) -> LeaveGroupResult:
        outcome = await self._call(
            group_id, lambda coordinator, now: coordinator.leave_group(group_id, members, now)
        )
        if isinstance(outcome, ErrorCode):
            return LeaveGroupResult(outcome)
        return outcome

    async def offset_commit(self, request: OffsetCommitRequest) -> tuple[PartitionError, ...]:
        outcome = await self._call(
            request.group_id, lambda coordinator, now: coordinator.offset_commit(request, now)
        )
        if isinstance(outcome, ErrorCode):
            return tuple(PartitionError(p.topic, p.partition, outcome) for p in request.partitions)
        return outcome

    async def txn_offset_commit(
        self, request: OffsetCommitRequest, producer_id: int, producer_epoch: int
    ) -> tuple[PartitionError, ...]:
        """TxnOffsetCommit: pending offsets, visible once the transaction commits."""
        outcome = await self._call(
            request.group_id,
            lambda coordinator, now: coordinator.txn_offset_commit(request, producer_id, now),
            (producer_id, producer_epoch),
        )
        if isinstance(outcome, ErrorCode):
            return tuple(PartitionError(p.topic, p.partition, outcome) for p in request.partitions)
        return outcome

    async def complete_txn_offsets(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker was written to `partition` of `__consumer_offsets`."""
        current = self._partitions.get(partition)
        if current is None or current.coordinator is None:
            return  # not loaded: the next load reads the marker from the log

        def complete(coordinator: GroupCoordinator, now_ms: int) -> tuple[None, Effects]:
            coordinator.complete_txn_offsets(producer_id, committed)
            return None, Effects()

        await self._call_on(current, complete)

    async def offset_fetch(
        self,
        group_id: str,
        partitions: tuple[TopicPartition, ...] | None,
        require_stable: bool = False,
        member: tuple[str, int] | None = None,
    ) -> OffsetFetchResult:
        outcome = await self._call(
            group_id,
            lambda coordinator, now: (
                coordinator.offset_fetch(
                    group_id, partitions, require_stable=require_stable, member=member
                ),
                Effects(),
            ),
        )
        if isinstance(outcome, ErrorCode):
            return OffsetFetchResult(outcome)
        return outcome

    async def offset_delete(
        self, group_id: str, partitions: tuple[TopicPartition, ...]
    ) -> OffsetDeleteResult:
        outcome = await self._call(
            group_id, lambda coordinator, now: coordinator.offset_delete(group_id, partitions, now)
        )
        if isinstance(outcome, ErrorCode):
            return OffsetDeleteResult(outcome)
        return outcome

    async def describe_group(self, group_id: str) -> GroupDescription:
        outcome = await self._call(
            group_id, lambda coordinator, now: (coordinator.describe_group(group_id), Effects())
        )
        if isinstance(outcome, ErrorCode):
            return GroupDescription(group_id, outcome, GroupState.DEAD.kafka_name, "", "")
        return outcome

    async def delete_group(self, group_id: str) -> GroupDeletion:
        outcome = await self._call(
            group_id, lambda coordinator, now: coordinator.delete_groups((group_id,), now)
        )
        if isinstance(outcome, ErrorCode):
            return GroupDeletion(group_id, outcome)
        return outcome[0]

    async def list_groups(
        self,
        states: frozenset[GroupState] | None,
        *,
        state_names: frozenset[str] | None = None,
        types: frozenset[str] | None = None,
    ) -> tuple[ErrorCode, tuple[GroupListing, ...]]:
        """The groups of every `__consumer_offsets` partition this node leads."""
        state = self._topics.get(OFFSETS_TOPIC)
        if state is None:
            return ErrorCode.none, ()
        listings: list[GroupListing] = []
        for partition in sorted(state.partitions):
            if self._led_epoch(partition) is None:
                continue
            current = await self._partition(partition)
            if isinstance(current, ErrorCode):
                continue
            outcome = await self._call_on(
                current,
                lambda coordinator, now: (
                    coordinator.list_groups(states, state_names=state_names, types=types),
                    Effects(),
                ),
            )
            if not isinstance(outcome, ErrorCode):
                listings.extend(outcome)
        return ErrorCode.none, tuple(listings)

    # --- timers --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire the coordinators' deadlines; notice lost leadership. Runs until cancelled."""
        task_status.started()
        while True:
            now_ms = self._clock.now_ms()
            deadline_ms = now_ms + int(LEADERSHIP_CHECK_INTERVAL_S * 1000)
            for current in list(self._partitions.values()):
                if current.coordinator is not None:
                    deadline_ms = min(deadline_ms, current.coordinator.next_deadline_ms())
            self._timer_deadline_ms = deadline_ms
            with trio.move_on_after(max(deadline_ms - now_ms, 0) / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            try:
                await self._tick_all()
            except Exception:  # a timer bug must not take the node down
                log.exception("group coordinator timer failed")
                await trio.sleep(LEADERSHIP_CHECK_INTERVAL_S)

    async def _tick_all(self) -> None:
        await self._load_led_partitions()
        for partition, current in list(self._partitions.items()):
            if self._led_epoch(partition) != current.leader_epoch:
                self._unload(partition)
                continue
            coordinator = current.coordinator
            if coordinator is None or coordinator.next_deadline_ms() > self._clock.now_ms():
                continue
            await self._call_on(current, lambda coordinator, now: (None, coordinator.tick(now)))

    async def _load_led_partitions(self) -> None:
        """Load every partition this node has become the leader of (Kafka loads on
        LeaderAndIsr), so restored members' sessions and offset retention run even before a
        client asks."""
        state = self._topics.get(OFFSETS_TOPIC)
        if state is None:
            return
        for partition in sorted(state.partitions):
            leader_epoch = self._led_epoch(partition)
            if leader_epoch is None:
                continue
            current = self._partitions.get(partition)
            if current is None or current.leader_epoch != leader_epoch:
                await self._partition(partition)
                await trio.lowlevel.checkpoint()  # let requests in between loads


@dataclass(frozen=True, slots=True)
class _TxnBatch:
    """A transactional batch: its producer, and for a marker whether it commits."""

    producer_id: int
    committed: bool | None  # None: data (TxnOffsetCommit records), not a marker


def _iter_batches(
    data: bytes,
) -> Iterable[tuple[int, list[tuple[int, bytes | None, bytes | None]], _TxnBatch | None]]:
    """(next offset, [(offset, key, value)], transactional info) per batch; control
    batches other than transaction markers are skipped; stops at a partial batch."""
    try:
        for batch in iter_batches(data):
            header = batch.header
            txn = None
            if header.is_control:
                if not header.is_transactional or not batch.records:
                    yield header.next_offset, [], None
                    continue
                try:
                    marker = decode_end_transaction_marker(batch.records[0])
                except CorruptRecordError:
                    yield header.next_offset, [], None
                    continue
                committed = marker.type is ControlRecordType.COMMIT
                yield header.next_offset, [], _TxnBatch(header.producer_id, committed)
                continue
            if header.is_transactional:
                txn = _TxnBatch(header.producer_id, None)
            rows = [(r.offset, r.key, r.value) for r in batch.records]
            yield header.next_offset, rows, txn
    except CorruptRecordError:
        return  # a partial batch at the end of a read: the next read starts there
