"""The controller as an event-driven state machine (SEEDS §6, CTL-01..45).

`Controller.handle(event) -> ControllerStep`: events in (`events.py`), effects out
(`effects.py`). No trio, no sockets, no clock reads: time arrives inside the events that
need it. The shell (wired later) runs one task that feeds events one at a time, executes
each step's writes as one atomic multi, then sends the step's requests (see `effects.py`
for the full contract).

Flows, as the seeds give them:

- `ControllerFailover` -> onControllerFailover (CTL-44): increment the epoch (the step's
  first write is the conditional set of `/controller_epoch`), load the context from the tree,
  initialize partition/replica states, send every partition's state to every live broker
  (LeaderAndIsr to every online replica, UpdateMetadata to all), elect leaders for New and
  Offline partitions, resume reassignments, pending preferred elections and deletions, arm
  the auto-rebalance timer.
- `BrokerChange` -> onBrokerStartup (CTL-41) / onBrokerFailure (CTL-42).
- `TopicChange` / `PartitionModifications` -> onNewTopicCreation / onNewPartitionCreation
  (CTL-25, CTL-26).
- `TopicDeletion`, `StopReplicaResponse` -> the TopicDeletionManager (CTL-27..30).
- `PartitionReassignment`, `IsrChangeNotification` -> onPartitionReassignment in the seeds'
  11 steps (CTL-31..35); AR in the tree is written last.
- `PreferredReplicaElection`, `AutoPreferredReplicaLeaderElection` -> CTL-36..38, EXT-11;
  `UncleanLeaderElection` -> ElectLeaders UNCLEAN for leaderless partitions.
- `TopicConfigChange` / `UncleanLeaderElectionDefault` -> Kafka's
  onTopicUncleanLeaderElectionEnable / onUncleanLeaderElectionEnable: the cached config
  changes and, when unclean election is now on, the topic's (every) New/Offline partitions
  are tried again. The OfflinePartition selector obeys each topic's effective
  `unclean.leader.election.enable` (its `/config/topics/<t>` override, else the broker
  default), as Kafka's `collectUncleanLeaderElectionState` reads the topic's LogConfig.
- `ControlledShutdown` -> CTL-43, EXT-12.
- `WritesFailed` -> reload from the tree and redo (CTL-42 step 3.3), or resign.

Deliberate simplifications (written down, STYLE 11):
- Every leader/ISR write in a step is conditional on the version the context holds; a
  conflict (usually a leader's concurrent ISR change) fails the whole step and the
  controller reloads everything from the tree, rather than re-reading one partition.
- StopReplica(delete) errors are retried as soon as the topic's other replicas answered.
- Replica placement for reassignment targets is the caller's (ktool); targets must be live.
- `CancelReassignment` is a reassignment back to OAR; OAR survives failover in the topic
  znode's `adding_replicas` (KIP-455 layout, written in phase A, cleared at step 10).
- Not implemented: replication throttles (`*.replication.throttled.*`), log-dir events,
  KIP-455's incremental API semantics beyond cancel.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.node.controller.context import ControllerContext, LeaderIsr, ReassignmentContext
from trafka.node.controller.effects import (
    CheckVersion,
    ControlledShutdownAnswer,
    ControllerStep,
    CreateNode,
    DeleteNode,
    ElectionReport,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    RequestBatch,
    ScheduleTimer,
    SendRequest,
    SetNode,
    StopReplicaRequest,
    TimerKind,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    ZnodeOp,
)
from trafka.node.controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    CancelReassignment,
    ControlledShutdown,
    ControllerEvent,
    ControllerFailover,
    ControllerResign,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaElection,
    StopReplicaResponse,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElection,
    UncleanLeaderElectionDefault,
    WritesFailed,
)
from trafka.node.controller.payloads import (
    CONTROLLER_EPOCH_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TreeSnapshot,
    delete_topic_path,
    from_znode_partitions,
    isr_change_notification_path,
    partition_state_path,
    reassignment_plan,
    reassignment_targets,
    topic_config_path,
    topic_path,
)
from trafka.node.controller.selectors import (
    ElectionFailure,
    ElectionFailureReason,
    ElectionResult,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from trafka.node.controller.states import PartitionState, ReplicaState, is_legal
from trafka.node.replication.ids import (
    INITIAL_LEADER_EPOCH,
    LEADER_DURING_DELETE,
    NO_LEADER,
    NO_VERSION,
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)

P = PartitionState
R = ReplicaState
MAX_RECORDED_INVALID_TRANSITIONS = 1000
"""Skipped illegal transitions kept for inspection (Kafka logs them); the oldest go first."""
Replica = tuple[TopicPartition, BrokerId]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Kafka's controller settings, with Kafka's defaults (DESIGN "Configuration")."""

    unclean_leader_election_enable: bool = False
    """The broker default; a topic's `/config/topics/<t>` override wins. Changed at run
    time by `UncleanLeaderElectionDefault`."""
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    delete_topic_enable: bool = True  # D25: true since Kafka 1.0


class Strategy(enum.Enum):
    """Which selector moves a partition to Online (CTL-17..20)."""

    OFFLINE = "OfflinePartitionLeaderSelector"
    UNCLEAN = "OfflinePartitionLeaderSelector with unclean election forced (ElectLeaders)"
    REASSIGNED = "ReassignedPartitionLeaderSelector"
    PREFERRED = "PreferredReplicaPartitionLeaderSelector"
    CONTROLLED_SHUTDOWN = "ControlledShutdownLeaderSelector"


@dataclass(slots=True)
class _StepBuilder:
    """What the current event has produced so far."""

    epoch_write: ZnodeOp | None = None
    writes: list[ZnodeOp] = field(default_factory=list)
    batch: RequestBatch = field(default_factory=RequestBatch)
    timers: list[ScheduleTimer] = field(default_factory=list)
    answers: list[ControlledShutdownAnswer] = field(default_factory=list)
    elections: list[ElectionReport] = field(default_factory=list)
    failed: list[tuple[TopicPartition, ElectionFailureReason]] = field(default_factory=list)


class Controller:
    """One broker's controller logic. Inactive until `ControllerFailover`."""

    def __init__(self, broker_id: BrokerId, config: ControllerConfig | None = None) -> None:
        self.broker_id = broker_id
        self.config = config or ControllerConfig()
        self.context: ControllerContext | None = None
        self.invalid_transitions: deque[str] = deque(maxlen=MAX_RECORDED_INVALID_TRANSITIONS)
        self._step = _StepBuilder()
        self._last_event: ControllerEvent | None = None
        self._handlers: dict[type, Callable[[ControllerContext, Any], None]] = {
            BrokerChange: self._on_broker_change,
            TopicChange: self._on_topic_change,
            PartitionModifications: self._on_partition_modifications,
            TopicDeletion: self._on_topic_deletion_event,
            PartitionReassignment: self._on_reassignment_event,
            PreferredReplicaElection: self._on_preferred_election_event,
            CancelReassignment: self._on_cancel_reassignment,
            UncleanLeaderElection: self._on_unclean_election,
            TopicConfigChange: self._on_topic_config_change,
            UncleanLeaderElectionDefault: self._on_unclean_default,
            IsrChangeNotification: self._on_isr_change,
            ControlledShutdown: self._on_controlled_shutdown,
            StopReplicaResponse: self._on_stop_replica_response,
            AutoPreferredReplicaLeaderElection: self._on_auto_rebalance,
        }

    @property
    def is_active(self) -> bool:
        return self.context is not None

    @property
    def epoch(self) -> ControllerEpoch | None:
        return None if self.context is None else self.context.controller_epoch

    # -- the one entry point --------------------------------------------------------------

    def handle(self, event: ControllerEvent) -> ControllerStep:
        """Process one event to completion and return what the shell must do."""
        self._step = _StepBuilder()
        if isinstance(event, ControllerFailover):
            self._on_failover(event.snapshot, event.now_ms, increment_epoch=True)
        elif isinstance(event, ControllerResign):
            self.context = None
            return ControllerStep(resigned=True)
        elif isinstance(event, WritesFailed):
            if not self._on_writes_failed(event.snapshot):
                return ControllerStep(resigned=True)
        elif self.context is None:
            return ControllerStep()
        else:
            self._handlers[type(event)](self.context, event)
            self._last_event = event
        return self._finish()

    def _finish(self) -> ControllerStep:
        context = self.context
        assert context is not None
        step = self._step
        requests = tuple(self._flush_requests(context, step.batch))
        writes: tuple[ZnodeOp, ...] = ()
        if step.epoch_write is not None:
            writes = (step.epoch_write, *step.writes)
        elif step.writes or requests or step.answers:
            # Even a step that writes nothing is fenced before it talks to brokers: a
            # controller that lost its epoch resigns instead of sending (one controller per
            # epoch, KR-04); brokers still reject older epochs themselves (EXT-06).
            fence = CheckVersion(CONTROLLER_EPOCH_PATH, context.controller_epoch_zk_version)
            writes = (fence, *step.writes)
        return ControllerStep(
            writes=writes,
            requests=requests,
            timers=tuple(step.timers),
            answers=tuple(step.answers),
            elections=tuple(step.elections),
            failed_elections=tuple(step.failed),
        )

    # -- failover, resync ---------------------------------------------------------------------

    def _on_failover(
        self,
        snapshot: TreeSnapshot,
        now_ms: int,
        *,
        increment_epoch: bool,
        shutting_down: frozenset[BrokerId] = frozenset(),
    ) -> None:
        """onControllerFailover (CTL-44). Steps 2-6 (watches) are the shell's."""
        context = ControllerContext.from_snapshot(self.broker_id, snapshot)
        context.shutting_down_brokers = set(shutting_down) & set(context.live_brokers)
        if increment_epoch:  # step 1
            if snapshot.controller_epoch is None:  # a fresh cluster: create it
                context.controller_epoch = ControllerEpoch(1)
                context.controller_epoch_zk_version = ZkVersion(0)
                self._step.epoch_write = CreateNode(
                    CONTROLLER_EPOCH_PATH, znodes.ControllerEpoch(1)
                )
            else:
                old_epoch = snapshot.controller_epoch.data.epoch
                old_version = snapshot.controller_epoch.version
                context.controller_epoch = ControllerEpoch(old_epoch + 1)
                context.controller_epoch_zk_version = ZkVersion(old_version + 1)
                self._step.epoch_write = SetNode(
                    CONTROLLER_EPOCH_PATH, znodes.ControllerEpoch(old_epoch + 1), old_version
                )
        self.context = context
        self._initialize_states(context)  # step 8
        self._step.batch.add_update_metadata(sorted(context.assignments))  # step 10
        online = [
            (tp, broker)
            for tp, broker in sorted(context.replica_states)
            if context.replica_state(tp, broker) is R.ONLINE
        ]
        self._replicas_to(context, online, R.ONLINE)
        self._trigger_online_partition_state_change(context)
        self._resume_reassignments(context, list(context.partitions_being_reassigned))
        if snapshot.preferred_election is not None:
            partitions = from_znode_partitions(snapshot.preferred_election.partitions)
            self._preferred_election(context, partitions, True)
        self._init_deletions(context)  # step 12
        for child in snapshot.isr_change_notifications:
            self._step.writes.append(
                DeleteNode(isr_change_notification_path(child), if_exists=True)
            )
        if self.config.auto_leader_rebalance_enable:  # step 11
            self._schedule_rebalance(now_ms)

    def _initialize_states(self, context: ControllerContext) -> None:
        """Kafka's initializePartitionState / initializeReplicaState: set, not transition."""
        live = context.live_broker_ids()
        for tp, replicas in sorted(context.assignments.items()):
            leadership = context.leadership.get(tp)
            if leadership is None:
                context.partition_states[tp] = P.NEW
            elif leadership.leader in live:
                context.partition_states[tp] = P.ONLINE
            else:
                context.partition_states[tp] = P.OFFLINE
            deleting = context.is_topic_queued_for_deletion(tp.topic)
            for broker in replicas:
                if context.is_live(broker):
                    state = R.ONLINE
                else:
                    state = R.REPLICA_DELETION_INELIGIBLE if deleting else R.OFFLINE
                context.replica_states[(tp, broker)] = state

    def _on_writes_failed(self, snapshot: TreeSnapshot) -> bool:
        """A multi failed. Resign if another controller holds the epoch; otherwise reload
        from the tree and redo (CTL-42 step 3.3). Returns False when resigning."""
        context = self.context
        if context is None:
            return False
        if (
            snapshot.controller_epoch is None
            or snapshot.controller_epoch.data.epoch != context.controller_epoch
            or snapshot.controller_epoch.version != context.controller_epoch_zk_version
        ):
            self.context = None
            return False
        shutting_down = frozenset(context.shutting_down_brokers)
        self._on_failover(snapshot, 0, increment_epoch=False, shutting_down=shutting_down)
        self._step.timers.clear()  # the rebalance timer armed at failover still stands
        reloaded = self.context
        assert reloaded is not None
        last = self._last_event
        if isinstance(last, ControlledShutdown):
            self._on_controlled_shutdown(reloaded, last)
        elif isinstance(last, PreferredReplicaElection) and not last.from_admin_path:
            self._on_preferred_election_event(reloaded, last)
        elif isinstance(last, CancelReassignment):
            self._on_cancel_reassignment(reloaded, last)
        elif isinstance(last, UncleanLeaderElection):
            self._on_unclean_election(reloaded, last)
        return True

    # -- writes ---------------------------------------------------------------------------

    def _write_leadership(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        leader: BrokerId,
        isr: tuple[BrokerId, ...],
    ) -> LeaderIsr:
        """Conditionally write a new leader/ISR with leader_epoch + 1 (CTL-42 step 3.3)."""
        old = context.leadership.get(tp)
        if old is None:
            new = LeaderIsr(
                leader, INITIAL_LEADER_EPOCH, isr, context.controller_epoch, ZkVersion(0)
            )
            self._step.writes.append(CreateNode(partition_state_path(tp), new.data()))
        else:
            new = LeaderIsr(
                leader,
                LeaderEpoch(old.leader_epoch + 1),
                isr,
                context.controller_epoch,
                ZkVersion(old.zk_version + 1),
            )
            self._step.writes.append(SetNode(partition_state_path(tp), new.data(), old.zk_version))
        context.leadership[tp] = new
        return new

    def _write_topic_assignment(
        self, context: ControllerContext, topic: str, *, completed: TopicPartition | None = None
    ) -> None:
        """Write `/brokers/topics/<topic>` from the context's assignment (CTL-33 steps 1, 10).

        Every partition still being reassigned carries KIP-455's adding (RAR - OAR) and
        removing (OAR - RAR) replicas, so a failover recovers OAR from the tree; `completed`
        is the partition whose step 10 this write is (it carries neither any more)."""
        partitions = {tp.partition: context.assignments[tp] for tp in context.partitions_of(topic)}
        adding, removing = {}, {}
        for tp, reassignment in context.partitions_being_reassigned.items():
            if tp.topic == topic and tp != completed:
                original, target = reassignment.original_replicas, reassignment.target_replicas
                adding[tp.partition] = tuple(r for r in target if r not in original)
                removing[tp.partition] = tuple(r for r in original if r not in target)
        data = znodes.TopicAssignment(
            partitions={p: tuple(int(r) for r in rs) for p, rs in partitions.items()},
            topic_id=context.topic_ids.get(topic),
            adding_replicas={p: tuple(int(r) for r in rs) for p, rs in adding.items() if rs},
            removing_replicas={p: tuple(int(r) for r in rs) for p, rs in removing.items() if rs},
        )
        version = context.topic_zk_versions.get(topic, NO_VERSION)
        self._step.writes.append(SetNode(topic_path(topic), data, version))
        context.topic_zk_versions[topic] = ZkVersion(version + 1)

    # -- the partition state machine (CTL-13..16) -----------------------------------------

    def _partitions_to(
        self,
        context: ControllerContext,
        tps: Iterable[TopicPartition],
        target: PartitionState,
        strategy: Strategy = Strategy.OFFLINE,
    ) -> list[TopicPartition]:
        """Move partitions to `target`, performing CTL-14's actions. Returns those moved."""
        moved = []
        for tp in tps:
            current = context.partition_state(tp)
            if current is target and target is not P.ONLINE:
                continue
            if not is_legal(current, target):
                self.invalid_transitions.append(f"{tp}: {current.value} -> {target.value}")
                continue
            if target is P.ONLINE and not self._elect(context, tp, current, strategy):
                continue
            context.set_partition_state(tp, target)
            moved.append(tp)
        return moved

    def _elect(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        current: PartitionState,
        strategy: Strategy,
    ) -> bool:
        """New/Offline/Online -> Online: pick, write conditionally, send (CTL-14)."""
        replicas = context.assignments[tp]
        if current is P.NEW:
            result = new_partition_leader(replicas, context.live_broker_ids())
        else:
            result = self._select(context, tp, strategy)
        if isinstance(result, ElectionFailure):
            self._step.failed.append((tp, result.reason))
            return False
        new = self._write_leadership(context, tp, result.leader, result.isr)
        self._step.batch.add_leader_and_isr(result.receivers, tp, is_new=current is P.NEW)
        self._step.elections.append(
            ElectionReport(tp, new.leader, new.leader_epoch, unclean=result.unclean)
        )
        return True

    def _select(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        strategy: Strategy,
    ) -> ElectionResult:
        replicas = context.assignments[tp]
        leadership = context.leadership.get(tp)
        isr = leadership.isr if leadership is not None else ()
        leader = leadership.leader if leadership is not None else NO_LEADER
        live = context.live_broker_ids()
        if strategy in (Strategy.OFFLINE, Strategy.UNCLEAN):
            unclean = strategy is Strategy.UNCLEAN or context.unclean_leader_election_enable(
                tp.topic, self.config.unclean_leader_election_enable
            )
            return offline_partition_leader(
                replicas, isr, live, unclean_leader_election_enable=unclean
            )
        if strategy is Strategy.REASSIGNED:
            target = context.partitions_being_reassigned[tp].target_replicas
            return reassigned_partition_leader(target, isr, live)
        if strategy is Strategy.PREFERRED:
            return preferred_replica_leader(replicas, leader, isr, live)
        return controlled_shutdown_leader(
            replicas, isr, context.live_or_shutting_down(), context.shutting_down_brokers
        )

    def _trigger_online_partition_state_change(
        self, context: ControllerContext, topic: str | None = None
    ) -> None:
        """Elect leaders for every New or Offline partition (of `topic`) not being deleted."""
        tps = sorted(context.assignments) if topic is None else context.partitions_of(topic)
        candidates = [
            tp
            for tp in tps
            if context.partition_state(tp) in (P.NEW, P.OFFLINE)
            and not context.is_topic_queued_for_deletion(tp.topic)
        ]
        self._partitions_to(context, candidates, P.ONLINE, Strategy.OFFLINE)

    # -- the replica state machine (CTL-22..23) -------------------------------------------

    def _replicas_to(
        self, context: ControllerContext, replicas: Iterable[Replica], target: ReplicaState
    ) -> None:
        """Move replicas to `target`, performing CTL-23's actions."""
        for tp, broker in replicas:
            current = context.replica_state(tp, broker)
            if current is target and target is not R.ONLINE:
                continue
            if not is_legal(current, target):
                self.invalid_transitions.append(
                    f"{tp} on {broker}: {current.value} -> {target.value}"
                )
                continue
            self._replica_action(context, tp, broker, current, target)
            context.set_replica_state(tp, broker, target)
            if target is R.NON_EXISTENT:
                del context.replica_states[(tp, broker)]

    def _replica_action(
        self,
        context: ControllerContext,
        tp: TopicPartition,
        broker: BrokerId,
        current: ReplicaState,
        target: ReplicaState,
    ) -> None:
        batch = self._step.batch
        has_leadership = tp in context.leadership
        if target is R.NEW and has_leadership:
            batch.add_leader_and_isr((broker,), tp, is_new=True)
        elif target is R.ONLINE and current is R.NEW:
            if broker not in context.assignments[tp]:
                context.assignments[tp] = (*context.assignments[tp], broker)
        elif target is R.ONLINE and has_leadership:
            batch.add_leader_and_isr((broker,), tp)
        elif target is R.OFFLINE:
            batch.add_stop_replica(broker, tp, delete=False)
            self._remove_replica_from_isr(context, tp, broker)
        elif target is R.REPLICA_DELETION_STARTED:
            batch.add_stop_replica(broker, tp, delete=True)

    def _remove_replica_from_isr(
        self, context: ControllerContext, tp: TopicPartition, broker: BrokerId
    ) -> None:
        """OfflineReplica's ISR shrink (CTL-23). The last ISR member stays in the ISR so a
        clean election is possible when it returns; a leaving leader leaves NO_LEADER
        (004:115, 136)."""
        old = context.leadership.get(tp)
        if old is None or broker not in old.isr:
            return
        isr = old.isr if len(old.isr) == 1 else tuple(r for r in old.isr if r != broker)
        leader = NO_LEADER if old.leader == broker else old.leader
        self._write_leadership(context, tp, leader, isr)
        if not context.is_topic_queued_for_deletion(tp.topic):
            others = tuple(r for r in context.assignments[tp] if r != broker)
            self._step.batch.add_leader_and_isr(others, tp)
        self._step.batch.add_update_metadata((tp,))

    # -- brokers (CTL-41, CTL-42) ---------------------------------------------------------

    def _on_broker_change(self, context: ControllerContext, event: BrokerChange) -> None:
        current = {broker.broker_id: broker for broker in event.brokers}
        known = context.live_brokers
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(
            b for b in set(current) & set(known) if current[b].broker_epoch != known[b].broker_epoch
        )
        context.live_brokers = {b: info for b, info in current.items() if b not in bounced}
        context.shutting_down_brokers -= set(dead) | set(bounced)
        if dead or bounced:
            self._on_broker_failure(context, [*dead, *bounced])
        for broker in bounced:
            context.live_brokers[broker] = current[broker]
        if new or bounced:
            self._on_broker_startup(context, [*new, *bounced])

    def _on_broker_startup(self, context: ControllerContext, new: list[BrokerId]) -> None:
        """onBrokerStartup (CTL-41)."""
        self._step.batch.add_update_metadata(sorted(context.assignments))  # step 2.1
        replicas = [
            (tp, broker)
            for tp, broker in context.replicas_on_brokers(new)
            if not context.is_topic_queued_for_deletion(tp.topic)
        ]
        self._replicas_to(context, replicas, R.ONLINE)  # step 2.2
        self._trigger_online_partition_state_change(context)  # step 2.3
        involved = [
            tp
            for tp, reassignment in sorted(context.partitions_being_reassigned.items())
            if set(reassignment.target_replicas) & set(new)
        ]
        self._resume_reassignments(context, involved)  # step 2.4
        self._resume_deletions(context)  # step 2.5 (CTL-30)

    def _on_broker_failure(self, context: ControllerContext, dead: list[BrokerId]) -> None:
        """onBrokerFailure (CTL-42), as Kafka's onReplicasBecomeOffline."""
        dead_set = set(dead)
        replicas = context.replicas_on_brokers(dead)
        leaderless = [
            tp
            for tp in context.partitions_on_brokers(dead)
            if tp in context.leadership
            and context.leadership[tp].leader in dead_set
            and not context.is_topic_queued_for_deletion(tp.topic)
        ]
        self._partitions_to(context, leaderless, P.OFFLINE)
        self._trigger_online_partition_state_change(context)
        live_topics = [r for r in replicas if not context.is_topic_queued_for_deletion(r[0].topic)]
        self._replicas_to(context, live_topics, R.OFFLINE)
        for tp, broker in replicas:
            if context.is_topic_queued_for_deletion(tp.topic):
                if context.replica_state(tp, broker) is R.REPLICA_DELETION_STARTED:
                    self._replicas_to(context, [(tp, broker)], R.REPLICA_DELETION_INELIGIBLE)
                context.topics_ineligible_for_deletion.add(tp.topic)
        self._step.batch.add_update_metadata(())  # every broker learns the new live set

    # -- topic and partition creation (CTL-24..26) -----------------------------------------

    def _on_topic_change(self, context: ControllerContext, event: TopicChange) -> None:
        """onNewTopicCreation (CTL-25) for topics the context does not know."""
        known = context.topics
        for topic in sorted(known - set(event.topics)):
            if not context.is_topic_queued_for_deletion(topic):
                context.remove_topic(topic)  # removed behind the controller's back
        for topic, versioned in sorted(event.topics.items()):
            if topic in known:
                continue
            self._add_partitions(context, topic, versioned.data, versioned.version)

    def _on_partition_modifications(
        self, context: ControllerContext, event: PartitionModifications
    ) -> None:
        """Partitions added to an existing topic (CTL-26)."""
        if context.is_topic_queued_for_deletion(event.topic):
            return
        self._add_partitions(context, event.topic, event.assignment.data, event.assignment.version)

    def _add_partitions(
        self,
        context: ControllerContext,
        topic: str,
        assignment: znodes.TopicAssignment,
        version: ZkVersion,
    ) -> None:
        context.topic_zk_versions[topic] = version
        context.topic_ids[topic] = assignment.topic_id
        new = []
        for partition, replicas in sorted(assignment.partitions.items()):
            tp = TopicPartition(topic, partition)
            if tp not in context.assignments:
                context.assignments[tp] = tuple(BrokerId(r) for r in replicas)
                new.append(tp)
        self._on_new_partition_creation(context, new)

    def _on_new_partition_creation(
        self, context: ControllerContext, tps: list[TopicPartition]
    ) -> None:
        """CTL-25 step 2: New partitions, New replicas, Online partitions, Online replicas."""
        replicas = [(tp, broker) for tp in tps for broker in context.assignments[tp]]
        self._partitions_to(context, tps, P.NEW)
        self._replicas_to(context, replicas, R.NEW)
        self._partitions_to(context, tps, P.ONLINE)
        self._replicas_to(context, replicas, R.ONLINE)

    # -- topic deletion (CTL-27..30) ------------------------------------------------------

    def _on_topic_deletion_event(self, context: ControllerContext, event: TopicDeletion) -> None:
        if not self.config.delete_topic_enable:
            for topic in sorted(event.topics):
                self._step.writes.append(DeleteNode(delete_topic_path(topic), if_exists=True))
            return
        for topic in sorted(event.topics):
            if topic not in context.topics:  # CTL-28 4.1
                self._step.writes.append(DeleteNode(delete_topic_path(topic), if_exists=True))
                continue
            context.topics_to_be_deleted.add(topic)
            if self._being_reassigned(context, topic):  # CTL-28 4.2
                context.topics_ineligible_for_deletion.add(topic)
        self._resume_deletions(context)

    def _init_deletions(self, context: ControllerContext) -> None:
        if not self.config.delete_topic_enable:
            for topic in sorted(context.topics_to_be_deleted):
                self._step.writes.append(DeleteNode(delete_topic_path(topic), if_exists=True))
            context.topics_to_be_deleted.clear()
            return
        for topic in sorted(context.topics_to_be_deleted):
            if topic not in context.topics:
                self._step.writes.append(DeleteNode(delete_topic_path(topic), if_exists=True))
            elif self._being_reassigned(context, topic):
                context.topics_ineligible_for_deletion.add(topic)
        context.topics_to_be_deleted &= set(context.topics)
        self._resume_deletions(context)

    def _being_reassigned(self, context: ControllerContext, topic: str) -> bool:
        return any(tp.topic == topic for tp in context.partitions_being_reassigned)

    def _deletion_blocked(self, context: ControllerContext, topic: str) -> bool:
        """Ineligible: a partition is being reassigned, or a replica's broker is down.
        Deletion still starts on the live replicas (Kafka's startReplicaDeletion); the topic
        completes once the blocking cause is gone."""
        return self._being_reassigned(context, topic) or any(
            not context.is_live(broker) for _, broker in context.replicas_of_topic(topic)
        )

    def _resume_deletions(self, context: ControllerContext) -> None:
        """TopicDeletionManager.resumeDeletions (CTL-28 step 3, CTL-29)."""
        for topic in sorted(context.topics_to_be_deleted):
            replicas = context.replicas_of_topic(topic)
            states = [context.replica_state(tp, broker) for tp, broker in replicas]
            if all(s is R.REPLICA_DELETION_SUCCESSFUL for s in states):
                self._complete_delete_topic(context, topic)
                continue
            if any(s is R.REPLICA_DELETION_STARTED for s in states):
                continue  # waiting for StopReplica answers
            if topic in context.topics_ineligible_for_deletion:
                if self._deletion_blocked(context, topic):
                    continue
                context.topics_ineligible_for_deletion.discard(topic)
            retry = [
                replica
                for replica, state in zip(replicas, states, strict=True)
                if state is R.REPLICA_DELETION_INELIGIBLE
            ]
            self._replicas_to(context, retry, R.OFFLINE)
            self._on_topic_deletion(context, topic)

    def _on_topic_deletion(self, context: ControllerContext, topic: str) -> None:
        """CTL-29 steps 1-2: tell every broker, take replicas offline, start deletion."""
        tps = context.partitions_of(topic)
        self._step.batch.add_update_metadata(tps)
        self._partitions_to(context, tps, P.OFFLINE)
        for tp, broker in context.replicas_of_topic(topic):
            state = context.replica_state(tp, broker)
            if state is R.REPLICA_DELETION_SUCCESSFUL:
                continue
            if not context.is_live(broker):
                context.topics_ineligible_for_deletion.add(topic)
                continue
            self._replicas_to(context, [(tp, broker)], R.OFFLINE)
            self._replicas_to(context, [(tp, broker)], R.REPLICA_DELETION_STARTED)

    def _complete_delete_topic(self, context: ControllerContext, topic: str) -> None:
        """CTL-29 steps 3-6; removing `/admin/delete_topics/<t>` marks completion."""
        tps = context.partitions_of(topic)
        self._replicas_to(context, context.replicas_of_topic(topic), R.NON_EXISTENT)
        self._partitions_to(context, tps, P.OFFLINE)
        self._partitions_to(context, tps, P.NON_EXISTENT)
        self._step.writes.append(DeleteNode(topic_path(topic), recursive=True))
        self._step.writes.append(
            DeleteNode(topic_config_path(topic), recursive=True, if_exists=True)
        )
        self._step.writes.append(DeleteNode(delete_topic_path(topic), if_exists=True))
        context.remove_topic(topic)

    def _on_stop_replica_response(
        self, context: ControllerContext, event: StopReplicaResponse
    ) -> None:
        for tp, error in sorted(event.errors.items()):
            if not context.is_topic_queued_for_deletion(tp.topic):
                continue
            if context.replica_state(tp, event.broker_id) is not R.REPLICA_DELETION_STARTED:
                continue
            target = (
                R.REPLICA_DELETION_SUCCESSFUL
                if error is ErrorCode.none
                else R.REPLICA_DELETION_INELIGIBLE
            )
            self._replicas_to(context, [(tp, event.broker_id)], target)
        self._resume_deletions(context)

    # -- reassignment (CTL-31..35) ----------------------------------------------------------

    def _on_reassignment_event(
        self, context: ControllerContext, event: PartitionReassignment
    ) -> None:
        if event.plan is None:
            return
        context.reassignment_zk_version = event.plan.version
        started, rejected = [], False
        for tp, target in sorted(reassignment_targets(event.plan.data).items()):
            existing = context.partitions_being_reassigned.get(tp)
            if existing is not None and existing.target_replicas == tuple(target):
                continue
            if not self._reassignment_acceptable(context, tp, tuple(target)):
                rejected = True
                continue
            # A new target for a partition already moving keeps its first OAR (KIP-455).
            original = context.assignments[tp] if existing is None else existing.original_replicas
            context.partitions_being_reassigned[tp] = ReassignmentContext(
                original_replicas=original, target_replicas=tuple(target)
            )
            started.append(tp)
        if rejected:
            self._write_reassignment_plan(context)
        self._resume_reassignments(context, started)

    def _reassignment_acceptable(
        self, context: ControllerContext, tp: TopicPartition, target: tuple[BrokerId, ...]
    ) -> bool:
        return (
            tp in context.assignments
            and not context.is_topic_queued_for_deletion(tp.topic)
            and len(target) > 0
            and len(set(target)) == len(target)
            and all(broker in context.live_broker_ids() for broker in target)
        )

    def _resume_reassignments(self, context: ControllerContext, tps: list[TopicPartition]) -> None:
        for tp in sorted(tps):
            if tp in context.partitions_being_reassigned:
                self._on_partition_reassignment(context, tp)

    def _on_partition_reassignment(self, context: ControllerContext, tp: TopicPartition) -> None:
        """onPartitionReassignment (CTL-33): phase A (steps 1-3) until every RAR replica is
        in the ISR (step 4), then phase B (steps 5-11)."""
        reassignment = context.partitions_being_reassigned[tp]
        target = reassignment.target_replicas
        leadership = context.leadership.get(tp)
        if context.assignments[tp] == target == reassignment.original_replicas:
            # Nothing moves (a plan naming the current replicas, or a failover after step
            # 10 was written): only step 11 is left. A pure addition (OAR [1,2] -> RAR
            # [1,2,3]) has AR == RAR after step 1 already and still waits for step 4.
            self._finish_reassignment(context, tp)
        elif leadership is None:
            return  # no leader yet: retried on the next broker or ISR change
        elif all(replica in leadership.isr for replica in target):
            self._reassignment_phase_b(context, tp, target)
        else:
            self._reassignment_phase_a(context, tp, target)

    def _reassignment_phase_a(
        self, context: ControllerContext, tp: TopicPartition, target: tuple[BrokerId, ...]
    ) -> None:
        current = context.assignments[tp]
        expanded = (*current, *(r for r in target if r not in current))
        if expanded != current:  # step 1: AR = OAR + RAR in the tree
            context.assignments[tp] = expanded
            self._write_topic_assignment(context, tp.topic)
        leadership = context.leadership[tp]  # step 2: bump the leader epoch, tell AR
        self._write_leadership(context, tp, leadership.leader, leadership.isr)
        self._step.batch.add_leader_and_isr(expanded, tp)
        new_replicas = [
            (tp, r)
            for r in target
            if r not in reassignment_original(context, tp)
            and context.replica_state(tp, r) is R.NON_EXISTENT
        ]
        self._replicas_to(context, new_replicas, R.NEW)  # step 3; step 4 waits for the ISR

    def _reassignment_phase_b(
        self, context: ControllerContext, tp: TopicPartition, target: tuple[BrokerId, ...]
    ) -> None:
        current = context.assignments[tp]
        self._replicas_to(context, [(tp, r) for r in target], R.ONLINE)  # step 5
        context.assignments[tp] = target  # step 6 (the context only)
        leadership = context.leadership[tp]  # step 7
        if leadership.leader in target and leadership.leader in context.live_broker_ids():
            self._write_leadership(context, tp, leadership.leader, leadership.isr)
            self._step.batch.add_leader_and_isr(target, tp)
        else:
            self._partitions_to(context, [tp], P.ONLINE, Strategy.REASSIGNED)
        removed = [(tp, r) for r in current if r not in target]  # steps 8-9
        for _, replica in removed:  # even if already Offline (a dead broker at failover)
            self._remove_replica_from_isr(context, tp, replica)
        self._replicas_to(context, removed, R.OFFLINE)
        self._replicas_to(context, removed, R.REPLICA_DELETION_STARTED)
        self._replicas_to(context, removed, R.REPLICA_DELETION_SUCCESSFUL)
        self._replicas_to(context, removed, R.NON_EXISTENT)
        self._write_topic_assignment(context, tp.topic, completed=tp)  # step 10: AR = RAR
        self._finish_reassignment(context, tp)

    def _finish_reassignment(self, context: ControllerContext, tp: TopicPartition) -> None:
        """Step 11 (remove the partition from the plan), metadata, resume deletion."""
        del context.partitions_being_reassigned[tp]
        self._write_reassignment_plan(context)
        self._step.batch.add_update_metadata((tp,))
        if context.is_topic_queued_for_deletion(tp.topic):
            self._resume_deletions(context)

    def _write_reassignment_plan(self, context: ControllerContext) -> None:
        """Rewrite `/admin/reassign_partitions` with what is left, or delete it."""
        remaining = {
            tp: reassignment.target_replicas
            for tp, reassignment in sorted(context.partitions_being_reassigned.items())
        }
        if remaining:
            version = context.reassignment_zk_version
            self._step.writes.append(
                SetNode(REASSIGN_PARTITIONS_PATH, reassignment_plan(remaining), version)
            )
            context.reassignment_zk_version = ZkVersion(version + 1)
        else:
            self._step.writes.append(DeleteNode(REASSIGN_PARTITIONS_PATH, if_exists=True))
            context.reassignment_zk_version = NO_VERSION

    def _on_isr_change(self, context: ControllerContext, event: IsrChangeNotification) -> None:
        """CTL-40: take the fresh states, UpdateMetadata to all, consume the children;
        reassignment step 4 may now be satisfied."""
        changed = []
        for tp, versioned in sorted(event.states.items()):
            if tp not in context.assignments:
                continue
            old = context.leadership.get(tp)
            if old is None or versioned.version > old.zk_version:
                context.leadership[tp] = LeaderIsr.from_znode(versioned.data, versioned.version)
                changed.append(tp)
        self._step.batch.add_update_metadata(changed)
        for child in event.children:
            self._step.writes.append(
                DeleteNode(isr_change_notification_path(child), if_exists=True)
            )
        ready = [
            tp
            for tp in changed
            if tp in context.partitions_being_reassigned
            and all(
                r in context.leadership[tp].isr
                for r in context.partitions_being_reassigned[tp].target_replicas
            )
        ]
        self._resume_reassignments(context, ready)

    def _on_cancel_reassignment(
        self, context: ControllerContext, event: CancelReassignment
    ) -> None:
        """Revert to OAR: the same steps with RAR := OAR (phase B at once when OAR is in
        the ISR: the added replicas are stopped and deleted, AR = OAR is written last)."""
        cancelled = []
        for tp in sorted(set(event.partitions)):
            reassignment = context.partitions_being_reassigned.get(tp)
            if reassignment is None:
                continue
            original = reassignment.original_replicas
            context.partitions_being_reassigned[tp] = ReassignmentContext(original, original)
            cancelled.append(tp)
        if cancelled:
            self._write_reassignment_plan(context)
            self._resume_reassignments(context, cancelled)

    def _on_unclean_election(
        self, context: ControllerContext, event: UncleanLeaderElection
    ) -> None:
        leaderless = []
        for tp in sorted(set(event.partitions)):
            if tp not in context.assignments or context.is_topic_queued_for_deletion(tp.topic):
                self._step.failed.append((tp, ElectionFailureReason.UNKNOWN_PARTITION))
            elif context.partition_state(tp) in (P.OFFLINE, P.NEW):
                leaderless.append(tp)
            else:
                self._step.failed.append((tp, ElectionFailureReason.ELECTION_NOT_NEEDED))
        self._partitions_to(context, leaderless, P.ONLINE, Strategy.UNCLEAN)

    # -- unclean.leader.election.enable changes (Kafka's TopicUncleanLeaderElectionEnable) ----

    def _on_topic_config_change(self, context: ControllerContext, event: TopicConfigChange) -> None:
        """A topic's overrides changed: cache them; if its unclean election is now enabled,
        try its leaderless partitions again (onTopicUncleanLeaderElectionEnable)."""
        if event.topic not in context.topics:
            return  # not created yet (its TopicChange brings it) or already deleted
        if event.configs:
            context.topic_configs[event.topic] = dict(event.configs)
        else:
            context.topic_configs.pop(event.topic, None)
        default = self.config.unclean_leader_election_enable
        if context.unclean_leader_election_enable(event.topic, default):
            self._trigger_online_partition_state_change(context, event.topic)

    def _on_unclean_default(
        self, context: ControllerContext, event: UncleanLeaderElectionDefault
    ) -> None:
        """The broker default changed; when enabled, every leaderless partition is tried
        again (onUncleanLeaderElectionEnable). Topics overriding it to false stay clean."""
        self.config = replace(self.config, unclean_leader_election_enable=event.enabled)
        if event.enabled:
            self._trigger_online_partition_state_change(context)

    # -- preferred election and auto rebalance (CTL-36..38) ---------------------------------

    def _on_preferred_election_event(
        self, context: ControllerContext, event: PreferredReplicaElection
    ) -> None:
        self._preferred_election(context, event.partitions, event.from_admin_path)

    def _preferred_election(
        self,
        context: ControllerContext,
        partitions: Iterable[TopicPartition],
        from_admin_path: bool,
    ) -> None:
        eligible = []
        for tp in sorted(set(partitions)):
            if tp not in context.assignments or context.is_topic_queued_for_deletion(tp.topic):
                self._step.failed.append((tp, ElectionFailureReason.UNKNOWN_PARTITION))
            elif tp not in context.partitions_being_reassigned:
                eligible.append(tp)
        self._partitions_to(context, eligible, P.ONLINE, Strategy.PREFERRED)
        if from_admin_path:
            self._step.writes.append(DeleteNode(PREFERRED_REPLICA_ELECTION_PATH, if_exists=True))

    def _schedule_rebalance(self, now_ms: int) -> None:
        interval_ms = self.config.leader_imbalance_check_interval_seconds * 1000
        self._step.timers.append(
            ScheduleTimer(TimerKind.AUTO_LEADER_REBALANCE, now_ms + interval_ms)
        )

    def _on_auto_rebalance(
        self, context: ControllerContext, event: AutoPreferredReplicaLeaderElection
    ) -> None:
        """EXT-11: per preferred broker, if more than leader.imbalance.per.broker.percentage
        of its preferred partitions are led elsewhere, elect it where it qualifies."""
        if not self.config.auto_leader_rebalance_enable:
            return
        self._schedule_rebalance(event.now_ms)
        by_preferred: dict[BrokerId, list[TopicPartition]] = {}
        for tp, replicas in sorted(context.assignments.items()):
            if replicas and not context.is_topic_queued_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        candidates: list[TopicPartition] = []
        for broker, tps in sorted(by_preferred.items()):
            imbalanced = [tp for tp in tps if leader_or_none(context, tp) != broker]
            ratio_percent = 100 * len(imbalanced) / len(tps)
            if ratio_percent <= self.config.leader_imbalance_per_broker_percentage:
                continue
            if broker not in context.live_broker_ids():
                continue
            candidates.extend(
                tp
                for tp in imbalanced
                if tp in context.leadership and broker in context.leadership[tp].isr
            )
        self._preferred_election(context, candidates, from_admin_path=False)

    # -- controlled shutdown (CTL-43) ------------------------------------------------------

    def _on_controlled_shutdown(
        self, context: ControllerContext, event: ControlledShutdown
    ) -> None:
        broker = event.broker_id
        registered = context.live_brokers.get(broker)
        if registered is None:
            self._answer(broker, ErrorCode.broker_not_available, ())
            return
        if event.broker_epoch < registered.broker_epoch:
            self._answer(broker, ErrorCode.stale_broker_epoch, ())
            return
        context.shutting_down_brokers.add(broker)
        replicated = [
            tp
            for tp in context.partitions_on_brokers([broker])
            if len(context.assignments[tp]) > 1
            and tp in context.leadership
            and not context.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in replicated if context.leadership[tp].leader == broker]
        followed = [tp for tp in replicated if context.leadership[tp].leader != broker]
        self._partitions_to(context, led, P.ONLINE, Strategy.CONTROLLED_SHUTDOWN)
        self._replicas_to(context, [(tp, broker) for tp in followed], R.OFFLINE)
        remaining = tuple(tp for tp in replicated if context.leadership[tp].leader == broker)
        self._answer(broker, ErrorCode.none, remaining)

    def _answer(
        self, broker: BrokerId, error: ErrorCode, remaining: tuple[TopicPartition, ...]
    ) -> None:
        self._step.answers.append(ControlledShutdownAnswer(broker, error, remaining))

    # -- requests (CTL-11, CTL-12) ---------------------------------------------------------

    def _flush_requests(self, context: ControllerContext, batch: RequestBatch) -> list[SendRequest]:
        """One LeaderAndIsr, one UpdateMetadata and up to two StopReplica per live broker."""
        live = context.live_brokers
        targets = set(batch.leader_and_isr) | {broker for broker, _ in batch.stop_replica}
        if batch.update_metadata_all_brokers:
            targets |= set(live)
        metadata: tuple[UpdateMetadataPartitionState, ...] = ()
        if batch.update_metadata_all_brokers:  # the same content for every broker: build once
            metadata = tuple(
                self._update_metadata_state(context, tp)
                for tp in sorted(batch.update_metadata_partitions)
                if tp in context.leadership
            )
        requests: list[SendRequest] = []
        for broker in sorted(targets):
            info = live.get(broker)
            if info is None:
                continue  # no channel to a dead broker (CTL-11)
            requests.extend(self._requests_for(context, batch, broker, info.broker_epoch, metadata))
        return requests

    def _requests_for(
        self,
        context: ControllerContext,
        batch: RequestBatch,
        broker: BrokerId,
        broker_epoch: int,
        metadata: tuple[UpdateMetadataPartitionState, ...],
    ) -> list[SendRequest]:
        requests: list[SendRequest] = []
        common = (context.controller_id, context.controller_epoch, broker_epoch)
        states = [
            self._leader_and_isr_state(context, tp, is_new)
            for tp, is_new in sorted(batch.leader_and_isr.get(broker, {}).items())
            if tp in context.leadership
        ]
        if states:
            leaders = {s.leader for s in states}
            live_leaders = tuple(
                context.live_brokers[b] for b in sorted(leaders) if b in context.live_brokers
            )
            requests.append(
                SendRequest(broker, LeaderAndIsrRequest(*common, tuple(states), live_leaders))
            )
        if batch.update_metadata_all_brokers:
            brokers = tuple(context.live_brokers[b] for b in sorted(context.live_brokers))
            requests.append(SendRequest(broker, UpdateMetadataRequest(*common, metadata, brokers)))
        for delete in (False, True):
            tps = batch.stop_replica.get((broker, delete))
            if tps:
                request = StopReplicaRequest(*common, delete, tuple(sorted(tps)))
                requests.append(SendRequest(broker, request))
        return requests

    def _leader_and_isr_state(
        self, context: ControllerContext, tp: TopicPartition, is_new: bool
    ) -> LeaderAndIsrPartitionState:
        leadership = context.leadership[tp]
        return LeaderAndIsrPartitionState(
            tp=tp,
            controller_epoch=leadership.controller_epoch,
            leader=leadership.leader,
            leader_epoch=leadership.leader_epoch,
            isr=leadership.isr,
            zk_version=leadership.zk_version,
            replicas=context.assignments[tp],
            is_new=is_new,
        )

    def _update_metadata_state(
        self, context: ControllerContext, tp: TopicPartition
    ) -> UpdateMetadataPartitionState:
        leadership = context.leadership[tp]
        deleting = context.is_topic_queued_for_deletion(tp.topic)
        replicas = context.assignments[tp]
        return UpdateMetadataPartitionState(
            tp=tp,
            controller_epoch=leadership.controller_epoch,
            leader=LEADER_DURING_DELETE if deleting else leadership.leader,
            leader_epoch=leadership.leader_epoch,
            isr=leadership.isr,
            zk_version=leadership.zk_version,
            replicas=replicas,
            offline_replicas=tuple(r for r in replicas if not context.is_live(r)),
        )


def reassignment_original(context: ControllerContext, tp: TopicPartition) -> tuple[BrokerId, ...]:
    """OAR of a partition being reassigned (CTL-32)."""
    return context.partitions_being_reassigned[tp].original_replicas


def leader_or_none(context: ControllerContext, tp: TopicPartition) -> BrokerId | None:
    leadership = context.leadership.get(tp)
    return None if leadership is None else leadership.leader
