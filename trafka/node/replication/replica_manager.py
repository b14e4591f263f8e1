"""The replica manager of a node: leader and follower replicas, append and read paths.

Roles come from the controller's LeaderAndIsr (issue 5, SEEDS §3): `apply_leader_and_isr`
fences stale controller epochs (STALE_CONTROLLER_EPOCH) and not-newer leader epochs
(`replication.fencing`), then makes each partition a leader (a
`replication.leader.PartitionLeaderState`: remote LEOs, HW, ISR) or a follower (a
`replication.follower.PartitionFollowerState` driven by `replica_fetcher.ReplicaFetchers`:
OffsetForLeaderEpoch truncation first, then Fetch with this broker's replica id).

* The leader's HW moves on the seeds' four triggers (become leader, committed ISR shrink,
  append, follower fetch) and is copied into the log (so consumers, ListOffsets and the HW
  checkpoint `replication-offset-checkpoint` see it).
* ISR changes (`IsrWrite`) are executed by one task as one quorum multi: the conditional set
  of the partition state plus a sequential `/isr_change_notification` child
  (`controller.tree_ops.isr_write_ops`); the shrink check runs every
  `replica.lag.time.max.ms / 2`.
* acks=all: NOT_ENOUGH_REPLICAS before the append when the ISR is below
  `min.insync.replicas`; afterwards the produce is parked (the produce purgatory: one
  `trio.Event` replaced on every HW move) until `acks_all_outcome` decides: success,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER (epoch changed) or
  REQUEST_TIMED_OUT at the request's timeout.

The entry points the handlers call:

* `append(topic, partition, records, required_acks=, timeout_ms=)` -> `AppendResult`
* `read(topic, partition, fetch_offset, max_bytes=, isolation_level=, ...)` -> `ReadResult`
* `list_offset(topic, partition, timestamp, ...)` -> `OffsetResult`

Long-poll fetches and acks=all produces park on `watch(keys)`: a `trio.Event` registered
under each of their partitions (Kafka's purgatory watch keys), set by an append, a HW move
or a follower's HW move of one of those partitions, and by any leadership change (every
watcher). A woken fetch checks its partitions' offsets (`poll`, no read) and reads again only
the partitions that have something to return. (One event for everything woke every parked
fetch and every acks=all produce on each append anywhere: O(parked x partitions) per append.)

Log errors become Kafka error codes here (trafka.log.errors -> ErrorCode), never exceptions
escaping to the connection.

Replication throttles (KIP-73, `replication.throttle`): `leader_quota` and `follower_quota`
take their settings from this node's local replica of the metadata tree (the two rates from
`/config/brokers/<id>`, else `<default>`; the throttled-replica lists from
`/config/topics/<t>` of the topics this node holds), re-read after every LeaderAndIsr and
whenever the broker applies a config change notification (`refresh_throttles`, called by
`trafka.node.config.changes` through the broker), so an AlterConfigs on any broker takes
effect here without a restart. `read` returns no data to a follower outside
the ISR for a partition of the leader list while the leader quota is exceeded; the Fetch
handler records the bytes it sent for listed partitions (`record_leader_throttled_bytes`);
the replica fetchers use `follower_quota`.

Not implemented: the delayed-fetch purgatory keyed by partition (one wake-up event for all
parked fetches), fetch sessions between brokers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import trio
from kio.schema.errors import ErrorCode

from trafka.log import errors as log_errors
from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.validation import RecordValidationError
from trafka.metadata_quorum import znodes
from trafka.metrics.registry import NodeMetrics
from trafka.net.framing import Chunk, FileRegion
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, NoNode
from trafka.node.replication.fencing import ControllerEpochFence, Role, leader_and_isr_role
from trafka.node.replication.follower import PartitionFollowerState
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)
from trafka.node.replication.leader import (
    IsrWrite,
    IsrWriteOutcome,
    PartitionLeaderState,
    acks_all_outcome,
)
from trafka.node.replication.replica_selector import preferred_read_replica
from trafka.node.replication.throttle import (
    ReplicationQuota,
    ThrottleSettings,
    settings_from_configs,
)
from trafka.node.topics import TopicManager

log_ = logging.getLogger("trafka.node.replication.replica_manager")
ISR_WRITE_QUEUE_MAX = 10_000
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"


class IsrWriteFailed(Exception):
    """An ISR write that did not commit (a conflicting version, a lost quorum, ...)."""


class IsrWriteOutcomeUnknown(IsrWriteFailed):
    """An ISR write the quorum timed out on: it may still commit (issue 12, item 6), so
    the leader keeps it pending in its maximal ISR and re-issues it."""


@dataclass(frozen=True, slots=True)
class TreePartitionState:
    """A partition's state as the tree holds it (`/brokers/topics/<t>/partitions/<p>/state`)."""

    leader: int
    leader_epoch: int
    isr: tuple[BrokerId, ...]
    version: ZkVersion


class IsrWrites(Protocol):
    """The partition leader's port to the tree for ISR changes (ZK-12): implemented over the
    node's `MetadataStore` by `trafka.node.controller.isr_writes.TreeIsrWrites`."""

    async def prepare(self) -> None:
        """Create what concurrent writers must agree on (the notifications' parent)."""

    async def write(self, write: IsrWrite) -> ZkVersion:
        """The conditional write of the state plus its change notification, as one multi;
        the state's new version. `IsrWriteFailed` when it did not commit."""

    def current(self, tp: TopicPartition) -> TreePartitionState | None:
        """The state in the local replica of the tree (None: absent or unreadable)."""


class FollowerFetchers(Protocol):
    """What the replica manager tells the node's replica fetchers."""

    def add(self, tp: TopicPartition, leader: int) -> None: ...

    def remove(self, tp: TopicPartition) -> None: ...


RACKS_REFRESH_MS = 1000
"""KIP-392: how stale the brokers' racks may be when choosing a preferred read replica (a
broker that died meanwhile stays eligible while it is in the ISR anyway)."""
READ_NOW_BYTES = 16 * 1024
"""A Fetch answer of a partition this small is read at once through the segment's open
descriptor and kept as bytes; larger ones stay file regions, sent with sendfile."""
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class AppendResult:
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()
    """KIP-467: (batch_index, message) of each refused record."""


@dataclass(frozen=True, slots=True)
class PendingAppend:
    """An acks=-1 append that is in the leader's log and waits for the high watermark."""

    tp: TopicPartition
    leader_epoch: LeaderEpoch
    required_offset: Offset
    result: AppendResult
    log: PartitionLog


Key = tuple[str, int]
"""A watched partition: (topic, partition)."""


class PartitionWatch:
    """A parked Fetch's or acks=all produce's registration (`ReplicaManager.watch`): the
    event to wait on and the partitions that fired since it was armed (None: any)."""

    __slots__ = ("event", "fired", "log_end")

    def __init__(self, log_end: bool) -> None:
        self.event = trio.Event()
        self.fired: list[Key] | None = []
        self.log_end = log_end

    def fire(self, key: Key | None) -> None:
        if key is None:
            self.fired = None
        elif self.fired is not None:
            self.fired.append(key)
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


class ReadResult(NamedTuple):
    """One partition's read (a NamedTuple: a follower's Fetch builds one per partition of
    its session, and a tuple is several times cheaper to build than a frozen dataclass)."""

    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: tuple[Chunk, ...] = ()
    """Whole batches: file regions (sendfile) or bytes."""
    size: int = 0
    aborted_transactions: tuple[tuple[int, int], ...] = ()
    """READ_COMMITTED: (producer id, first offset) of the aborted transactions overlapping
    the records (from the segments' `.txnindex`, KIP-98)."""
    preferred_read_replica: int = -1
    """KIP-392: the follower the consumer should read from instead (no records then)."""
    diverging_epoch: None = None
    """Never set by a read (the fetch session's answer protocol asks it)."""


@dataclass(frozen=True, slots=True)
class PartitionStateUpdate:
    """One LeaderAndIsr partition state, as the handler decoded it."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetResult:
    error_code: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


def _error_for(error: Exception) -> tuple[int, str]:
    """Kafka's error code for a failed log operation: the one the log error carries
    (`trafka.log.errors`); anything else is UNKNOWN_SERVER_ERROR, named in the message."""
    name = type(error).__name__
    message = str(error) or name
    if isinstance(error, log_errors.LogError):
        return error.error_code, message
    return int(ErrorCode.unknown_server_error), f"{name}: {message}"


class ReplicaManager:
    """Append/read/list-offsets over the local logs of the partitions this node leads."""

    def __init__(
        self,
        *,
        node_id: int,
        topics: TopicManager,
        log_manager: LocalLogs,
        log_config_for: Callable[[str], LogConfig],
        store: MetadataStore,
        isr_writes: IsrWrites,
        clock: Clock = SYSTEM_CLOCK,
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self._node_id = node_id
        self._topics = topics
        self._log_manager = log_manager
        self._log_config_for = log_config_for
        self._now_ms = clock.now_ms
        self._watchers: dict[Key, set[PartitionWatch]] = {}
        """Waiting for a HW (or LSO) move: consumers' fetches, acks=all produces."""
        self._log_end_watchers: dict[Key, set[PartitionWatch]] = {}
        """Waiting for an append: followers' fetches (they replicate up to the log end and
        learn a HW move with their next records or at their fetch's deadline, as Kafka's
        DelayedFetch completes a follower's fetch on bytes only)."""
        self.change_seq = 0
        """Counts the changes a caught-up follower's read would see (`changed_since`)."""
        self._changed_at: dict[Key, int] = {}
        self.leadership_epoch = 0
        """Counts leadership changes here (LeaderAndIsr, StopReplica): any answer may change."""
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._store = store
        self._isr_writes = isr_writes
        self.fence = ControllerEpochFence()
        self.leaders: dict[TopicPartition, PartitionLeaderState] = {}
        self.followers: dict[TopicPartition, PartitionFollowerState] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}
        self.named_by_leader_and_isr: set[tuple[str, int]] = set()
        """Every partition a LeaderAndIsr has named since start: the stray-log sweep
        (`trafka.node.stray_logs`) never deletes these, their logs may be newer than the
        tree it read."""
        self.fetchers: FollowerFetchers | None = None
        self.metrics = NodeMetrics()
        """BrokerTopicMetrics and ISR shrinks/expands (the node's registry, trafka.metrics)."""
        """The node's `replica_fetcher.ReplicaFetchers` (they need this manager, so the
        broker hands them over after both exist)."""
        self._isr_send, self._isr_receive = trio.open_memory_channel[IsrWrite](ISR_WRITE_QUEUE_MAX)
        self.leader_quota = ReplicationQuota()
        """KIP-73: the leader side (`leader.replication.throttled.*`)."""
        self.follower_quota = ReplicationQuota()
        """KIP-73: the follower side (`follower.replication.throttled.*`), used by the
        replica fetchers."""
        self.replica_selector: str | None = None
        """KIP-392: `replica.selector.class` (`replication.replica_selector`); None: every
        consumer reads from the leader."""
        self.broker_racks: Callable[[], Mapping[int, str | None]] = dict
        """Every live broker's `broker.rack` (the broker hands over its metadata cache's)."""
        self._racks: tuple[int, Mapping[int, str | None]] = (-RACKS_REFRESH_MS, {})

    # ---- roles (LeaderAndIsr / StopReplica) -----------------------------------------------------
    def apply_leader_and_isr(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], int]:
        """Become leader or follower per partition (Kafka's becomeLeaderOrFollower);
        returns per-partition error codes. The controller epoch was admitted already."""
        errors: dict[tuple[str, int], int] = {}
        now_ms = self._now_ms()
        for update in updates:
            tp = TopicPartition(update.topic, update.partition)
            self.named_by_leader_and_isr.add((update.topic, update.partition))
            if self._node_id not in update.replicas:
                errors[(update.topic, update.partition)] = int(ErrorCode.none)
                continue
            decision = leader_and_isr_role(
                BrokerId(self._node_id),
                BrokerId(update.leader),
                LeaderEpoch(update.leader_epoch),
                None if tp not in self.leader_epochs else LeaderEpoch(self.leader_epochs[tp]),
            )
            self._topics.apply_partition_state(
                update.topic,
                update.partition,
                replicas=update.replicas,
                leader=update.leader,
                leader_epoch=update.leader_epoch,
                isr=update.isr,
            )
            if decision.role is Role.IGNORE:
                errors[(update.topic, update.partition)] = int(decision.error)
                continue
            self.leader_epochs[tp] = update.leader_epoch
            log = self.get_or_create_log(update.topic, update.partition)
            if decision.role is Role.LEADER:
                self.followers.pop(tp, None)
                if self.fetchers is not None:
                    self.fetchers.remove(tp)
                previous = self.leaders.get(tp)  # leading already: a new epoch, same leader
                self.leaders[tp] = PartitionLeaderState.become_leader(
                    tp,
                    BrokerId(self._node_id),
                    leader_epoch=LeaderEpoch(update.leader_epoch),
                    controller_epoch=ControllerEpoch(update.controller_epoch),
                    replicas=tuple(BrokerId(r) for r in update.replicas),
                    isr=tuple(BrokerId(r) for r in update.isr),
                    zk_version=ZkVersion(update.zk_version),
                    log_end_offset=Offset(int(log.log_end_offset)),
                    high_watermark=Offset(int(log.high_watermark)),
                    now_ms=now_ms,
                    replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                    min_insync_replicas=self._min_insync_replicas(
                        update.topic, in_force=max(1, len(update.replicas))
                    ),
                    leading_since_epoch=None if previous is None else previous.leading_since_epoch,
                )
                self._high_watermark_moved(tp)
            elif update.leader < 0:
                # Offline (or being deleted): nobody to follow until the next LeaderAndIsr.
                self.leaders.pop(tp, None)
                self.followers.pop(tp, None)
                if self.fetchers is not None:
                    self.fetchers.remove(tp)
            else:
                self.leaders.pop(tp, None)
                self.followers[tp] = PartitionFollowerState.become_follower(
                    tp, BrokerId(update.leader), LeaderEpoch(update.leader_epoch)
                )
                if self.fetchers is not None:
                    self.fetchers.add(tp, update.leader)
            errors[(update.topic, update.partition)] = int(ErrorCode.none)
        self.refresh_throttles()
        self._wake_fetches()
        return errors

    def stop_replicas(self, partitions: list[tuple[str, int]], *, delete: bool) -> None:
        """StopReplica: stop leading/following; with `delete`, remove the logs."""
        for topic, partition in partitions:
            tp = TopicPartition(topic, partition)
            self.leaders.pop(tp, None)
            self.followers.pop(tp, None)
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            if delete:
                self.leader_epochs.pop(tp, None)
                self._changed_at.pop((topic, partition), None)
                self._log_manager.delete(topic, partition)
        self._wake_fetches()

    def _min_insync_replicas(self, topic: str, *, in_force: int | None = None) -> int:
        """The topic's `min.insync.replicas`. A lookup that fails never weakens acks=all
        (issue 12, item 6): the value in force stays (`in_force`: the leader's current
        value, or the replica count for a new leader, the strictest meaningful one);
        without one the error propagates."""
        try:
            return int(self._log_config_for(topic).min_insync_replicas)
        except Exception:
            if in_force is None:
                raise
            log_.exception("cannot read min.insync.replicas of %s; keeping %d", topic, in_force)
            return in_force

    def _high_watermark_moved(self, tp: TopicPartition, *, appended: bool = False) -> None:
        """The HW of a partition this node leads may have moved (`appended`: after an
        append, which also wakes its followers' parked fetches)."""
        state = self.leaders.get(tp)
        log = self._log_manager.get(tp.topic, tp.partition)
        if state is not None and log is not None:
            log.update_high_watermark(int(state.high_watermark))
        self._wake_partition(tp.topic, tp.partition, appended=appended)

    def follower_fetched(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> None:
        """A follower's Fetch (trigger 4): its LEO, maybe an ISR expansion, maybe the HW."""
        tp = TopicPartition(topic, partition)
        state = self.leaders.get(tp)
        if state is not None:
            self._follower_fetched(tp, state, replica_id, fetch_offset)

    def _follower_fetched(
        self, tp: TopicPartition, state: PartitionLeaderState, replica_id: int, fetch_offset: int
    ) -> None:
        outcome = state.on_follower_fetch(
            BrokerId(replica_id), Offset(fetch_offset), self._now_ms()
        )
        if outcome.isr_write is not None:
            self._queue_isr_write(outcome.isr_write)
        if outcome.high_watermark_advanced:
            self._high_watermark_moved(tp)

    def _queue_isr_write(self, write: IsrWrite) -> None:
        try:
            self._isr_send.send_nowait(write)
        except trio.WouldBlock:
            state = self.leaders.get(write.tp)
            if state is not None and not state.pending_in_doubt:  # in doubt: re-issued later
                state.on_isr_write_result(False, ZkVersion(-1), self._now_ms())

    async def run(self) -> None:
        """The ISR shrink check and the ISR writer (started by the broker)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._isr_writer)
            while True:
                await trio.sleep(max(0.05, self.replica_lag_time_max_ms / 2000))
                now_ms = self._now_ms()
                for state in list(self.leaders.values()):
                    write = state.maybe_shrink_isr(now_ms)
                    if write is not None:
                        self._queue_isr_write(write)

    async def _isr_writer(self) -> None:
        await self._isr_writes.prepare()
        async for write in self._isr_receive:
            outcome, version = IsrWriteOutcome.CONFLICT, ZkVersion(-1)
            try:
                version = await self._isr_writes.write(write)
                outcome = IsrWriteOutcome.COMMITTED
            except IsrWriteOutcomeUnknown as error:
                # It may still commit: stay in doubt, re-issued by the periodic check.
                log_.warning("ISR write for %s has an unknown outcome: %s", write.tp, error)
                outcome = IsrWriteOutcome.UNKNOWN
            except IsrWriteFailed as error:
                log_.info("ISR write for %s failed: %s", write.tp, error)
            state = self.leaders.get(write.tp)
            if state is None or state.leader_epoch != write.leader_epoch:
                continue
            succeeded = outcome is IsrWriteOutcome.COMMITTED
            advanced = state.on_isr_write_result(outcome, version, self._now_ms())
            if outcome is IsrWriteOutcome.CONFLICT:
                self._resync_partition_state(state)
            if succeeded:
                log_.info("ISR of %s-%d is now %s", write.tp.topic, write.tp.partition, write.isr)
                current = self._topics.partition(write.tp.topic, write.tp.partition)
                if current is not None:
                    if len(write.isr) < len(current.isr):
                        self.metrics.isr_shrinks += 1
                    elif len(write.isr) > len(current.isr):
                        self.metrics.isr_expands += 1
                    self._topics.apply_partition_state(
                        write.tp.topic,
                        write.tp.partition,
                        replicas=current.replicas,
                        leader=current.leader,
                        leader_epoch=current.leader_epoch,
                        isr=tuple(write.isr),
                    )
            if advanced:
                self._high_watermark_moved(write.tp)

    def _resync_partition_state(self, state: PartitionLeaderState) -> None:
        """After a conflicting ISR write: if the tree still names this broker leader in the
        same leader epoch (the controller rewrote the state without a new epoch), adopt its
        version and ISR so the next proposal can succeed (Kafka re-reads the state too)."""
        current = self._isr_writes.current(state.tp)
        if current is None:
            return
        if current.leader == self._node_id and current.leader_epoch == state.leader_epoch:
            state.zk_version = current.version
            state.isr = current.isr

    # ---- replication throttles (KIP-73) -----------------------------------------------------
    def apply_throttle_settings(self, settings: ThrottleSettings) -> None:
        """New rates and throttled partitions for both sides; measured rates are kept."""
        self.leader_quota.update(settings.leader_rate_bytes_per_second, settings.leader_partitions)
        self.follower_quota.update(
            settings.follower_rate_bytes_per_second, settings.follower_partitions
        )

    def read_throttle_settings(self) -> ThrottleSettings:
        """This broker's throttle settings from the local replica of the tree:
        `/config/brokers/<id>`, `/config/brokers/<default>` and the config of every topic
        held here."""
        broker_config = self._entity_config(znodes.broker_config_path(self._node_id))
        default_config = self._entity_config(znodes.broker_config_path("<default>"))
        topics = {tp.topic for tp in self.leaders} | {tp.topic for tp in self.followers}
        topic_configs = {
            topic: self._entity_config(znodes.topic_config_path(topic)) for topic in topics
        }
        return settings_from_configs(
            self._node_id, broker_config, topic_configs, default_broker_config=default_config
        )

    def _entity_config(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._store.get_local(path)
        except NoNode:
            return {}
        if not data:
            return {}
        try:
            return dict(znodes.EntityConfig.from_json(bytes(data)).config)
        except znodes.ZNodeFormatError:
            return {}

    def refresh_throttles(self) -> None:
        """Re-read and apply the throttle settings (after every LeaderAndIsr, so a partition
        starts under its throttle, and after every config change the broker applies)."""
        try:
            settings = self.read_throttle_settings()
        except Exception:  # a stopping quorum must not take the replica manager down
            log_.exception("cannot read the replication throttle configs")
            return
        self.apply_throttle_settings(settings)

    def record_leader_throttled_bytes(self, sent: Iterable[tuple[str, int, int]]) -> None:
        """After a follower's Fetch response: count the bytes of every (topic, partition,
        size) on the leader list, in-sync or not (`KafkaApis.sizeOfThrottledPartitions`)."""
        if not self.leader_quota.throttled:
            return  # no partition listed: nothing to count (and `sent` is not walked)
        total = sum(
            size
            for topic, partition, size in sent
            if size > 0 and self.leader_quota.is_throttled(topic, partition)
        )
        self.leader_quota.record(total, self._now_ms())

    # ---- plumbing -----------------------------------------------------------------------------
    def watch(self, keys: Iterable[tuple[str, int]], *, log_end: bool = False) -> PartitionWatch:
        """A watch woken by the next HW move (or append, or follower HW move) of one of the
        (topic, partition) `keys`, or by any leadership change; `log_end` (a follower's
        fetch): by the next append instead. After a wake `rearm` it; `unwatch` it at the
        end."""
        watch = PartitionWatch(log_end)
        self._register(watch, keys)
        return watch

    def rearm(self, watch: PartitionWatch, keys: Iterable[tuple[str, int]]) -> list[Key] | None:
        """After a wake: a fresh event, registered again under the keys that fired (the
        others still hold it), and those keys returned (None: all of them may have
        changed, a leadership change)."""
        fired = watch.fired
        watch.event = trio.Event()
        watch.fired = []
        self._register(watch, keys if fired is None else fired)
        return fired

    def _register(self, watch: PartitionWatch, keys: Iterable[Key]) -> None:
        watchers = self._log_end_watchers if watch.log_end else self._watchers
        for key in keys:
            watches = watchers.get(key)
            if watches is None:
                watchers[key] = {watch}
            else:
                watches.add(watch)

    def unwatch(self, watch: PartitionWatch, keys: Iterable[tuple[str, int]]) -> None:
        watchers = self._log_end_watchers if watch.log_end else self._watchers
        for key in keys:
            watches = watchers.get(key)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del watchers[key]

    def _wake_partition(self, topic: str, partition: int, *, appended: bool = False) -> None:
        key = (topic, partition)
        self.change_seq += 1
        self._changed_at[key] = self.change_seq
        watches = self._watchers.pop(key, None)
        if watches:
            for watch in watches:
                watch.fire(key)
        if appended:
            watches = self._log_end_watchers.pop(key, None)
            if watches:
                for watch in watches:
                    watch.fire(key)

    def _wake_fetches(self) -> None:
        """Leadership changed: every watcher checks again (rare: LeaderAndIsr, StopReplica)."""
        self.change_seq += 1
        self.leadership_epoch += 1
        for watchers in (self._watchers, self._log_end_watchers):
            for watches in watchers.values():
                for watch in watches:
                    watch.fire(None)
            watchers.clear()

    def _leader_log(
        self, topic: str, partition: int, *, allow_follower: bool = False
    ) -> tuple[int, PartitionLog | None, int]:
        """(error_code, log or None, leader_epoch). `allow_follower`: a follower's log
        too, with the leader epoch this follower knows (consumer fetches, KIP-392)."""
        tp = TopicPartition(topic, partition)
        if allow_follower and tp in self.followers:
            try:
                log = self.get_or_create_log(topic, partition)
            except log_errors.LogDirFailedError:
                return int(ErrorCode.kafka_storage_error), None, self.leader_epochs.get(tp, -1)
            return 0, log, int(self.followers[tp].leader_epoch)
        leader = self.leaders.get(tp)
        if leader is not None:
            try:
                log = self.get_or_create_log(topic, partition)
            except log_errors.LogDirFailedError:
                # its log dir went offline (full disk, I/O error): Kafka answers
                # KAFKA_STORAGE_ERROR for the partition, the request itself succeeds
                return int(ErrorCode.kafka_storage_error), None, int(leader.leader_epoch)
            return 0, log, int(leader.leader_epoch)
        state = self._topics.partition(topic, partition)
        if state is None:
            return int(ErrorCode.unknown_topic_or_partition), None, -1
        return int(ErrorCode.not_leader_or_follower), None, state.leader_epoch

    def log_dir_failed(self, topic: str, partition: int, error: Exception) -> None:
        """Kafka's LogDirFailureChannel: an I/O error in one log takes its whole dir offline,
        so the partition's next requests get KAFKA_STORAGE_ERROR. (Left online, the next
        idempotent batch was checked against a log whose last write had failed and got
        OUT_OF_ORDER_SEQUENCE_NUMBER, which makes librdkafka bump its producer epoch and
        re-send possibly written batches of other partitions as new ones: duplicates.)
        When it was the last online dir, a knode process halts (`trafka.log.storage_failure`)."""
        manager = getattr(self._log_manager, "manager", None)
        if manager is None:
            return
        log_dir = manager.dir_of(topic, partition)
        if log_dir is not None:
            manager.mark_dir_offline(log_dir, str(error))

    def logs_to_create(self, updates: list[PartitionStateUpdate]) -> list[tuple[str, int]]:
        """The partitions of a LeaderAndIsr that this node holds and has no log of yet:
        the handler creates them with `create_logs` on a worker thread first, because
        creating a log waits for the disk (directory and `partition.metadata` fsyncs)."""
        return [
            (update.topic, update.partition)
            for update in updates
            if self._node_id in update.replicas
            and self._log_manager.get(update.topic, update.partition) is None
        ]

    def create_logs(self, partitions: list[tuple[str, int]]) -> None:
        """Create the logs of `partitions`; safe on a worker thread (the log manager has its
        lock). A failure is left to `apply_leader_and_isr`, which meets it again and answers
        KAFKA_STORAGE_ERROR for that partition.

        The logs are created without waiting for their fsyncs (most of the time of a
        LeaderAndIsr that creates thousands: issue 19's S2), which the log
        manager's background thread then pays; each log pays its own before its first
        append (`PartitionLog.sync_creation`), as Kafka flushes `partition.metadata`."""
        created: list[PartitionLog] = []
        for topic, partition in partitions:
            try:
                created.append(self.get_or_create_log(topic, partition, durable=False))
            except Exception as error:
                log_.debug("creating the log of %s-%d failed: %r", topic, partition, error)
        self._log_manager.sync_created(created)

    def get_or_create_log(
        self, topic: str, partition: int, *, durable: bool = True
    ) -> PartitionLog:
        log = self._log_manager.get(topic, partition)
        if log is None:
            state = self._topics.get(topic)
            log = self._log_manager.get_or_create(
                topic,
                partition,
                config=self._log_config_for(topic),
                topic_id=state.topic_id if state is not None else None,
                durable=durable,
            )
        return log

    # ---- produce ------------------------------------------------------------------------------
    def append_records(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        required_acks: int,
        transactional: bool = False,
    ) -> AppendResult | PendingAppend:
        """The synchronous half of a produce: check, append to the leader's log, move the HW.

        Returns the final result (an error, or success for acks 0/1), or a `PendingAppend`
        for acks=-1 that `complete_append` waits on. No await happens here, so appends made
        by consecutive calls land in the order of the calls (per-partition order, MSG-05).
        """
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            self.metrics.produce_failed(topic)
            return AppendResult(error_code)
        if not records:
            self.metrics.produce_failed(topic)
            return AppendResult(int(ErrorCode.corrupt_message), error_message="empty record set")
        tp = TopicPartition(topic, partition)
        leader = self.leaders[tp]
        leader.min_insync_replicas = self._min_insync_replicas(
            topic, in_force=leader.min_insync_replicas
        )
        before = leader.check_before_append(required_acks)
        if before is not ErrorCode.none:
            self.metrics.produce_failed(topic)
            return AppendResult(
                int(before),
                error_message=f"The size of the current ISR {set(leader.isr)} is insufficient "
                f"to satisfy the min.isr requirement of {leader.min_insync_replicas}",
            )
        try:
            info = log.append_as_leader(records, leader_epoch=leader_epoch, now_ms=self._now_ms())
        except Exception as error:  # log errors -> Kafka codes; anything else is a bug
            if isinstance(error, log_errors.LogDirFailedError):
                self.log_dir_failed(topic, partition, error)
            code, message = _error_for(error)
            self.metrics.produce_failed(topic)
            return AppendResult(
                code,
                log_start_offset=log.log_start_offset,
                error_message=message,
                record_errors=tuple(
                    (e.batch_index, e.message)
                    for e in (
                        error.record_errors if isinstance(error, RecordValidationError) else ()
                    )
                ),
            )
        if not info.duplicate:
            leader.on_append(Offset(int(log.log_end_offset)), self._now_ms())
            self._high_watermark_moved(tp, appended=True)
            self.metrics.produced(
                topic, int(info.last_offset) - int(info.first_offset) + 1, len(records)
            )
        result = AppendResult(
            0,
            base_offset=int(info.first_offset),
            log_append_time_ms=int(info.log_append_time_ms),
            log_start_offset=int(log.log_start_offset),
        )
        if required_acks != -1:
            return result
        return PendingAppend(
            tp, LeaderEpoch(leader_epoch), Offset(int(info.last_offset) + 1), result, log
        )

    async def complete_append(self, pending: PendingAppend, timeout_ms: int) -> AppendResult:
        """The acks=-1 half: wait in the purgatory until the HW passes the appended batch."""
        outcome = await self._wait_for_replication(
            pending.tp, pending.leader_epoch, pending.required_offset, timeout_ms
        )
        if outcome is not ErrorCode.none:
            return AppendResult(int(outcome), log_start_offset=int(pending.log.log_start_offset))
        return pending.result

    async def append(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        required_acks: int,
        timeout_ms: int,
        transactional: bool = False,
    ) -> AppendResult:
        """`append_records` then, for acks=-1, `complete_append`."""
        step = self.append_records(
            topic, partition, records, required_acks=required_acks, transactional=transactional
        )
        if isinstance(step, AppendResult):
            return step
        return await self.complete_append(step, timeout_ms)

    async def append_end_transaction_marker(
        self,
        topic: str,
        partition: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        timeout_ms: int,
    ) -> int:
        """WriteTxnMarkers on this leader: write the control batch, wait for the ISR (Kafka
        appends markers with acks=all); returns a Kafka error code."""
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return error_code
        tp = TopicPartition(topic, partition)
        try:
            info = log.append_end_transaction_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                committed=committed,
                leader_epoch=leader_epoch,
                now_ms=self._now_ms(),
            )
        except log_errors.TransactionCoordinatorFencedError:
            return int(ErrorCode.transaction_coordinator_fenced)
        except Exception as error:
            return _error_for(error)[0]
        self.leaders[tp].on_append(Offset(int(log.log_end_offset)), self._now_ms())
        self._high_watermark_moved(tp, appended=True)
        outcome = await self._wait_for_replication(
            tp, LeaderEpoch(leader_epoch), Offset(int(info.last_offset) + 1), timeout_ms
        )
        return int(outcome)

    async def _wait_for_replication(
        self, tp: TopicPartition, leader_epoch: LeaderEpoch, required: Offset, timeout_ms: int
    ) -> ErrorCode:
        """The produce purgatory (REP-30): park until the HW passes `required`."""
        deadline_ms = self._now_ms() + max(0, timeout_ms)
        keys = ((tp.topic, tp.partition),)
        waiter = self.watch(keys)
        try:
            while True:
                outcome = acks_all_outcome(
                    self.leaders.get(tp), leader_epoch, required, self._now_ms(), deadline_ms
                )
                if outcome is not None:
                    return outcome
                with trio.move_on_after(max(0.0, (deadline_ms - self._now_ms()) / 1000) + 0.001):
                    await waiter.wait()
                self.rearm(waiter, keys)
        finally:
            self.unwatch(waiter, keys)

    # ---- fetch --------------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        *,
        max_bytes: int,
        isolation_level: int,
        current_leader_epoch: int = -1,
        min_one_batch: bool = True,
        replica_id: int = -1,
        client_rack: str | None = None,
        record_follower_fetch: bool = True,
    ) -> ReadResult:
        """One partition's part of a Fetch. `client_rack`: a consumer's Fetch v11+ carries
        client metadata (its `rack_id`, maybe empty); then a follower serves it up to its
        high watermark and a leader may name a preferred read replica (KIP-392). Without
        it (older versions, followers) only the leader answers, as in Kafka.

        A follower's read (`replica_id` >= 0) also records its fetch offset (trigger 4: its
        LEO, maybe the ISR, maybe the HW) unless `record_follower_fetch` is False: a parked
        Fetch read again records nothing, its offset was recorded when it arrived (Kafka
        updates the follower's state once per Fetch, not in DelayedFetch)."""
        if replica_id >= 0 and record_follower_fetch:
            caught_up = self.read_caught_up(
                topic, partition, fetch_offset, current_leader_epoch, replica_id
            )
            if caught_up is not None:
                return caught_up
        from_consumer_v11 = replica_id < 0 and client_rack is not None
        error_code, log, leader_epoch = self._leader_log(
            topic, partition, allow_follower=from_consumer_v11
        )
        if log is None:
            self.metrics.fetch_failed(topic)
            return ReadResult(error_code)
        if current_leader_epoch >= 0 and current_leader_epoch != leader_epoch:
            code: ErrorCode = (
                ErrorCode.fenced_leader_epoch
                if current_leader_epoch < leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return ReadResult(int(code))
        if from_consumer_v11 and self.replica_selector is not None:
            preferred = self._preferred_read_replica(
                topic, partition, str(client_rack), fetch_offset, int(log.log_end_offset)
            )
            if preferred is not None:
                # Kafka skips the read and answers the offsets with the replica to use.
                return ReadResult(
                    0,
                    int(log.high_watermark),
                    int(getattr(log, "last_stable_offset", log.high_watermark)),
                    int(log.log_start_offset),
                    preferred_read_replica=preferred,
                )
        if (
            replica_id >= 0
            and record_follower_fetch
            and int(log.log_start_offset) <= fetch_offset <= int(log.log_end_offset)
        ):
            # Only an offset inside the leader's log says how far the follower matches it.
            self.follower_fetched(topic, partition, replica_id, fetch_offset)
        high_watermark = int(log.high_watermark)
        log_start_offset = int(log.log_start_offset)
        last_stable_offset = int(getattr(log, "last_stable_offset", high_watermark))
        upper = last_stable_offset if isolation_level == READ_COMMITTED else high_watermark
        if replica_id >= 0:
            upper = int(log.log_end_offset)  # followers replicate up to the LEO (REP-11)
        if fetch_offset < log_start_offset or fetch_offset > int(log.log_end_offset):
            return ReadResult(
                int(ErrorCode.offset_out_of_range),
                high_watermark,
                last_stable_offset,
                log_start_offset,
            )
        if fetch_offset >= upper or (max_bytes <= 0 and not min_one_batch):
            return ReadResult(0, high_watermark, last_stable_offset, log_start_offset, (), 0)
        if replica_id >= 0 and self._leader_throttles(topic, partition, replica_id):
            # KIP-73: an out-of-sync follower of a listed partition gets no data while the
            # leader quota is exceeded (Kafka's shouldLeaderThrottle).
            return ReadResult(0, high_watermark, last_stable_offset, log_start_offset, (), 0)
        try:
            data = log.read(
                fetch_offset,
                max_bytes=max_bytes,
                max_offset=upper,
                min_one_batch=min_one_batch,
                bytes_up_to=READ_NOW_BYTES,
            )
        except Exception as error:
            read_code, _ = _error_for(error)
            self.metrics.fetch_failed(topic)
            return ReadResult(read_code, high_watermark, last_stable_offset, log_start_offset)
        records, size = _fetch_payload(data)
        if replica_id < 0:
            self.metrics.fetched(topic, size)
        aborted: tuple[tuple[int, int], ...] = ()
        if isolation_level == READ_COMMITTED and size and replica_id < 0:
            aborted = tuple(
                (txn.producer_id, txn.first_offset)
                for txn in log.collect_aborted_transactions(fetch_offset, int(data.next_offset))
            )
        return ReadResult(
            0, high_watermark, last_stable_offset, log_start_offset, records, size, aborted
        )

    def read_caught_up(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        current_leader_epoch: int,
        replica_id: int,
    ) -> ReadResult | None:
        """`read` of a follower's first pass when the follower is caught up (its fetch
        offset is this leader's log end), else None (then `read` it). The common case: a
        session names every partition the follower follows here, thousands at scale, and
        most have nothing new. The same answer and the same recording as `read`, without
        its lookups."""
        tp = TopicPartition(topic, partition)
        state = self.leaders.get(tp)
        if state is None:
            return None
        log = self._log_manager.get(topic, partition)
        if (
            log is None
            or fetch_offset != log.log_end_offset
            or (current_leader_epoch >= 0 and current_leader_epoch != state.leader_epoch)
            or fetch_offset < log.log_start_offset
        ):
            return None
        self._follower_fetched(tp, state, replica_id, fetch_offset)
        return ReadResult(
            0, int(log.high_watermark), int(log.last_stable_offset), int(log.log_start_offset)
        )

    def changed_since(self, topic: str, partition: int, seq: int) -> bool:
        """Has the partition's answer to a caught-up follower changed since `change_seq`
        was `seq` (an append, a HW move, a DeleteRecords; leadership changes move
        `leadership_epoch` instead)? Retention moving the log start offset on the
        maintenance thread is not counted: followers learn it within `quiet_walk_ms`."""
        return self._changed_at.get((topic, partition), 0) > seq

    @property
    def quiet_walk_ms(self) -> int:
        """How often a follower's quiet partitions are read anyway (`QuietPartitions`):
        often enough that its caught-up time never lapses (a fifth of
        replica.lag.time.max.ms), at most every second."""
        return min(1000, self.replica_lag_time_max_ms // 5)

    def _preferred_read_replica(
        self, topic: str, partition: int, client_rack: str, fetch_offset: int, log_end: int
    ) -> int | None:
        state = self.leaders.get(TopicPartition(topic, partition))
        if state is None:  # a follower serving the consumer: never redirects
            return None
        now_ms = self._now_ms()
        return preferred_read_replica(
            state,
            selector=self.replica_selector,
            client_rack=client_rack,
            fetch_offset=fetch_offset,
            leader_log_end_offset=log_end,
            racks=self._live_racks(now_ms),
            now_ms=now_ms,
        )

    def _live_racks(self, now_ms: int) -> Mapping[int, str | None]:
        """`broker_racks()`, re-read at most every RACKS_REFRESH_MS: it parses every
        registration, and a consumer's fetch asks for each of its partitions."""
        read_at_ms, racks = self._racks
        if not 0 <= now_ms - read_at_ms < RACKS_REFRESH_MS:
            racks = self.broker_racks()
            self._racks = (now_ms, racks)
        return racks

    def follower_high_watermark_advanced(self, topic: str, partition: int) -> None:
        """A follower's HW moved (the replica fetcher): wake the consumers long-polling this
        follower (KIP-392; Kafka's fetcher completes their delayed fetches likewise)."""
        self._wake_partition(topic, partition)

    def fetchable(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        *,
        isolation_level: int,
        current_leader_epoch: int = -1,
        replica_id: int = -1,
    ) -> bool:
        """Could `read` now answer this partition with records or an error? (`poll`)"""
        return (
            self.poll(
                topic,
                partition,
                fetch_offset,
                isolation_level=isolation_level,
                current_leader_epoch=current_leader_epoch,
                replica_id=replica_id,
            )
            is None
        )

    def poll(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        *,
        isolation_level: int,
        current_leader_epoch: int = -1,
        replica_id: int = -1,
    ) -> tuple[int, int, int] | None:
        """None if `read` could now answer this partition with records or an error; else
        the (high watermark, last stable offset, log start offset) of its empty answer.
        Kafka's `DelayedFetch.tryComplete`: a parked Fetch woken by an append or a HW move
        checks its partitions' offsets and reads again only those that have something
        (reading every partition of a follower's Fetch on every wake-up cost the leader
        most of its CPU under synchronous commits, docs/performance.md "commit latency").
        No read, no side effect; anything unusual (not the leader, another epoch, an
        offset out of range) answers None so that the real read answers it."""
        leader = self.leaders.get(TopicPartition(topic, partition))
        log = self._log_manager.get(topic, partition)
        if leader is None or log is None:
            return None
        if current_leader_epoch >= 0 and current_leader_epoch != int(leader.leader_epoch):
            return None
        log_end_offset = int(log.log_end_offset)
        log_start_offset = int(log.log_start_offset)
        if fetch_offset < log_start_offset or fetch_offset > log_end_offset:
            return None
        high_watermark = int(log.high_watermark)
        last_stable_offset = int(getattr(log, "last_stable_offset", high_watermark))
        if replica_id >= 0:
            upper = log_end_offset  # followers replicate up to the LEO (REP-11)
        elif isolation_level == READ_COMMITTED:
            upper = last_stable_offset
        else:
            upper = high_watermark
        if fetch_offset < upper:
            return None
        return high_watermark, last_stable_offset, log_start_offset

    def _leader_throttles(self, topic: str, partition: int, replica_id: int) -> bool:
        leader = self.leaders.get(TopicPartition(topic, partition))
        in_sync = leader is not None and BrokerId(replica_id) in leader.isr
        return self.leader_quota.should_throttle(
            topic, partition, in_sync=in_sync, now_ms=self._now_ms()
        )

    # ---- list offsets -------------------------------------------------------------------------
    def list_offset(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        isolation_level: int,
        current_leader_epoch: int = -1,
        debugging: bool = False,
    ) -> OffsetResult:
        """ListOffsets for one partition. `debugging` (replica id -2): a follower answers
        too, and "latest" is the log end offset (Kafka: no isolation for non-clients)."""
        error_code, log, leader_epoch = self._leader_log(topic, partition, allow_follower=debugging)
        if log is None:
            return OffsetResult(error_code)
        if current_leader_epoch >= 0 and current_leader_epoch < leader_epoch:
            return OffsetResult(int(ErrorCode.fenced_leader_epoch))
        high_watermark = int(log.log_end_offset if debugging else log.high_watermark)
        if debugging and timestamp == LATEST_TIMESTAMP:
            return OffsetResult(0, high_watermark, -1, leader_epoch)
        if timestamp == LATEST_TIMESTAMP:
            offset = (
                int(getattr(log, "last_stable_offset", high_watermark))
                if isolation_level == READ_COMMITTED
                else high_watermark
            )
            return OffsetResult(0, offset, -1, leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetResult(0, int(log.log_start_offset), -1, leader_epoch)
        found = log.offset_for_timestamp(timestamp)
        if found is None:
            return OffsetResult(0, -1, -1, -1)
        if timestamp != MAX_TIMESTAMP and found.offset >= high_watermark:
            return OffsetResult(0, -1, -1, -1)
        found_epoch = -1 if found.leader_epoch is None else found.leader_epoch
        return OffsetResult(0, found.offset, found.timestamp, found_epoch)

    def end_offset_for_epoch(
        self, topic: str, partition: int, epoch: int, *, current_leader_epoch: int = -1
    ) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch: (error_code, epoch, end_offset)."""
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return error_code, -1, -1
        if current_leader_epoch >= 0 and current_leader_epoch != leader_epoch:
            code = (
                ErrorCode.fenced_leader_epoch
                if current_leader_epoch < leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return int(code), -1, -1
        found_epoch, end_offset = log.end_offset_for_epoch(epoch)
        return 0, int(found_epoch), int(end_offset)

    # ---- admin --------------------------------------------------------------------------------
    def delete_records_before(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords: (error_code, low_watermark)."""
        error_code, log, _ = self._leader_log(topic, partition)
        if log is None:
            return error_code, -1
        high_watermark = int(log.high_watermark)
        target = high_watermark if offset == -1 else offset
        if target < 0 or target > high_watermark:
            return int(ErrorCode.offset_out_of_range), -1
        try:
            log.delete_records_before(target)
        except Exception as error:
            return _error_for(error)[0], -1
        self.change_seq += 1
        self._changed_at[(topic, partition)] = self.change_seq
        return 0, int(log.log_start_offset)

    def delete_partition_logs(self, topic: str, partitions: list[int]) -> None:
        for partition in partitions:
            self._log_manager.delete(topic, partition)


def _fetch_payload(data: Any) -> tuple[tuple[Chunk, ...], int]:
    """(chunks, size) from the log's FetchData: file regions sent with os.sendfile.

    A region whose segment is deleted (retention) or shortened (follower truncation) before
    the response is written makes the net layer close the connection; the client retries.
    """
    if data is None or data.size == 0:
        return (), 0
    if data.data is not None:
        return (data.data,), len(data.data)
    chunks = tuple(
        FileRegion(str(region.path), region.position, region.length) for region in data.regions
    )
    return chunks, int(data.size)
