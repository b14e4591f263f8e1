"""Znode paths and payloads the controller reads and writes, as plain frozen dataclasses.

Kafka's JSON layouts (SEEDS EXT-07) and their paths (ZK-06)::

    /controller_epoch                                  an integer (here: its version fences)
    /brokers/ids/<id>                                  registration (ephemeral)
    /brokers/topics/<t>                                {"version":1,"partitions":{"0":[1,2,3]}}
    /brokers/topics/<t>/partitions/<p>/state           {"controller_epoch":c,"leader":l,
                                                        "version":1,"leader_epoch":e,"isr":[..]}
    /admin/reassign_partitions                         {"version":1,"partitions":[{"topic":"t",
                                                        "partition":0,"replicas":[4,5,6]}]}
    /admin/preferred_replica_election                  {"version":1,"partitions":[{"topic":"t",
                                                        "partition":0}]}
    /admin/delete_topics/<t>                           persistent, empty
    /isr_change_notification/isr_change_<10 digits>    {"version":1,"partitions":[{"topic":"t",
                                                        "partition":0}]}
    /config/topics/<t>                                 {"version":1,"config":{...}}

Not yet wired: the typed JSON codecs live in `trafka.metadata_quorum.znodes` (being written
by another engineer). The shell maps these dataclasses onto them; once that module lands
the controller will use its types directly and this module shrinks to the path helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
DELETE_TOPICS_PATH = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_NOTIFICATION_PREFIX = "isr_change_"
CONFIG_TOPICS_PATH = "/config/topics"


def topic_path(topic: str) -> str:
    """`/brokers/topics/<topic>`: the topic's partition -> replicas assignment."""
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(tp: TopicPartition) -> str:
    """`/brokers/topics/<t>/partitions/<p>/state`: leader, ISR and epochs."""
    return f"{TOPICS_PATH}/{tp.topic}/partitions/{tp.partition}/state"


def delete_topic_path(topic: str) -> str:
    """`/admin/delete_topics/<topic>`: a deletion request (persistent, D10)."""
    return f"{DELETE_TOPICS_PATH}/{topic}"


def topic_config_path(topic: str) -> str:
    """`/config/topics/<topic>`: per-topic configuration, removed by deletion."""
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def isr_change_notification_path(child: str) -> str:
    """A child of `/isr_change_notification` (as named by the sequential create)."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"


@dataclass(frozen=True, slots=True)
class PartitionStateData:
    """Data of `.../partitions/<p>/state` (Kafka's LeaderIsrAndControllerEpoch)."""

    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: ControllerEpoch


@dataclass(frozen=True, slots=True)
class TopicAssignmentData:
    """Data of `/brokers/topics/<t>`: partition id -> assigned replicas (AR), in order."""

    partitions: Mapping[int, tuple[BrokerId, ...]]


@dataclass(frozen=True, slots=True)
class ReassignmentPlanData:
    """Data of `/admin/reassign_partitions`: partition -> target replicas (RAR)."""

    partitions: Mapping[TopicPartition, tuple[BrokerId, ...]]


@dataclass(frozen=True, slots=True)
class PartitionListData:
    """Data of `/admin/preferred_replica_election` and `/isr_change_notification/*`."""

    partitions: tuple[TopicPartition, ...]


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A znode's data together with its version (for conditional writes, KR-05)."""

    data: T
    version: ZkVersion


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What the controller keeps of a registered broker (`/brokers/ids/<id>`, ZK-03).

    `broker_epoch` is the creation version (czxid) of the ephemeral node: it changes on every
    re-registration, so a request from a previous incarnation can be told apart.
    """

    broker_id: BrokerId
    broker_epoch: int
    rack: str | None = None
    endpoints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeSnapshot:
    """The parts of the tree the controller reads at failover (CTL-44 step 7) or to resync.

    The shell reads these paths (one consistent read of the quorum's state) and hands the
    result in; the controller never reads the tree itself.
    """

    controller_epoch: Versioned[ControllerEpoch]
    brokers: tuple[BrokerInfo, ...]
    topics: Mapping[str, Versioned[TopicAssignmentData]]
    partition_states: Mapping[TopicPartition, Versioned[PartitionStateData]]
    reassignment: Versioned[ReassignmentPlanData] | None = None
    preferred_election: PartitionListData | None = None
    topics_to_delete: tuple[str, ...] = ()
    isr_change_notifications: tuple[str, ...] = ()
