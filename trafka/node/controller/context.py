"""ControllerContext: the controller's cache of the cluster metadata (CTL-09).

A summary of what the tree holds plus the controller's own bookkeeping: live brokers with
their epochs, topics and partition assignments, each partition's leader / ISR / leader epoch
/ znode version, the controller epoch (and the version of `/controller_epoch`, which fences
every write of this controller), the partitions being reassigned, the topics queued for
deletion and those ineligible, and the state of every partition and replica.

It is mutated only by `trafka.node.controller.machine`, one event at a time (CTL-10: one
event queue, no big lock). Everything here is derived from the tree at failover
(`from_snapshot`), so losing it loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from trafka.metadata_quorum import znodes
from trafka.node.controller.payloads import (
    BrokerInfo,
    TreeSnapshot,
    partition_state,
    reassignment_targets,
    unclean_override,
)
from trafka.node.controller.states import PartitionState, ReplicaState, transition_to
from trafka.node.replication.ids import (
    INITIAL_CONTROLLER_EPOCH,
    NO_LEADER,
    NO_VERSION,
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's leadership as last written by the controller or read from the tree."""

    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: ControllerEpoch
    zk_version: ZkVersion

    def data(self) -> znodes.PartitionState:
        """The znode payload (without the version)."""
        return partition_state(self.leader, self.leader_epoch, self.isr, self.controller_epoch)

    @classmethod
    def from_znode(cls, state: znodes.PartitionState, version: int) -> LeaderIsr:
        return cls(
            leader=BrokerId(state.leader),
            leader_epoch=LeaderEpoch(state.leader_epoch),
            isr=tuple(BrokerId(r) for r in state.isr),
            controller_epoch=ControllerEpoch(state.controller_epoch),
            zk_version=ZkVersion(version),
        )


@dataclass(frozen=True, slots=True)
class ReassignmentContext:
    """A partition being reassigned (CTL-32): OAR as first seen and RAR, the target."""

    original_replicas: tuple[BrokerId, ...]
    target_replicas: tuple[BrokerId, ...]


@dataclass(slots=True)
class ControllerContext:
    """The controller cache. Plain mutable state owned by one controller instance."""

    controller_id: BrokerId
    controller_epoch: ControllerEpoch = INITIAL_CONTROLLER_EPOCH
    controller_epoch_zk_version: ZkVersion = NO_VERSION
    live_brokers: dict[BrokerId, BrokerInfo] = field(default_factory=dict)
    shutting_down_brokers: set[BrokerId] = field(default_factory=set)
    assignments: dict[TopicPartition, tuple[BrokerId, ...]] = field(default_factory=dict)
    topic_zk_versions: dict[str, ZkVersion] = field(default_factory=dict)
    topic_ids: dict[str, str | None] = field(default_factory=dict)
    topic_configs: dict[str, Mapping[str, str]] = field(default_factory=dict)
    """Overrides of the topics that have any (`/config/topics/<t>`)."""
    leadership: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    partitions_being_reassigned: dict[TopicPartition, ReassignmentContext] = field(
        default_factory=dict
    )
    reassignment_zk_version: ZkVersion = NO_VERSION
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, BrokerId], ReplicaState] = field(
        default_factory=dict
    )

    # -- queries --------------------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        """All topics the controller knows (from `/brokers/topics`)."""
        return frozenset(tp.topic for tp in self.assignments)

    def live_or_shutting_down(self) -> frozenset[BrokerId]:
        """Brokers registered in `/brokers/ids` (shutting-down ones are still registered)."""
        return frozenset(self.live_brokers)

    def live_broker_ids(self) -> frozenset[BrokerId]:
        """Registered brokers that are not shutting down: the ones that may lead."""
        return frozenset(self.live_brokers) - self.shutting_down_brokers

    def is_live(self, broker: BrokerId) -> bool:
        """Registered (shutting down or not)."""
        return broker in self.live_brokers

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions, in partition order."""
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def partitions_on_brokers(self, brokers: Iterable[BrokerId]) -> list[TopicPartition]:
        """Partitions with a replica assigned to any of `brokers` (CTL-42 `set_p`)."""
        wanted = set(brokers)
        return sorted(tp for tp, ar in self.assignments.items() if wanted & set(ar))

    def replicas_on_brokers(
        self, brokers: Iterable[BrokerId]
    ) -> list[tuple[TopicPartition, BrokerId]]:
        """(partition, broker) for every replica hosted by one of `brokers`."""
        wanted = set(brokers)
        return sorted(
            (tp, broker) for tp, ar in self.assignments.items() for broker in ar if broker in wanted
        )

    def replicas_of_topic(self, topic: str) -> list[tuple[TopicPartition, BrokerId]]:
        """Every (partition, broker) replica of the topic."""
        return [(tp, broker) for tp in self.partitions_of(topic) for broker in self.assignments[tp]]

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, tp: TopicPartition, broker: BrokerId) -> ReplicaState:
        return self.replica_states.get((tp, broker), ReplicaState.NON_EXISTENT)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def unclean_leader_election_enable(self, topic: str, default: bool) -> bool:
        """The topic's effective `unclean.leader.election.enable`: its override, else
        `default` (the broker's, Kafka's LogConfig resolution)."""
        override = unclean_override(self.topic_configs.get(topic, {}))
        return default if override is None else override

    # -- mutations that go through the state machines -------------------------------------

    def set_partition_state(self, tp: TopicPartition, target: PartitionState) -> None:
        """Move a partition, asserting the edge (CTL-14)."""
        self.partition_states[tp] = transition_to(self.partition_state(tp), target)

    def set_replica_state(self, tp: TopicPartition, broker: BrokerId, target: ReplicaState) -> None:
        """Move a replica, asserting the edge (CTL-23)."""
        self.replica_states[(tp, broker)] = transition_to(self.replica_state(tp, broker), target)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic everywhere (CTL-29 step 6)."""
        for tp in self.partitions_of(topic):
            del self.assignments[tp]
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.pop(tp, None)
        for key in [key for key in self.replica_states if key[0].topic == topic]:
            del self.replica_states[key]
        self.topic_zk_versions.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topic_configs.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def iter_leadership(self) -> Iterator[tuple[TopicPartition, LeaderIsr]]:
        """Known leaderships in partition order (deterministic request order)."""
        for tp in sorted(self.leadership):
            yield tp, self.leadership[tp]

    # -- loading --------------------------------------------------------------------------

    @classmethod
    def from_snapshot(cls, controller_id: BrokerId, snapshot: TreeSnapshot) -> ControllerContext:
        """Initialize from the tree (CTL-44 step 7): topics, live brokers, leaders and ISRs.

        Partition and replica states are *not* set here; the machine's startup sets them
        (CTL-44 step 8, Kafka's `initializePartitionState` / `initializeReplicaState`).
        """
        context = cls(
            controller_id=controller_id,
            controller_epoch=ControllerEpoch(
                0 if snapshot.controller_epoch is None else snapshot.controller_epoch.data.epoch
            ),
            controller_epoch_zk_version=(
                NO_VERSION
                if snapshot.controller_epoch is None
                else snapshot.controller_epoch.version
            ),
        )
        for broker in snapshot.brokers:
            context.live_brokers[broker.broker_id] = broker
        for topic, versioned in snapshot.topics.items():
            context.topic_zk_versions[topic] = versioned.version
            context.topic_ids[topic] = versioned.data.topic_id
            for partition, replicas in versioned.data.partitions.items():
                context.assignments[TopicPartition(topic, partition)] = tuple(
                    BrokerId(r) for r in replicas
                )
        for topic, configs in snapshot.topic_configs.items():
            if topic in snapshot.topics and configs:
                context.topic_configs[topic] = dict(configs)
        for tp, state in snapshot.partition_states.items():
            if tp in context.assignments:
                context.leadership[tp] = LeaderIsr.from_znode(state.data, state.version)
        if snapshot.reassignment is not None:
            context.reassignment_zk_version = snapshot.reassignment.version
            for tp, target in reassignment_targets(snapshot.reassignment.data).items():
                current = context.assignments.get(tp)
                if current is None:
                    continue
                # OAR survives failover in the topic znode's adding_replicas (KIP-455
                # layout): AR = OAR + adding while step 10 has not run.
                adding = snapshot.topics[tp.topic].data.adding_replicas.get(tp.partition, ())
                original = tuple(r for r in current if r not in adding)
                context.partitions_being_reassigned[tp] = ReassignmentContext(
                    original_replicas=original, target_replicas=tuple(target)
                )
        context.topics_to_be_deleted.update(snapshot.topics_to_delete)
        return context


def leader_of(context: ControllerContext, tp: TopicPartition) -> BrokerId:
    """The partition's current leader, or NO_LEADER if it has none or is unknown."""
    leadership = context.leadership.get(tp)
    return NO_LEADER if leadership is None else leadership.leader
