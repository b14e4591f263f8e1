"""Follower fetchers: `num.replica.fetchers` tasks per source broker (Kafka's
ReplicaFetcherThread, REP-11).

A partition followed from a leader goes to the fetcher `abs(31 * hash(topic) + partition) %
num.replica.fetchers` of that leader (Kafka's `AbstractFetcherManager.getFetcherId`, Java's
String.hashCode). Each task owns one `KafkaConnection` to its leader and loops over its
partitions, each driven by its `replication.follower.PartitionFollowerState`:

1. TRUNCATING partitions: one OffsetForLeaderEpoch v4 (replica id = this broker) asking for
   the local latest epoch; the answer goes through `on_epoch_answer` (KIP-101/279) and the
   log is truncated to the decided offset;
2. FETCHING partitions: one Fetch v12 (replica id = this broker, long poll
   `replica.fetch.wait.max.ms`) from each partition's LEO with its current leader epoch
   (KIP-320); records are appended with their offsets and epochs (`append_as_follower`),
   then the follower HW = min(LEO, leader HW) (REP-13) and the follower's log start offset
   follows the leader's (DeleteRecords). OFFSET_OUT_OF_RANGE below the leader's log start
   restarts the log there; above it the epoch handshake runs again. A batch that starts
   below an empty log's start (the leader's log start inside a batch) restarts the log at
   the batch, as Kafka's Partition does.

An answer is applied only if the partition's follower state is still the object the request
was built from: a LeaderAndIsr in between makes it stale (docs/controller.md).

Replication throttles (KIP-73, `replication.throttle`): a FETCHING partition is left out of
the next Fetch when its replica is not in sync (its lag behind the leader's high watermark
after the last answer is unknown or > 0), it is on this broker's
`follower.replication.throttled.replicas`, and `follower.replication.throttled.rate` is
exceeded (Kafka's `shouldFollowerThrottle`). The bytes fetched for every listed partition
are recorded, in sync or not. When every partition is held back the task waits until the
rate falls to the bound (at most `replica.fetch.backoff.ms`).

Fetch sessions (KIP-227): each task keeps an incremental fetch session with its leader
(`fetch_session_client`): after the first full Fetch, a request names only the partitions
whose fetch offset or leader epoch changed and the leader answers only partitions with news.
An answer part dropped as stale (a LeaderAndIsr or a truncation in between) makes the next
request full, so no high watermark change is lost; a failed request does too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio
from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_request
from kio.schema.types import BrokerId as KioBrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i32

from trafka.group.hashing import java_string_hash_code, kafka_utils_abs
from trafka.log.errors import LogDirFailedError, UnexpectedAppendOffsetError
from trafka.log.partition_log import PartitionLog
from trafka.net import fetch_encoding
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.replication.fetch_session_client import FetchSessionClient
from trafka.node.replication.follower import (
    EpochRequest,
    FetchAction,
    FollowerPhase,
    PartitionFollowerState,
    follower_log_start_offset,
)
from trafka.node.replication.ids import LeaderEpoch, Offset, TopicPartition
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.replication.truncation import EpochEndOffset
from trafka.node.security.inter_broker import InterBrokerClient

log = logging.getLogger("trafka.node.replication.replica_fetcher")

CONNECT_BACKOFF_S = 0.2

FetcherKey = tuple[int, int]
"""(source broker, fetcher id)."""
FetchData = tuple[int, int, int]
"""What the fetcher asks of a partition: (fetch offset, current leader epoch, max bytes)."""


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's `getFetcherId`: `Utils.abs(31 * topic.hashCode + partition) % fetchers`."""
    mixed = (31 * java_string_hash_code(tp.topic) + tp.partition) & 0xFFFFFFFF
    signed = mixed - (1 << 32) if mixed >= 1 << 31 else mixed
    return kafka_utils_abs(signed) % max(1, num_fetchers)


class ReplicaFetchers:
    """The fetcher tasks of one broker, keyed by source (leader) broker and fetcher id."""

    def __init__(
        self,
        *,
        node_id: int,
        replica_manager: ReplicaManager,
        endpoint_for: Callable[[int], tuple[str, int] | None],
        clock: Clock = SYSTEM_CLOCK,
        inter_broker: InterBrokerClient | None = None,
        fetch_wait_max_ms: int = 500,
        fetch_max_bytes: int = 1_048_576,
        backoff_ms: int = 1000,
        num_fetchers: int = 1,
    ) -> None:
        self.node_id = node_id
        self.num_fetchers = max(1, num_fetchers)
        self.replica_manager = replica_manager
        self._clock = clock
        self.endpoint_for = endpoint_for
        #: The inter-broker listener's security (issue 12 item 2, issue 14 item 4).
        self.inter_broker = inter_broker or InterBrokerClient()
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.backoff_s = min(backoff_ms, 1000) / 1000
        self.partitions: dict[FetcherKey, set[TopicPartition]] = {}
        self.lag: dict[TopicPartition, int] = {}
        """Each partition's lag behind the leader's HW after the last answer (Kafka's
        `PartitionFetchState.lag`; in sync for throttling when 0, unknown until fetched)."""
        self._changed: dict[FetcherKey, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for key in list(self.partitions):
                nursery.start_soon(self._fetch_loop, key)
            await trio.sleep_forever()

    def add(self, tp: TopicPartition, leader: int) -> None:
        self.remove(tp)
        key = (leader, fetcher_id(tp, self.num_fetchers))
        partitions = self.partitions.setdefault(key, set())
        partitions.add(tp)
        if key not in self._changed:
            self._changed[key] = trio.Event()
            if self._nursery is not None:
                self._nursery.start_soon(self._fetch_loop, key)
        else:
            self._changed[key].set()

    def remove(self, tp: TopicPartition) -> None:
        self.lag.pop(tp, None)
        for key, partitions in self.partitions.items():
            if tp in partitions:
                partitions.discard(tp)
                event = self._changed.get(key)
                if event is not None:
                    event.set()

    def _states(self, key: FetcherKey) -> dict[TopicPartition, PartitionFollowerState]:
        followers = self.replica_manager.followers
        leader = key[0]
        return {
            tp: followers[tp]
            for tp in sorted(self.partitions.get(key, ()))
            if tp in followers and followers[tp].leader == leader
        }

    async def _fetch_loop(self, key: FetcherKey) -> None:
        leader = key[0]
        connection: KafkaConnection | None = None
        session: FetchSessionClient[TopicPartition, FetchData] = FetchSessionClient()
        try:
            while True:
                states = self._states(key)
                if not states:
                    event = self._changed[key]
                    with trio.move_on_after(1.0):
                        await event.wait()
                    self._changed[key] = trio.Event()
                    continue
                try:
                    if connection is None or connection.closed:
                        endpoint = self.endpoint_for(leader)
                        if endpoint is None:
                            await trio.sleep(CONNECT_BACKOFF_S)
                            continue
                        connection = await self.inter_broker.connect(
                            endpoint[0],
                            endpoint[1],
                            client_id=f"replica-fetcher-{self.node_id}-{key[1]}",
                            connect_timeout_s=2.0,
                            request_timeout_s=max(5.0, self.fetch_wait_max_ms / 1000 + 5),
                        )
                    truncating = {
                        tp: s for tp, s in states.items() if s.phase is FollowerPhase.TRUNCATING
                    }
                    if truncating:
                        await self._truncate(connection, truncating)
                        continue
                    backoff = await self._fetch(connection, states, session)
                    if backoff:
                        await trio.sleep(self.backoff_s)
                except LogDirFailedError as error:
                    # a log of an offline dir (Kafka: KAFKA_STORAGE_ERROR, the partition stops
                    # being fetched); with no log dir left the node has halted already
                    log.error("fetcher %d <- %d: %s", self.node_id, leader, error)
                    await trio.sleep(CONNECT_BACKOFF_S)
                except (ClientError, OSError) as error:
                    log.info("fetcher %d <- %d: %s", self.node_id, leader, error)
                    session.on_error()
                    if connection is not None:
                        await connection.close()
                    connection = None
                    await trio.sleep(CONNECT_BACKOFF_S)
        finally:
            if connection is not None:
                await connection.close()

    async def _truncate(
        self, connection: KafkaConnection, states: dict[TopicPartition, PartitionFollowerState]
    ) -> None:
        asked: dict[TopicPartition, tuple[PartitionFollowerState, EpochRequest]] = {}
        for tp, state in states.items():
            log_ = self.replica_manager.get_or_create_log(tp.topic, tp.partition)
            request = state.next_request(log_.leader_epoch_cache, int(log_.log_end_offset))
            assert isinstance(request, EpochRequest)
            asked[tp] = (state, request)
        by_topic: dict[str, list[Any]] = {}
        for tp, (_, request) in asked.items():
            by_topic.setdefault(tp.topic, []).append(
                epoch_request.OffsetForLeaderPartition(
                    partition=i32(tp.partition),
                    current_leader_epoch=i32(request.current_leader_epoch),
                    leader_epoch=i32(request.leader_epoch),
                )
            )
        response = await connection.request(
            epoch_request.OffsetForLeaderEpochRequest(
                replica_id=KioBrokerId(self.node_id),
                topics=tuple(
                    epoch_request.OffsetForLeaderTopic(topic=TopicName(t), partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
        backoff = False
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.topic), int(p.partition))
                entry = asked.get(tp)
                if entry is None or self.replica_manager.followers.get(tp) is not entry[0]:
                    continue  # stale: a LeaderAndIsr replaced the state meanwhile
                state = entry[0]
                log_ = self.replica_manager.get_or_create_log(tp.topic, tp.partition)
                decision = state.on_epoch_answer(
                    ErrorCode(int(p.error_code)),
                    EpochEndOffset(LeaderEpoch(int(p.leader_epoch)), Offset(int(p.end_offset))),
                    log_.leader_epoch_cache,
                    int(log_.log_end_offset),
                    int(log_.high_watermark),
                )
                if decision is None:
                    backoff = True
                    continue
                if decision.offset < int(log_.log_end_offset):
                    log.info(
                        "%s-%d: truncating to %d (%s)",
                        tp.topic,
                        tp.partition,
                        decision.offset,
                        decision.reason.value,
                    )
                    log_.truncate_to(int(decision.offset))
        if backoff:
            await trio.sleep(self.backoff_s)

    def _unthrottled(
        self, states: dict[TopicPartition, PartitionFollowerState], now_ms: int
    ) -> dict[TopicPartition, PartitionFollowerState]:
        quota = self.replica_manager.follower_quota
        if not quota.throttled:
            return states  # no partition listed: none is held back
        return {
            tp: state
            for tp, state in states.items()
            if not quota.should_throttle(
                tp.topic, tp.partition, in_sync=self.lag.get(tp) == 0, now_ms=now_ms
            )
        }

    async def _fetch(
        self,
        connection: KafkaConnection,
        states: dict[TopicPartition, PartitionFollowerState],
        session: FetchSessionClient[TopicPartition, FetchData],
    ) -> bool:
        now_ms = self._clock.now_ms()
        states = self._unthrottled(states, now_ms)
        if not states:  # everything is held back by the follower quota (KIP-73)
            delay_ms = self.replica_manager.follower_quota.delay_ms(
                now_ms, maximum_ms=int(self.backoff_s * 1000)
            )
            await trio.sleep(delay_ms / 1000)
            return False
        offsets: dict[TopicPartition, int] = {}
        wanted: dict[TopicPartition, FetchData] = {}
        for tp, state in states.items():
            log_ = self.replica_manager.get_or_create_log(tp.topic, tp.partition)
            offsets[tp] = int(log_.log_end_offset)
            wanted[tp] = (offsets[tp], state.leader_epoch, self.fetch_max_bytes)
        session_request = session.build(wanted)
        by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
        for tp, (fetch_offset, leader_epoch, max_bytes) in session_request.to_send.items():
            by_topic.setdefault(tp.topic, []).append(
                (tp.partition, leader_epoch, fetch_offset, max_bytes)
            )
        forgotten: dict[str, list[int]] = {}
        for tp in session_request.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        response = await connection.request_encoded(
            ApiKey.FETCH,
            fetch_encoding.FOLLOWER_REQUEST_VERSION,
            fetch_encoding.encode_follower_fetch_request(
                replica_id=self.node_id,
                max_wait_ms=self.fetch_wait_max_ms,
                min_bytes=1,
                session_id=session_request.session_id,
                session_epoch=session_request.epoch,
                topics=list(by_topic.items()),
                forgotten=list(forgotten.items()),
            ),
        )
        named = [
            TopicPartition(str(topic.topic), int(p.partition_index))
            for topic in response.responses
            for p in topic.partitions
        ]
        if not session.on_response(
            session_request, int(response.error_code), int(response.session_id), named
        ):
            log.info(
                "fetcher %d: fetch session answer not applied (error %d)",
                self.node_id,
                int(response.error_code),
            )
            return False
        backoff = False
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.topic), int(p.partition_index))
                fetched = states.get(tp)
                if fetched is None or self.replica_manager.followers.get(tp) is not fetched:
                    session.on_error()  # dropped news: the next request is full
                    continue
                state = fetched
                log_ = self.replica_manager.get_or_create_log(tp.topic, tp.partition)
                if int(log_.log_end_offset) != offsets[tp]:
                    session.on_error()
                    continue  # the log changed under us (truncation): ask again
                error = ErrorCode(int(p.error_code))
                if error is ErrorCode.offset_out_of_range:
                    if offsets[tp] < int(p.log_start_offset):
                        log_.truncate_fully_and_start_at(int(p.log_start_offset))
                    else:
                        state.phase = FollowerPhase.TRUNCATING
                    continue
                outcome = state.on_fetch_answer(
                    error, int(p.high_watermark), int(p.high_watermark), offsets[tp], 0
                )
                if outcome.action is FetchAction.BACK_OFF:
                    backoff = True
                    continue
                if outcome.action is FetchAction.TRUNCATE_TO_LEADER_END:
                    state.phase = FollowerPhase.TRUNCATING
                    continue
                records = p.records
                if records:
                    try:
                        append_fetched(log_, bytes(records))
                    except LogDirFailedError as failure:
                        # Kafka's LogDirFailureChannel: the follower's write error takes
                        # the log dir offline (the last one halts a knode process)
                        self.replica_manager.log_dir_failed(tp.topic, tp.partition, failure)
                        raise
                    if self.replica_manager.follower_quota.is_throttled(tp.topic, tp.partition):
                        self.replica_manager.follower_quota.record(
                            len(records), self._clock.now_ms()
                        )
                log_end_offset = int(log_.log_end_offset)
                self.lag[tp] = max(0, int(p.high_watermark) - log_end_offset)
                high_watermark_before = int(log_.high_watermark)
                log_.update_high_watermark(min(log_end_offset, int(p.high_watermark)))
                if int(log_.high_watermark) > high_watermark_before:
                    self.replica_manager.follower_high_watermark_advanced(tp.topic, tp.partition)
                new_start = follower_log_start_offset(
                    int(p.log_start_offset), int(log_.log_start_offset), int(log_.high_watermark)
                )
                if new_start is not None:
                    log_.delete_records_before(int(new_start))
        return backoff


def append_fetched(log_: PartitionLog, records: bytes) -> None:
    """Append fetched batches; an empty log restarts at the first batch when it must.

    Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`: after DeleteRecords the
    leader's log start offset can fall inside a batch, so a new (empty) follower that started
    at that offset is sent the whole batch, whose base offset is below its log end. The log
    restarts at the batch's base offset and takes it (the log start offset then follows the
    leader's, below). Any other offset mismatch is an error, as in Kafka.
    """
    try:
        log_.append_as_follower(records)
    except UnexpectedAppendOffsetError:
        first_offset = int.from_bytes(records[:8], "big", signed=True)
        log_end_offset = int(log_.log_end_offset)
        if log_end_offset != int(log_.log_start_offset) or first_offset >= log_end_offset:
            raise
        log_.truncate_fully_and_start_at(first_offset)
        log_.append_as_follower(records)


def follow_log_start(log_: PartitionLog, leader_log_start_offset: int) -> None:
    """Move the follower's log start offset up to the leader's (DeleteRecords, retention),
    never past the follower's high watermark (Kafka's `maybeIncrementLogStartOffset` with
    `LeaderOffsetIncremented`)."""
    if int(log_.log_start_offset) < leader_log_start_offset <= int(log_.high_watermark):
        log_.delete_records_before(leader_log_start_offset)
