"""A seeded, deterministic simulation of a small cluster (STYLE 6).

Brokers hold in-memory logs of (leader_epoch, value) records; the real `Controller` runs on
the lowest live broker and its steps are executed against the quorum's real tree (behind
`LocalTransport`); the real `PartitionLeaderState` keeps each leader's books; followers fetch
and, in `Mode.LEADER_EPOCH`, truncate with the real OffsetForLeaderEpoch decision (KIP-101/279).
`Mode.HIGH_WATERMARK` is the pre-0.11 control: truncate to the (checkpointed) HW on restart
and on becoming follower (REP-26).

Every `step()` is checked: one controller per epoch, a leader's HW never goes back, no
acknowledged acks=all write is lost (the leader and every ISR member hold it), and no two
replicas differ below both their HWs. The only randomness is the `random.Random(seed)`;
time is a counter; so a failing seed replays exactly (the trace is identical).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tests.node.controller.harness import (
    RealTree,
    create_topic,
    new_tree,
    register,
    unregister,
    write_plan,
)
from tests.node.replication.epochs import Epochs
from trafka.node.controller.effects import (
    ControllerStep,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    SendRequest,
    StopReplicaRequest,
)
from trafka.node.controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    CancelReassignment,
    ControlledShutdown,
    ControllerEvent,
    ControllerFailover,
    IsrChangeNotification,
    PartitionReassignment,
    PreferredReplicaElection,
    TopicChange,
    WritesFailed,
)
from trafka.node.controller.machine import Controller, ControllerConfig
from trafka.node.controller.payloads import ISR_CHANGE_NOTIFICATION_PATH, partition_state_path
from trafka.node.controller.tree_ops import isr_write_ops
from trafka.node.replication.fencing import (
    ControllerEpochFence,
    Role,
    check_current_leader_epoch,
    leader_and_isr_role,
)
from trafka.node.replication.follower import (
    EpochRequest,
    FollowerPhase,
    PartitionFollowerState,
)
from trafka.node.replication.ids import BrokerId, LeaderEpoch, Offset, TopicPartition, ZkVersion
from trafka.node.replication.leader import (
    IsrWrite,
    IsrWriteOutcome,
    PartitionLeaderState,
    acks_all_outcome,
)
from trafka.node.replication.truncation import leader_answer

LAG_MS = 10_000
PRODUCE_TIMEOUT_MS = 30_000
MAX_FETCH_RECORDS = 3


class Mode(enum.Enum):
    LEADER_EPOCH = "leader-epoch truncation (KIP-101)"
    HIGH_WATERMARK = "high-watermark truncation (pre-0.11 control)"


class InvariantViolation(AssertionError):
    pass


@dataclass(frozen=True)
class Record:
    epoch: int
    value: int


@dataclass
class ReplicaLog:
    records: list[Record] = field(default_factory=list)
    epochs: Epochs = field(default_factory=Epochs)
    high_watermark: int = 0
    high_watermark_checkpoint: int = 0
    flushed: int = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    def append(self, records: list[Record], flush: bool = True) -> None:
        for record in records:
            self.epochs.assign(record.epoch, len(self.records))
            self.records.append(record)
        if flush:
            self.flushed = len(self.records)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.records):
            return
        del self.records[offset:]
        self.epochs.truncate_from_end(offset)
        self.flushed = min(self.flushed, offset)
        self.high_watermark = min(self.high_watermark, offset)


@dataclass
class SimBroker:
    broker_id: int
    logs: dict[TopicPartition, ReplicaLog]
    alive: bool = True
    isolated: bool = False
    fence: ControllerEpochFence = field(default_factory=ControllerEpochFence)
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    leaders: dict[TopicPartition, PartitionLeaderState] = field(default_factory=dict)
    following: dict[TopicPartition, PartitionFollowerState] = field(default_factory=dict)


@dataclass
class Pending:
    tp: TopicPartition
    broker: int
    leader_epoch: int
    offset: int
    value: int
    deadline_ms: int


class SimCluster:
    def __init__(
        self,
        brokers: tuple[int, ...] = (1, 2, 3),
        partitions: dict[int, tuple[int, ...]] | None = None,
        *,
        mode: Mode = Mode.LEADER_EPOCH,
        min_insync_replicas: int = 2,
        rng: random.Random | None = None,
        check: bool = True,
        notification_delay: bool = False,
        unknown_isr_writes: float = 0.0,
    ) -> None:
        self.mode = mode
        self.unknown_isr_writes = unknown_isr_writes
        """Probability that an ISR write's outcome is unknown to the leader (a quorum
        timeout); the tree applies such a write or not, at random."""
        self.next_isr_write_unknown: bool | None = None
        """For scenarios: the next ISR write's outcome is unknown to the leader, and the
        tree applies it (True) or not (False)."""
        self.min_insync_replicas = min_insync_replicas
        self.rng = rng or random.Random(0)
        self.check = check
        self.now_ms = 1_000_000
        self.trace: list[str] = []
        self.tree: RealTree = new_tree(*brokers)
        assignment = partitions or {0: brokers}
        self.tps = [TopicPartition("t", p) for p in sorted(assignment)]
        self.brokers = {b: SimBroker(b, {tp: ReplicaLog() for tp in self.tps}) for b in brokers}
        self.controller: Controller | None = None
        self.controller_broker: int | None = None
        self.controllers_by_epoch: dict[int, int] = {}
        self.acked: dict[TopicPartition, dict[int, int]] = {tp: {} for tp in self.tps}
        self.pending: list[Pending] = []
        self.next_value = 0
        self.leader_high_watermarks: dict[tuple[int, TopicPartition], int] = {}
        self.notification_delay = notification_delay
        self.failed_multis = 0
        self._ensure_controller()
        create_topic(self.tree, "t", assignment)
        self.controller_event(TopicChange(self.tree.topics()))

    # -- controller -----------------------------------------------------------------------

    def _ensure_controller(self) -> None:
        if self.controller is not None and self.brokers[self.controller_broker or 0].alive:
            return
        live = sorted(b for b, broker in self.brokers.items() if broker.alive)
        if not live:
            self.controller = None
            return
        self.controller_broker = live[0]
        self.controller = Controller(BrokerId(live[0]), ControllerConfig())
        self.trace.append(f"controller -> {live[0]}")
        self._run(ControllerFailover(self.tree.snapshot(), self.now_ms))
        epoch = self.controller.epoch if self.controller is not None else None
        if epoch is not None:
            owner = self.controllers_by_epoch.setdefault(epoch, live[0])
            if owner != live[0]:
                raise InvariantViolation(f"two controllers for epoch {epoch}")

    def controller_event(self, event: ControllerEvent) -> None:
        self._ensure_controller()
        if self.controller is not None:
            self._run(event)

    def _run(self, event: ControllerEvent) -> None:
        assert self.controller is not None
        step: ControllerStep = self.controller.handle(event)
        for _ in range(10):
            if not step.writes or self.tree.multi(step.writes):
                break
            self.failed_multis += 1
            self.trace.append("controller multi failed: reload")
            step = self.controller.handle(WritesFailed(self.tree.snapshot()))
        else:
            raise InvariantViolation("the controller could not commit")
        if step.resigned:
            self.controller = None
        for send in step.requests:
            self._deliver(send)

    def _deliver(self, send: SendRequest) -> None:
        broker = self.brokers[send.broker_id]
        request = send.request
        if not broker.alive:
            return
        if broker.fence.admit(request.controller_epoch) is not ErrorCode.none:
            self.trace.append(
                f"{broker.broker_id} rejects controller epoch {request.controller_epoch}"
            )
            return  # STALE_CONTROLLER_EPOCH
        if isinstance(request, LeaderAndIsrRequest):
            for state in request.partition_states:
                self._leader_and_isr(broker, state)
        elif isinstance(request, StopReplicaRequest):
            for tp in request.partitions:
                broker.leaders.pop(tp, None)
                broker.following.pop(tp, None)
                if request.delete_partitions:
                    broker.logs[tp] = ReplicaLog()
                    broker.leader_epochs.pop(tp, None)
                    self.trace.append(f"{broker.broker_id} deletes {tp}")

    def _leader_and_isr(self, broker: SimBroker, state: LeaderAndIsrPartitionState) -> None:
        tp = state.tp
        current = broker.leader_epochs.get(tp)
        decision = leader_and_isr_role(
            BrokerId(broker.broker_id),
            state.leader,
            state.leader_epoch,
            None if current is None else LeaderEpoch(current),
        )
        if decision.role is Role.IGNORE:
            return  # not newer (EXT-06)
        broker.leader_epochs[tp] = state.leader_epoch
        log = broker.logs[tp]
        if decision.role is Role.LEADER:
            broker.following.pop(tp, None)
            log.epochs.assign(state.leader_epoch, log.log_end_offset)
            previous = broker.leaders.get(tp)
            leader = PartitionLeaderState.become_leader(
                tp,
                BrokerId(broker.broker_id),
                leader_epoch=state.leader_epoch,
                controller_epoch=state.controller_epoch,
                replicas=state.replicas,
                isr=state.isr,
                zk_version=state.zk_version,
                log_end_offset=Offset(log.log_end_offset),
                high_watermark=Offset(log.high_watermark),
                now_ms=self.now_ms,
                replica_lag_time_max_ms=LAG_MS,
                min_insync_replicas=self.min_insync_replicas,
                leading_since_epoch=None if previous is None else previous.leading_since_epoch,
            )
            broker.leaders[tp] = leader
            log.high_watermark = leader.high_watermark
            self.trace.append(f"{broker.broker_id} leads {tp} epoch {state.leader_epoch}")
        else:
            broker.leaders.pop(tp, None)
            follow = PartitionFollowerState.become_follower(tp, state.leader, state.leader_epoch)
            if self.mode is Mode.HIGH_WATERMARK:  # pre-0.11: truncate to the HW, no handshake
                log.truncate_to(log.high_watermark)
                follow.phase = FollowerPhase.FETCHING
            broker.following[tp] = follow

    # -- data plane -----------------------------------------------------------------------

    def produce(self, tp: TopicPartition) -> None:
        versioned = self.tree.partition_state(tp)
        if versioned is None or versioned.data.leader < 0:
            return
        broker = self.brokers[versioned.data.leader]
        leader = broker.leaders.get(tp) if broker.alive else None
        if leader is None:
            return
        if leader.check_before_append(-1) is not ErrorCode.none:
            self.trace.append(f"produce {tp}: NOT_ENOUGH_REPLICAS")
            return
        log = broker.logs[tp]
        value = self.next_value
        self.next_value += 1
        log.append([Record(leader.leader_epoch, value)], flush=self._flush_on_append)
        leader.on_append(Offset(log.log_end_offset), self.now_ms)
        log.high_watermark = leader.high_watermark
        self.pending.append(
            Pending(tp, broker.broker_id, leader.leader_epoch, log.log_end_offset - 1, value,
                    self.now_ms + PRODUCE_TIMEOUT_MS)
        )  # fmt: skip
        self.trace.append(
            f"produce {tp} v{value} at {log.log_end_offset - 1} on {broker.broker_id}"
        )

    _flush_on_append = True

    def fetch(self, follower_id: int, tp: TopicPartition, *, drop_response: bool = False) -> None:
        """One round of the follower's fetcher for `tp`, driven by PartitionFollowerState."""
        follower = self.brokers[follower_id]
        follow = follower.following.get(tp)
        if not follower.alive or follow is None or follow.leader < 0:
            return
        source = self.brokers[follow.leader]
        if not source.alive or source.isolated or follower.isolated:
            return  # no connection
        leader = source.leaders.get(tp)
        log, leader_log = follower.logs[tp], source.logs[tp]
        request = follow.next_request(log.epochs, log.log_end_offset)
        error = (
            ErrorCode.not_leader_or_follower
            if leader is None
            else check_current_leader_epoch(leader.leader_epoch, request.current_leader_epoch)
        )
        if isinstance(request, EpochRequest):
            answer = leader_answer(
                leader_log.epochs, request.leader_epoch, leader_log.log_end_offset
            )
            decision = follow.on_epoch_answer(
                error, answer, log.epochs, log.log_end_offset, log.high_watermark
            )
            if decision is not None:
                log.truncate_to(decision.offset)
                self.trace.append(f"{follower_id} truncates {tp} to {decision.offset}")
            return
        if leader is None or error is not ErrorCode.none:
            return  # FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320): back off
        fetch_offset = request.fetch_offset
        if fetch_offset > leader_log.log_end_offset:
            outcome = follow.on_fetch_answer(
                ErrorCode.offset_out_of_range, leader.high_watermark,
                leader_log.log_end_offset, fetch_offset, 0,
            )  # fmt: skip
            assert outcome.truncate_to is not None
            log.truncate_to(outcome.truncate_to)
            return
        records = leader_log.records[fetch_offset : fetch_offset + MAX_FETCH_RECORDS]
        leader_outcome = leader.on_follower_fetch(BrokerId(follower_id), fetch_offset, self.now_ms)
        leader_log.high_watermark = leader.high_watermark
        if leader_outcome.isr_write is not None:
            self._isr_write(source, leader_outcome.isr_write)
        if drop_response or follower.following.get(tp) is not follow:
            return  # lost, or the follower's role changed meanwhile: the response is stale
        outcome = follow.on_fetch_answer(
            ErrorCode.none, leader.high_watermark, leader_log.log_end_offset, fetch_offset,
            len(records),
        )  # fmt: skip
        log.append(list(records), flush=self._flush_on_append)
        assert outcome.high_watermark is not None
        log.high_watermark = outcome.high_watermark

    def _isr_write(self, broker: SimBroker, write: IsrWrite) -> None:
        """What the replica manager's shell does with an IsrWrite: one multi of the
        conditional state write and the sequential notification (tree_ops.isr_write_ops)."""
        tp = write.tp
        unknown = self.next_isr_write_unknown
        self.next_isr_write_unknown = None
        if (
            unknown is None
            and self.unknown_isr_writes
            and self.rng.random() < (self.unknown_isr_writes)
        ):
            unknown = self.rng.random() < 0.5
        if unknown is not None:
            applied = unknown and self.tree.multi(isr_write_ops(write))
            broker.leaders[tp].on_isr_write_result(
                IsrWriteOutcome.UNKNOWN, ZkVersion(-1), self.now_ms
            )
            self.trace.append(
                f"{broker.broker_id} isr {tp} -> {list(write.isr)} unknown "
                f"({'applied' if applied else 'lost'})"
            )
            if applied and not self.notification_delay:
                self.deliver_notifications()
            return
        ok = self.tree.multi(isr_write_ops(write))
        version = ZkVersion(self.tree.version(partition_state_path(tp)) if ok else -1)
        leader = broker.leaders[tp]
        leader.on_isr_write_result(ok, version, self.now_ms)
        if not ok:
            # The replica manager's `_resync_partition_state`: adopt the tree's ISR and
            # version when it still names this leader in this epoch.
            current = self.tree.partition_state(tp)
            if (
                current is not None
                and current.data.leader == broker.broker_id
                and current.data.leader_epoch == leader.leader_epoch
            ):
                leader.zk_version = ZkVersion(current.version)
                leader.isr = tuple(BrokerId(b) for b in current.data.isr)
        broker.logs[tp].high_watermark = leader.high_watermark
        self.trace.append(
            f"{broker.broker_id} isr {tp} -> {list(write.isr)} {'ok' if ok else 'conflict'}"
        )
        if ok and not self.notification_delay:
            self.deliver_notifications()

    def deliver_notifications(self) -> None:
        """The controller's watch on /isr_change_notification fires; the shell re-reads the
        children, their partitions and those partitions' states (KR-06). With
        `notification_delay` this happens at random moments, so the controller works on
        stale versions meanwhile and must recover from failed multis (WritesFailed)."""
        children = tuple(self.tree.children(ISR_CHANGE_NOTIFICATION_PATH))
        if not children:
            return
        states = {}
        for child in children:
            notification = self.tree.get(f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}")
            for partition in notification.partitions:
                tp = TopicPartition(partition.topic, partition.partition)
                state = self.tree.partition_state(tp)
                if state is not None:
                    states[tp] = state
        self.trace.append(f"notify {len(children)}")
        self.controller_event(IsrChangeNotification(children, states))

    def leader_checks(self) -> None:
        """The leaders' periodic ISR shrink check (every replica.lag.time.max.ms / 2)."""
        for broker in self._live():
            for tp in sorted(broker.leaders):
                leader = broker.leaders.get(tp)
                if leader is None:
                    continue
                write = leader.maybe_shrink_isr(self.now_ms)
                if write is not None:
                    self._isr_write(broker, write)

    def complete_produces(self) -> None:
        still = []
        for pending in self.pending:
            broker = self.brokers[pending.broker]
            leader = broker.leaders.get(pending.tp) if broker.alive else None
            outcome = acks_all_outcome(
                leader, LeaderEpoch(pending.leader_epoch), Offset(pending.offset + 1),
                self.now_ms, pending.deadline_ms,
            )  # fmt: skip
            if outcome is None:
                still.append(pending)
            elif outcome is ErrorCode.none:
                self.acked[pending.tp][pending.offset] = pending.value
                self.trace.append(f"ack v{pending.value} at {pending.offset}")
        self.pending = still

    # -- faults ---------------------------------------------------------------------------

    def kill(self, *broker_ids: int, lose_unflushed: bool = False) -> None:
        """Crash brokers; their sessions expire together (one BrokerChange)."""
        for broker_id in broker_ids:
            self._crash(broker_id, lose_unflushed)
            self.brokers[broker_id].alive = False
            unregister(self.tree, broker_id)
            self.trace.append(f"kill {broker_id}")
            if self.controller_broker == broker_id:
                self.controller = None
        self.controller_event(BrokerChange(self.tree.brokers()))

    def bounce(self, broker_id: int, *, lose_unflushed: bool = False) -> None:
        """Restart a broker's process within its session timeout: the controller never
        notices (the seeds' REP-22 "B's broker restarts"); memory is lost, the log and the
        HW checkpoint survive."""
        self._crash(broker_id, lose_unflushed)
        self._recover(self.brokers[broker_id])
        self.trace.append(f"bounce {broker_id}")

    def fast_restart(self, broker_id: int) -> None:
        """Restart within the session timeout: the new session replaces the old one, so the
        controller sees the same broker with a new epoch (Kafka's "bounced" broker)."""
        self._crash(broker_id, lose_unflushed=False)
        self._recover(self.brokers[broker_id])
        unregister(self.tree, broker_id)
        register(self.tree, broker_id)
        self.trace.append(f"fast-restart {broker_id}")
        if self.controller_broker == broker_id:
            self.controller = None
        self.controller_event(BrokerChange(self.tree.brokers()))

    def controlled_shutdown(self, broker_id: int) -> None:
        """SIGTERM: ControlledShutdown first (leaders moved away), then the process exits."""
        epoch = next(b.broker_epoch for b in self.tree.brokers() if b.broker_id == broker_id)
        self.trace.append(f"controlled shutdown {broker_id}")
        self.controller_event(ControlledShutdown(BrokerId(broker_id), epoch))
        self.kill(broker_id)

    def reassign(self) -> None:
        """Move a random partition to a random set of live brokers (CTL-31)."""
        if self.tree.reassignment() is not None:
            return
        live = [b.broker_id for b in self._live()]
        tp = self.rng.choice(self.tps)
        size = len(self.tree.topics()["t"].data.partitions[tp.partition])
        if len(live) < size:
            return
        target = tuple(self.rng.sample(live, size))
        write_plan(self.tree, {tp: target})
        self.trace.append(f"reassign {tp} -> {list(target)}")
        self.controller_event(PartitionReassignment(self.tree.reassignment()))

    def cancel_reassignments(self) -> None:
        plan = self.tree.reassignment()
        if plan is None:
            return
        tps = tuple(TopicPartition(p.topic, p.partition) for p in plan.data.partitions)
        self.trace.append(f"cancel {[str(tp) for tp in tps]}")
        self.controller_event(CancelReassignment(tps))

    def assigned(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.tree.topics()["t"].data.partitions[tp.partition])

    def _crash(self, broker_id: int, lose_unflushed: bool) -> None:
        broker = self.brokers[broker_id]
        broker.leaders.clear()
        broker.following.clear()
        broker.leader_epochs.clear()
        broker.fence = ControllerEpochFence()
        for log in broker.logs.values():
            if lose_unflushed:
                log.truncate_to(log.flushed)

    def _recover(self, broker: SimBroker) -> None:
        for log in broker.logs.values():
            log.high_watermark = min(log.high_watermark_checkpoint, log.log_end_offset)
            if self.mode is Mode.HIGH_WATERMARK:
                log.truncate_to(log.high_watermark)  # REP-26 step 2

    def restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.alive = True
        broker.isolated = False
        self._recover(broker)
        register(self.tree, broker_id)
        self.trace.append(f"restart {broker_id}")
        self.controller_event(BrokerChange(self.tree.brokers()))

    def checkpoint_high_watermarks(self) -> None:
        for broker in self._live():
            for log in broker.logs.values():
                log.high_watermark_checkpoint = log.high_watermark

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def _live(self) -> list[SimBroker]:
        return [b for _, b in sorted(self.brokers.items()) if b.alive]

    # -- invariants -----------------------------------------------------------------------

    def lost_acknowledged(self) -> list[tuple[TopicPartition, int, int, int]]:
        """(tp, offset, value, broker) for every acked record missing from the leader or
        from a live ISR member."""
        lost = []
        for tp in self.tps:
            state = self.tree.partition_state(tp)
            if state is None:
                continue
            holders = {b for b in state.data.isr if self.brokers[b].alive}
            if state.data.leader >= 0 and self.brokers[state.data.leader].alive:
                holders.add(state.data.leader)
            for broker_id in sorted(holders):
                records = self.brokers[broker_id].logs[tp].records
                for offset, value in sorted(self.acked[tp].items()):
                    if offset >= len(records) or records[offset].value != value:
                        lost.append((tp, offset, value, broker_id))
        return lost

    def divergent_below_high_watermark(self) -> list[tuple[TopicPartition, int, int, int]]:
        """(tp, offset, broker_a, broker_b) where two live replicas differ below both HWs."""
        found = []
        live = self._live()
        for tp in self.tps:
            for i, a in enumerate(live):
                for b in live[i + 1 :]:
                    la, lb = a.logs[tp], b.logs[tp]
                    limit = min(la.high_watermark, lb.high_watermark)
                    for offset in range(limit):
                        if la.records[offset].value != lb.records[offset].value:
                            found.append((tp, offset, a.broker_id, b.broker_id))
                            break
        return found

    def check_invariants(self) -> None:
        for broker in self._live():
            for tp in self.tps:
                key = (broker.broker_id, tp)
                leader = broker.leaders.get(tp)
                if leader is None:
                    self.leader_high_watermarks.pop(key, None)
                    continue
                previous = self.leader_high_watermarks.get(key, -1)
                if leader.high_watermark < previous:
                    raise InvariantViolation(f"HW went back on leader {key}")
                self.leader_high_watermarks[key] = leader.high_watermark
        for broker in self.brokers.values():
            if not broker.alive:
                for tp in self.tps:
                    self.leader_high_watermarks.pop((broker.broker_id, tp), None)
        self._check_controller_cache()
        lost = self.lost_acknowledged()
        if lost:
            raise InvariantViolation(f"acknowledged writes lost: {lost[:3]}")
        diverged = self.divergent_below_high_watermark()
        if diverged:
            raise InvariantViolation(f"replicas diverged below HW: {diverged[:3]}")

    def _check_controller_cache(self) -> None:
        """The controller's context agrees with the tree it wrote (versions included), and
        it never attempted an illegal state transition."""
        controller = self.controller
        if controller is None or controller.context is None:
            return
        if controller.invalid_transitions:
            raise InvariantViolation(f"invalid transitions: {controller.invalid_transitions}")
        unannounced = {
            TopicPartition(p.topic, p.partition)
            for child in self.tree.children(ISR_CHANGE_NOTIFICATION_PATH)
            for p in self.tree.get(f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}").partitions
        }
        for tp in self.tps:
            versioned = self.tree.partition_state(tp)
            if versioned is not None and not set(versioned.data.isr) <= set(self.assigned(tp)):
                raise InvariantViolation(f"ISR of {tp} outside its replicas: {versioned.data}")
            cached = controller.context.leadership.get(tp)
            if versioned is None or cached is None or tp in unannounced:
                continue
            if (cached.zk_version, cached.data()) != (versioned.version, versioned.data):
                raise InvariantViolation(f"controller cache of {tp} is stale: {cached}")

    # -- the random walk ------------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        self.advance(rng.randrange(0, 700))
        roll = rng.random()
        live = [b.broker_id for b in self._live()]
        dead = [b for b in sorted(self.brokers) if b not in live]
        tp = rng.choice(self.tps)
        isolated = [b for b in live if self.brokers[b].isolated]
        if roll < 0.25:
            self.produce(tp)
        elif roll < 0.75:
            followers = [b for b in live if tp in self.brokers[b].following]
            rng.shuffle(followers)
            for follower in followers:
                self.fetch(follower, tp)
        elif roll < 0.765 and len(live) > 1:
            self.kill(rng.choice(live))
        elif roll < 0.80 and dead:
            self.restart(rng.choice(dead))
        elif roll < 0.815 and live:
            victim = self.brokers[rng.choice(live)]
            victim.isolated = True
            self.trace.append(f"isolate {victim.broker_id}")
        elif roll < 0.85 and isolated:
            self.brokers[isolated[0]].isolated = False
            self.trace.append(f"heal {isolated[0]}")
        elif roll < 0.865 and live:
            self.fast_restart(rng.choice(live))
        elif roll < 0.875 and len(live) > 1:
            self.controlled_shutdown(rng.choice(live))
        elif roll < 0.89:
            self.reassign()
        elif roll < 0.895:
            self.cancel_reassignments()
        elif roll < 0.90:
            self.controller_event(PreferredReplicaElection(tuple(self.tps), from_admin_path=False))
        elif roll < 0.905:
            self.controller_event(AutoPreferredReplicaLeaderElection(self.now_ms))
        elif roll < 0.93:
            self.advance(LAG_MS // 2)
        elif roll < 0.96:
            self.deliver_notifications()
        self.leader_checks()
        self.complete_produces()
        self.checkpoint_high_watermarks()
        if self.check:
            self.check_invariants()

    def heal_and_converge(self, rounds: int = 60) -> None:
        """Restart everything, reconnect everything, and let followers catch up."""
        self.notification_delay = False
        self.deliver_notifications()
        for broker in self.brokers.values():
            broker.isolated = False
        for broker_id in sorted(self.brokers):
            if not self.brokers[broker_id].alive:
                self.restart(broker_id)
        for _ in range(rounds):
            self.advance(100)
            for tp in self.tps:
                for broker in self._live():
                    if tp in broker.following:
                        self.fetch(broker.broker_id, tp)
            self.leader_checks()
            self.complete_produces()
            self.checkpoint_high_watermarks()
            if self.check:
                self.check_invariants()


def main() -> None:
    """Replay one seed and print its trace:
    `python -m tests.node.replication.sim --seed 391 --steps 800 [--hw] [--late]`."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--hw", action="store_true", help="high-watermark truncation (control)")
    parser.add_argument("--late", action="store_true", help="late ISR change notifications")
    args = parser.parse_args()
    cluster = SimCluster(
        (1, 2, 3, 4),
        {0: (1, 2, 3), 1: (2, 3, 4)},
        mode=Mode.HIGH_WATERMARK if args.hw else Mode.LEADER_EPOCH,
        min_insync_replicas=args.min_insync_replicas,
        rng=random.Random(args.seed),
        notification_delay=args.late,
    )
    try:
        for _ in range(args.steps):
            cluster.step()
        cluster.heal_and_converge()
    finally:
        print("\n".join(cluster.trace))


if __name__ == "__main__":
    main()
