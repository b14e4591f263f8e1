"""The transaction service (trio shell) against an in-process broker with real partition
logs: markers reach the data partitions, a coordinator that loses and regains leadership
reloads from `__transaction_state` and finishes a transaction left in PrepareCommit, and the
timer aborts a transaction open past its timeout."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch
from trafka.node.replication.ids import TopicPartition as ReplicaPartition
from trafka.node.txn_service import TransactionService
from trafka.txn.config import TRANSACTION_STATE_TOPIC
from trafka.txn.coordinator import TopicPartition

NOW = 1_700_000_000_000
DATA = TopicPartition("data", 0)


@dataclass
class Config:
    values: dict[str, int]

    def get_int(self, key: str) -> int:
        return self.values[key]


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int


@dataclass
class TopicState:
    partitions: dict[int, PartitionState]


@dataclass
class Topics:
    topics: dict[str, TopicState] = field(default_factory=dict)

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def partition(self, name: str, partition: int) -> PartitionState | None:
        state = self.topics.get(name)
        return None if state is None else state.partitions.get(partition)


@dataclass
class Result:
    error_code: int = 0


@dataclass
class LeaderState:
    leader_epoch: int


@dataclass
class ReplicaManager:
    directory: Path
    topics: Topics
    logs: dict[tuple[str, int], PartitionLog] = field(default_factory=dict)
    fail_appends: bool = False
    demoted: bool = False  # LeaderAndIsr took every leadership away; `topics` is stale
    marker_delay_s: float = 0.0  # how long writing a marker takes (replication)

    @property
    def leaders(self) -> dict[ReplicaPartition, LeaderState]:
        """What LeaderAndIsr made node 1 lead (here: what `topics` says node 1 leads)."""
        if self.demoted:
            return {}
        return {
            ReplicaPartition(name, index): LeaderState(state.leader_epoch)
            for name, topic in self.topics.topics.items()
            for index, state in topic.partitions.items()
            if state.leader == 1
        }

    def get_or_create_log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = PartitionLog.open(
                self.directory / f"{topic}-{partition}", LogConfig(), now_ms=NOW
            )
        return self.logs[key]

    async def append(
        self, topic: str, partition: int, records: bytes, *, required_acks: int, timeout_ms: int
    ) -> Result:
        if self.fail_appends:
            return Result(int(ErrorCode.not_enough_replicas))
        log = self.get_or_create_log(topic, partition)
        log.append_as_leader(records, leader_epoch=0, now_ms=NOW)
        log.update_high_watermark(log.log_end_offset)
        return Result()

    async def append_end_transaction_marker(self, topic: str, partition: int, **kw: Any) -> int:
        kw.pop("timeout_ms")
        await trio.sleep(self.marker_delay_s)
        log = self.get_or_create_log(topic, partition)
        log.append_end_transaction_marker(leader_epoch=0, now_ms=NOW, **kw)
        log.update_high_watermark(log.log_end_offset)
        return 0


@dataclass
class Metadata:
    brokers: dict[int, Any] = field(default_factory=lambda: {1: object()})

    async def refresh_brokers(self) -> None:
        return None

    def live_broker_ids(self) -> list[int]:
        return [1]

    def endpoint_for(self, broker_id: int) -> None:
        return None


@dataclass
class ProducerIds:
    ids: Any = field(default_factory=lambda: itertools.count(1000))

    async def allocate(self) -> int:
        return int(next(self.ids))


class Groups:
    async def complete_txn_offsets(self, partition: int, producer_id: int, committed: bool) -> None:
        return None


CONFIG = Config(
    {
        "transaction.max.timeout.ms": 60_000,
        "transactional.id.expiration.ms": 604_800_000,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 50,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
    }
)


@dataclass
class Broker:
    """The ports the service is built from, as the composition root would pass them."""

    replica_manager: ReplicaManager
    topics: Topics

    def service(self) -> TransactionService:
        return TransactionService(
            node_id=1,
            topics=self.topics,  # type: ignore[arg-type]
            metadata=Metadata(),  # type: ignore[arg-type]
            admin=None,  # type: ignore[arg-type]
            replicas=self.replica_manager,  # type: ignore[arg-type]
            producer_ids=ProducerIds(),  # type: ignore[arg-type]
            groups=Groups(),  # type: ignore[arg-type]
            config=lambda: CONFIG,  # type: ignore[arg-type,return-value]
        )


def make_broker(tmp_path: Path) -> Broker:
    topics = Topics()
    broker = Broker(ReplicaManager(tmp_path, topics), topics)
    broker.topics.topics[TRANSACTION_STATE_TOPIC] = TopicState({0: PartitionState(1, 0)})
    broker.topics.topics["data"] = TopicState({0: PartitionState(1, 0)})
    return broker


def write_data(broker: Broker, pid: int, epoch: int) -> None:
    batch = build_batch(
        [NewRecord(b"v", timestamp=NOW)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    broker.replica_manager.get_or_create_log("data", 0).append_as_leader(
        batch, leader_epoch=0, now_ms=NOW
    )


async def wait_for(condition: Any) -> None:
    with trio.fail_after(10):
        while not condition():
            await trio.sleep(0.01)


async def test_commit_writes_markers_and_completes(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    service = broker.service()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        result = await service.init_producer_id("tx", 10_000, -1, -1)
        assert result.error == ErrorCode.none
        pid, epoch = result.producer_id, result.producer_epoch
        assert await service.add_partitions("tx", pid, epoch, (DATA,)) == ErrorCode.none
        write_data(broker, pid, epoch)
        data_log = broker.replica_manager.get_or_create_log("data", 0)
        data_log.update_high_watermark(data_log.log_end_offset)
        assert data_log.last_stable_offset == 0
        assert await service.end_transaction("tx", pid, epoch, True) == ErrorCode.none
        await wait_for(lambda: data_log.last_stable_offset == data_log.log_end_offset == 2)
        await wait_for(
            lambda: (
                service._partitions[0].coordinator is not None
                and service._partitions[0].coordinator.describe("tx").state == "CompleteCommit"
            )
        )
        nursery.cancel_scope.cancel()


@pytest.mark.slow  # the successor's timer loads within its 1 s leadership check
async def test_new_coordinator_finishes_a_prepared_commit(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    service = broker.service()
    # No nursery yet: marker tasks are queued, as if the node died right after PrepareCommit.
    result = await service.init_producer_id("tx", 10_000, -1, -1)
    pid, epoch = result.producer_id, result.producer_epoch
    await service.add_partitions("tx", pid, epoch, (DATA,))
    write_data(broker, pid, epoch)
    assert await service.end_transaction("tx", pid, epoch, True) == ErrorCode.none
    data_log = broker.replica_manager.get_or_create_log("data", 0)
    assert data_log.last_stable_offset == 0  # no marker yet
    # Another node's service (a failover: leader epoch 1) loads __transaction_state.
    broker.topics.topics[TRANSACTION_STATE_TOPIC] = TopicState({0: PartitionState(1, 1)})
    successor = broker.service()
    async with trio.open_nursery() as nursery:
        await nursery.start(successor.run)
        data_log.update_high_watermark(data_log.log_end_offset)
        await wait_for(lambda: data_log.last_stable_offset == data_log.log_end_offset == 2)
        described = await successor.describe("tx")
        assert described.state == "CompleteCommit"
        nursery.cancel_scope.cancel()
    entry = data_log.producer_state.producers[pid]
    assert entry.coordinator_epoch == 1


@pytest.mark.slow
async def test_timed_out_transaction_is_aborted_by_the_timer(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    service = broker.service()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        result = await service.init_producer_id("tx", 1, -1, -1)  # 1 ms timeout
        pid, epoch = result.producer_id, result.producer_epoch
        await service.add_partitions("tx", pid, epoch, (DATA,))
        write_data(broker, pid, epoch)
        data_log = broker.replica_manager.get_or_create_log("data", 0)
        await wait_for(lambda: data_log.collect_aborted_transactions(0, 10) != [])
        assert await service.end_transaction("tx", pid, epoch, True) == ErrorCode.producer_fenced
        nursery.cancel_scope.cancel()


async def test_failed_append_unloads_and_reloads_from_the_log(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    service = broker.service()
    result = await service.init_producer_id("tx", 10_000, -1, -1)
    broker.replica_manager.fail_appends = True
    error = await service.add_partitions("tx", result.producer_id, result.producer_epoch, (DATA,))
    assert error == ErrorCode.coordinator_not_available
    broker.replica_manager.fail_appends = False
    described = await service.describe("tx")  # reloaded: the add never reached the log
    assert (described.state, described.partitions) == ("Empty", ())
    other = await service.find_coordinator("")
    assert other[0] == ErrorCode.invalid_request


async def test_a_stale_metadata_cache_makes_no_coordinator(tmp_path: Path) -> None:
    """A node restarted after a failover may read a metadata cache that still names it the
    leader of a `__transaction_state` partition: only the replica manager's leadership (the
    controller's LeaderAndIsr) makes it a coordinator, else it would load the partition and
    resend old markers with a stale coordinator epoch."""
    broker = make_broker(tmp_path)
    service = broker.service()
    result = await service.init_producer_id("tx", 10_000, -1, -1)
    assert result.error == ErrorCode.none
    broker.replica_manager.demoted = True
    again = await service.init_producer_id("tx", 10_000, -1, -1)
    assert again.error == ErrorCode.not_coordinator
    assert service._partitions == {}
    broker.replica_manager.demoted = False
    assert (await service.init_producer_id("tx", 10_000, -1, -1)).error == ErrorCode.none


async def test_the_next_transaction_waits_for_the_markers_not_the_client(tmp_path: Path) -> None:
    """AddPartitionsToTxn right after EndTxn (what every client does) finds the markers still
    being written: the coordinator waits for its marker task and answers NONE, instead of
    CONCURRENT_TRANSACTIONS and a client backoff of 20-100 ms per transaction."""
    broker = make_broker(tmp_path)
    broker.replica_manager.marker_delay_s = 0.05
    service = broker.service()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        result = await service.init_producer_id("tx", 10_000, -1, -1)
        pid, epoch = result.producer_id, result.producer_epoch
        for _ in range(5):
            assert await service.add_partitions("tx", pid, epoch, (DATA,)) == ErrorCode.none
            write_data(broker, pid, epoch)
            assert await service.end_transaction("tx", pid, epoch, True) == ErrorCode.none
        described = await service.describe("tx")
        assert described.state in ("PrepareCommit", "CompleteCommit")
        nursery.cancel_scope.cancel()
