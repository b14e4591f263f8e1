"""Events the controller consumes, one at a time (CTL-08's listeners, as data; CTL-10).

Each watch of the seeds (ZK-07, KR-06) becomes one event type carrying the watched path's
*current* contents, read by the shell after the watch fired ("re-read the state after the
notification", KR-06): the controller never reads the tree and never needs a watch to be
exactly-once.

| watch / trigger (CTL-08)                        | event                               |
|-------------------------------------------------|-------------------------------------|
| winning `/controller` (CTL-03, CTL-44)          | `ControllerFailover(snapshot)`      |
| losing `/controller` (session or node gone)     | `ControllerResign()`                |
| children of `/brokers/ids`                      | `BrokerChange(brokers)`             |
| children of `/brokers/topics`                   | `TopicChange(topics)`               |
| data of `/brokers/topics/<t>`                   | `PartitionModifications(topic, ..)` |
| children of `/admin/delete_topics`              | `TopicDeletion(topics)`             |
| data of `/admin/reassign_partitions`            | `PartitionReassignment(plan)`       |
| data of `/admin/preferred_replica_election`     | `PreferredReplicaElection(..)`      |
| AlterPartitionReassignments (cancel)            | `CancelReassignment(partitions)`    |
| ElectLeaders (UNCLEAN)                          | `UncleanLeaderElection(partitions)` |
| a `topics/<t>` config change notification       | `TopicConfigChange(topic, configs)` |
| the broker default of unclean.leader.election.. | `UncleanLeaderElectionDefault(..)`  |
| children of `/isr_change_notification`          | `IsrChangeNotification(..)`         |
| ControlledShutdown request (key 7, CTL-43)      | `ControlledShutdown(broker, epoch)` |
| StopReplica responses (deletion, CTL-23)        | `StopReplicaResponse(broker, ..)`   |
| `leader.imbalance.check.interval.seconds` timer | `AutoPreferredReplicaLeaderElection`|
| a failed multi (`ControllerStep.writes`)        | `WritesFailed(snapshot)`            |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.node.controller.payloads import BrokerInfo, TreeSnapshot, Versioned
from trafka.node.replication.ids import BrokerId, TopicPartition


@dataclass(frozen=True, slots=True)
class ControllerFailover:
    """This broker created `/controller`; `snapshot` is the tree as read right after."""

    snapshot: TreeSnapshot
    now_ms: int


@dataclass(frozen=True, slots=True)
class ControllerResign:
    """This broker is no longer controller (its `/controller` node is gone or not its own)."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The current children of `/brokers/ids` with their data and epochs."""

    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class TopicChange:
    """The current topics under `/brokers/topics` with their assignments."""

    topics: Mapping[str, Versioned[znodes.TopicAssignment]]


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """`/brokers/topics/<topic>` changed (partitions added, CTL-26)."""

    topic: str
    assignment: Versioned[znodes.TopicAssignment]


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """The current children of `/admin/delete_topics`."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """The current `/admin/reassign_partitions` (None when absent)."""

    plan: Versioned[znodes.ReassignPartitions] | None


@dataclass(frozen=True, slots=True)
class CancelReassignment:
    """Cancel the reassignment of `partitions` (AlterPartitionReassignments with null
    replicas, KIP-455): each goes back to its original replicas (OAR) through the same
    steps, i.e. a reassignment whose target is OAR."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class UncleanLeaderElection:
    """ElectLeaders with electionType UNCLEAN for `partitions`: leaderless partitions may
    take a live replica outside the ISR (REP-32, EXT-09) even when the config forbids it."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigChange:
    """`/config/topics/<topic>` as it is now (empty: no overrides), after a config change
    notification named the topic or the topic appeared. Kafka's TopicConfigHandler tells the
    controller `TopicUncleanLeaderElectionEnable(topic)`; here the event carries the configs
    so the controller's cache of them stays current (it never reads the tree)."""

    topic: str
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class UncleanLeaderElectionDefault:
    """The controller node's effective broker `unclean.leader.election.enable` (static,
    `/config/brokers/<default>`, `/config/brokers/<id>`) is now `enabled`: the default of
    every topic without an override (Kafka's `UncleanLeaderElectionEnable` event)."""

    enabled: bool


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """Partitions to move back to their preferred replica (CTL-36, CTL-37).

    `from_admin_path` is true when they come from `/admin/preferred_replica_election`, which
    the controller deletes afterwards; false for an ElectLeaders request.
    """

    partitions: tuple[TopicPartition, ...]
    from_admin_path: bool = True


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """Children of `/isr_change_notification` and the fresh states of their partitions."""

    children: tuple[str, ...]
    states: Mapping[TopicPartition, Versioned[znodes.PartitionState]]


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    """A ControlledShutdown request from `broker_id` (CTL-43)."""

    broker_id: BrokerId
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    """Per-partition answers of a StopReplica(delete=true) (CTL-23 deletion edges)."""

    broker_id: BrokerId
    errors: Mapping[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class AutoPreferredReplicaLeaderElection:
    """The auto-rebalance timer fired (CTL-38, EXT-11)."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class WritesFailed:
    """The last step's multi failed; `snapshot` is the tree as it is now."""

    snapshot: TreeSnapshot


ControllerEvent = (
    ControllerFailover
    | ControllerResign
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | TopicDeletion
    | PartitionReassignment
    | PreferredReplicaElection
    | CancelReassignment
    | UncleanLeaderElection
    | TopicConfigChange
    | UncleanLeaderElectionDefault
    | IsrChangeNotification
    | ControlledShutdown
    | StopReplicaResponse
    | AutoPreferredReplicaLeaderElection
    | WritesFailed
)
