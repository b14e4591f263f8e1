"""What the controller asks its shell to do, as data: znode operations, broker requests,
timers and answers (STYLE 1: the controller decides, the shell performs).

One event in -> one `ControllerStep` out. The shell's contract:

1. `writes` is ONE atomic multi for the quorum (ZooKeeper `multi`, KR-05). Its first op
   always fences this controller: `SetNode(/controller_epoch)` at failover, else
   `CheckVersion(/controller_epoch)`. Later ops on the same znode chain their expected
   versions (each `SetNode` bumps the version by one, as ZooKeeper's multi does).
   `DeleteNode(if_exists=True)` ops whose node is absent are dropped before the multi;
   `DeleteNode(recursive=True)` deletes the children first. `CreateNode` creates missing
   parents.
2. If the multi commits, send `requests` (in order; requests to one broker keep their
   order), arm `timers`, deliver `answers` (e.g. the ControlledShutdown response).
3. If it fails, send nothing of this step: read a fresh `TreeSnapshot` and feed
   `WritesFailed(snapshot)` before any other event (CTL-42 step 3.3: "otherwise go back to
   3.1"). The controller reloads and redoes its work, or resigns if the epoch moved.
4. Feed the next event only after this step is done (one event at a time, CTL-10).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller.selectors import ElectionFailureReason
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)

ZnodeData = (
    znodes.PartitionState
    | znodes.TopicAssignment
    | znodes.ReassignPartitions
    | znodes.ControllerEpoch
    | znodes.IsrChangeNotification
    | None
)
"""Payloads the controller writes, as `trafka.metadata_quorum.znodes` codecs (None = empty)."""

# -- (a) znode operations -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckVersion:
    """Fail the multi unless `path` has version `expected_version`."""

    path: str
    expected_version: ZkVersion


@dataclass(frozen=True, slots=True)
class CreateNode:
    """Create a persistent node (and its missing parents); fails if it exists. With
    `sequential`, `path` is the prefix and the tree appends a 10-digit sequence number."""

    path: str
    data: ZnodeData
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetNode:
    """Set `path` to `data` if its version is `expected_version` (KR-05)."""

    path: str
    data: ZnodeData
    expected_version: ZkVersion


@dataclass(frozen=True, slots=True)
class DeleteNode:
    """Delete `path` (any version); `recursive` removes children; `if_exists` tolerates
    an absent node."""

    path: str
    recursive: bool = False
    if_exists: bool = False


ZnodeOp = CheckVersion | CreateNode | SetNode | DeleteNode

# -- (b) controller -> broker requests (API keys 4, 5, 6; EXT-06) ---------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    tp: TopicPartition
    controller_epoch: ControllerEpoch
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    zk_version: ZkVersion
    replicas: tuple[BrokerId, ...]
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    """LeaderAndIsr (key 4): become leader/follower; brokers reject an older controller
    epoch (STALE_CONTROLLER_EPOCH) and partition states whose leader epoch is not newer."""

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    tp: TopicPartition
    controller_epoch: ControllerEpoch
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    zk_version: ZkVersion
    replicas: tuple[BrokerId, ...]
    offline_replicas: tuple[BrokerId, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    """UpdateMetadata (key 6): the metadata cache every broker answers Metadata from
    (CTL-39). Leader -2 (LEADER_DURING_DELETE) tells the broker to drop the partition."""

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    """StopReplica (key 5): stop fetching/serving; with `delete_partitions`, remove the
    logs (CTL-29 step 2.4). The broker answers per partition; see `StopReplicaResponse`."""

    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: int
    delete_partitions: bool
    partitions: tuple[TopicPartition, ...]


BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send `request` to `broker_id` over the controller channel (CTL-11, D8)."""

    broker_id: BrokerId
    request: BrokerRequest


# -- (c) timers and answers ----------------------------------------------------------------


class TimerKind(enum.Enum):
    AUTO_LEADER_REBALANCE = "leader.imbalance.check.interval.seconds"


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Deliver the timer's event (`AutoPreferredReplicaLeaderElection`) at `at_ms`."""

    kind: TimerKind
    at_ms: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownAnswer:
    """The ControlledShutdown response (key 7, CTL-43): the partitions the broker still
    leads; the broker retries while it is non-empty."""

    broker_id: BrokerId
    error: ErrorCode
    partitions_remaining: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ElectionReport:
    """A leader change this step made (for logs, ElectLeaders answers, REP-32 reporting)."""

    tp: TopicPartition
    leader: BrokerId
    leader_epoch: LeaderEpoch
    unclean: bool


@dataclass(frozen=True, slots=True)
class ControllerStep:
    """Everything one event produced. Empty when the controller is inactive."""

    writes: tuple[ZnodeOp, ...] = ()
    requests: tuple[SendRequest, ...] = ()
    timers: tuple[ScheduleTimer, ...] = ()
    answers: tuple[ControlledShutdownAnswer, ...] = ()
    elections: tuple[ElectionReport, ...] = ()
    failed_elections: tuple[tuple[TopicPartition, ElectionFailureReason], ...] = ()
    resigned: bool = False


@dataclass(slots=True)
class RequestBatch:
    """ControllerBrokerRequestBatch (CTL-07, CTL-12): requests of one step grouped per
    broker and type; the partition states are read from the context when flushed, so a
    partition touched several times in one step is sent once, in its final state."""

    leader_and_isr: dict[BrokerId, dict[TopicPartition, bool]] = field(default_factory=dict)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_all_brokers: bool = False
    stop_replica: dict[tuple[BrokerId, bool], set[TopicPartition]] = field(default_factory=dict)

    def add_leader_and_isr(
        self, brokers: tuple[BrokerId, ...], tp: TopicPartition, is_new: bool = False
    ) -> None:
        """The latest intent for a replica wins: a LeaderAndIsr cancels a StopReplica
        (without delete) queued earlier in the step for the same replica (a bounced broker
        is first failed, then started, CTL-41/42)."""
        for broker in brokers:
            partitions = self.leader_and_isr.setdefault(broker, {})
            partitions[tp] = partitions.get(tp, False) or is_new
            self.stop_replica.get((broker, False), set()).discard(tp)
        self.add_update_metadata((tp,))

    def add_update_metadata(self, tps: tuple[TopicPartition, ...] | list[TopicPartition]) -> None:
        """UpdateMetadata for `tps` to every live broker (CTL-14: every leadership change)."""
        self.update_metadata_all_brokers = True
        self.update_metadata_partitions.update(tps)

    def add_stop_replica(self, broker: BrokerId, tp: TopicPartition, delete: bool) -> None:
        """Cancels a LeaderAndIsr queued earlier in the step for the same replica."""
        self.stop_replica.setdefault((broker, delete), set()).add(tp)
        self.leader_and_isr.get(broker, {}).pop(tp, None)
