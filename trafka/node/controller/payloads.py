"""Znode paths and payloads as the controller sees them.

The payload types are `trafka.metadata_quorum.znodes`' typed codecs (Kafka's JSON layouts,
EXT-07): `PartitionState`, `TopicAssignment`, `ReassignPartitions`,
`PreferredReplicaElection`, `IsrChangeNotification`, `ControllerEpoch`. This module adds
what the controller needs on top: path helpers taking our ordered `TopicPartition`,
`Versioned` (data + znode version, for conditional writes, KR-05), `BrokerInfo` (a
registration plus its broker epoch) and `TreeSnapshot` (what the controller reads at
failover), conversions between the codecs' `znodes.TopicPartition` and ours, and the one
topic config the controller reads (`unclean.leader.election.enable`, `unclean_override`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from trafka.metadata_quorum import znodes
from trafka.node.replication.ids import BrokerId, TopicPartition, ZkVersion

CONTROLLER_PATH = znodes.CONTROLLER
CONTROLLER_EPOCH_PATH = znodes.CONTROLLER_EPOCH
BROKER_IDS_PATH = znodes.BROKER_IDS
TOPICS_PATH = znodes.BROKER_TOPICS
REASSIGN_PARTITIONS_PATH = znodes.REASSIGN_PARTITIONS
PREFERRED_REPLICA_ELECTION_PATH = znodes.PREFERRED_REPLICA_ELECTION
DELETE_TOPICS_PATH = znodes.DELETE_TOPICS
ISR_CHANGE_NOTIFICATION_PATH = znodes.ISR_CHANGE_NOTIFICATION
ISR_CHANGE_NOTIFICATION_PREFIX = znodes.ISR_CHANGE_PREFIX
CONFIG_TOPICS_PATH = znodes.CONFIG_TOPICS


topic_path = znodes.topic_path
"""`/brokers/topics/<topic>`: the topic's partition -> replicas assignment."""
delete_topic_path = znodes.delete_topic_path
"""`/admin/delete_topics/<topic>`: a deletion request (persistent, D10)."""
topic_config_path = znodes.topic_config_path
"""`/config/topics/<topic>`: per-topic configuration, removed by deletion."""


def partition_state_path(tp: TopicPartition) -> str:
    """`/brokers/topics/<t>/partitions/<p>/state`: leader, ISR and epochs."""
    return znodes.partition_state_path(tp.topic, tp.partition)


def isr_change_notification_path(child: str) -> str:
    """A child of `/isr_change_notification` (as named by the sequential create)."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"


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
    security_protocols: tuple[str, ...] = ()
    """The security protocol of each endpoint, in the same order."""

    @classmethod
    def from_registration(
        cls, registration: znodes.BrokerRegistration, broker_epoch: int
    ) -> BrokerInfo:
        """From `/brokers/ids/<id>`'s payload and the node's czxid."""
        return cls(
            broker_id=BrokerId(registration.broker_id),
            broker_epoch=broker_epoch,
            rack=registration.rack,
            endpoints=tuple(e.connection_string() for e in registration.endpoints),
            security_protocols=tuple(e.security_protocol for e in registration.endpoints),
        )


@dataclass(frozen=True, slots=True)
class TreeSnapshot:
    """The parts of the tree the controller reads at failover (CTL-44 step 7) or to resync.

    The shell reads these paths (one consistent read of the quorum's state) and hands the
    result in; the controller never reads the tree itself.
    """

    controller_epoch: Versioned[znodes.ControllerEpoch] | None
    """None on a fresh cluster: the first controller creates `/controller_epoch` with 1."""
    brokers: tuple[BrokerInfo, ...]
    topics: Mapping[str, Versioned[znodes.TopicAssignment]]
    partition_states: Mapping[TopicPartition, Versioned[znodes.PartitionState]]
    reassignment: Versioned[znodes.ReassignPartitions] | None = None
    preferred_election: znodes.PreferredReplicaElection | None = None
    topics_to_delete: tuple[str, ...] = ()
    isr_change_notifications: tuple[str, ...] = ()
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """The overrides in `/config/topics/<t>` of the topics that have any (Kafka's
    `zkClient.getLogConfigs`, read here once and then kept current by `TopicConfigChange`)."""


UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
"""The topic config (and broker default) the OfflinePartition selector obeys (REP-32)."""


def unclean_override(configs: Mapping[str, str]) -> bool | None:
    """A topic's `unclean.leader.election.enable` override, None when it has none.

    Parsed as Kafka's ConfigDef parses a BOOLEAN (trimmed, case-insensitive "true"/"false");
    the brokers validate the value on write, so anything else counts as no override."""
    raw = configs.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    value = None if raw is None else raw.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    return None


def to_znode_partitions(tps: Iterable[TopicPartition]) -> tuple[znodes.TopicPartition, ...]:
    return tuple(znodes.TopicPartition(tp.topic, tp.partition) for tp in tps)


def from_znode_partitions(tps: Iterable[znodes.TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(tp.topic, tp.partition) for tp in tps)


def reassignment_targets(
    plan: znodes.ReassignPartitions,
) -> dict[TopicPartition, tuple[BrokerId, ...]]:
    """`/admin/reassign_partitions` as partition -> RAR."""
    return {
        TopicPartition(p.topic, p.partition): tuple(BrokerId(r) for r in p.replicas)
        for p in plan.partitions
    }


def reassignment_plan(
    targets: Mapping[TopicPartition, tuple[BrokerId, ...]],
) -> znodes.ReassignPartitions:
    """Partition -> RAR as the `/admin/reassign_partitions` payload, in partition order."""
    return znodes.ReassignPartitions(
        tuple(
            znodes.PartitionReassignment(tp.topic, tp.partition, tuple(targets[tp]))
            for tp in sorted(targets)
        )
    )


def partition_state(
    leader: BrokerId, leader_epoch: int, isr: tuple[BrokerId, ...], controller_epoch: int
) -> znodes.PartitionState:
    return znodes.PartitionState(leader, leader_epoch, tuple(isr), controller_epoch)
