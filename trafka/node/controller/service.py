"""The controller's shell: election, tree-change detection, multis, the broker channels.

The pure controller (`trafka.node.controller.machine.Controller`, docs/controller.md) decides;
this module performs, following its contract (`trafka.node.controller.effects`):

* **Election** (CTL-03, ZK-05): every node tries to create the ephemeral `/controller`
  (`{"version":1,"brokerid":N,"timestamp":..}`); the winner reads a `TreeSnapshot` and feeds
  `ControllerFailover`, whose first write is the conditional bump of `/controller_epoch`
  (KR-04). When `/controller` disappears (the winner's quorum session expired or it stopped),
  every node races again; a node whose `/controller` is gone or not its own feeds
  `ControllerResign`.
* **Events, one at a time** (CTL-10): one task owns the `Controller`. Watches are one-shot
  (KR-06: "re-read after the notification"). `wake(event)` routes each fired watch to the
  watched path it touched (`trafka.node.controller.watch_routes`), and `TreeWatcher` re-reads
  and re-arms only those paths, feeding an event for every path whose contents changed:
  `BrokerChange` (children of `/brokers/ids`, with each registration's czxid as broker
  epoch), `TopicChange` / `PartitionModifications` (`/brokers/topics`, one topic's data per
  changed topic, parsed again only when its mzxid moved), `TopicDeletion`
  (`/admin/delete_topics`), `PartitionReassignment` (`/admin/reassign_partitions`),
  `PreferredReplicaElection` (`/admin/preferred_replica_election`), `IsrChangeNotification`
  (`/isr_change_notification`). A change costs the re-read of the paths it touched. Every
  watched path is re-read at a new term, on a `SessionEvent` (events lost), every
  `FULL_REREAD_INTERVAL_S` as a safety net, and on every tick (at least every
  `POLL_INTERVAL_S`) while the node's wake-ups carry no event (`wake()` without one).
  Events from requests (ControlledShutdown, StopReplica answers, ElectLeaders) and timers
  arrive on a bounded channel and are handled between polls.
* **Configs** (Kafka's TopicConfigHandler -> `enableTopicUncleanLeaderElection`, the dynamic
  broker config -> `enableDefaultUncleanLeaderElection`): the controller does not watch
  `/config`; the node's config change listener (`trafka.node.config_changes`) tells it which
  topics a notification (or a full re-read) named (`topic_configs_changed`), and the shell
  re-reads those `/config/topics/<t>` and feeds `TopicConfigChange` for each that changed; a
  new topic's configs are read with the topic. The node's effective broker default arrives
  through `unclean_default_changed` (`UncleanLeaderElectionDefault`).
* **Writes**: `step.writes` -> `tree_ops.to_multis` -> the quorum's `multi`, in order; a failed
  multi feeds `WritesFailed(fresh snapshot)` before anything else.
* **Requests** (CTL-11, D8): one `BrokerChannel` per live broker: a bounded queue and one task
  with one `KafkaConnection`, sending LeaderAndIsr v4, UpdateMetadata v6, StopReplica v2, each
  carrying the controller id and epoch. A request that cannot be delivered is retried on a
  new connection while the broker stays registered (a lost request only delays: brokers also
  re-learn on the next request).

Not implemented: routing below a topic (partition states are learned through
`/isr_change_notification`, CTL-40); controller-side bounds on repeatedly conflicting
multis beyond `MAX_CONSECUTIVE_FAILED_STEPS` (then the controller resigns and the election
runs again).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import trio

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import WatchEvent, ZooKeeperError
from trafka.metrics.registry import NodeMetrics
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.controller import tree_ops, watch_routes
from trafka.node.controller.channel import BrokerChannel, ChannelFactory, ControllerChannel
from trafka.node.controller.effects import ControlledShutdownAnswer, ControllerStep
from trafka.node.controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControllerEvent,
    ControllerFailover,
    ControllerResign,
    UncleanLeaderElectionDefault,
    WritesFailed,
)
from trafka.node.controller.machine import Controller, ControllerConfig
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller.tree_reads import (
    ClientTreeView,
    controller_id_in_tree,
    get_node,
    read_snapshot,
)
from trafka.node.controller.watch_routes import PendingChanges
from trafka.node.controller.watcher import TreeWatcher
from trafka.node.metadata_store import MetadataStore
from trafka.node.replication.ids import BrokerId
from trafka.node.security.inter_broker import InterBrokerClient

log = logging.getLogger("trafka.node.controller")

POLL_INTERVAL_S = 0.1
FULL_REREAD_INTERVAL_S = 5.0
EVENT_QUEUE_MAX = 1_000
MAX_CONSECUTIVE_FAILED_STEPS = 20


@dataclass(frozen=True, slots=True)
class _Reply:
    """An event whose step goes back to a waiting request handler (ElectLeaders, cancel)."""

    event: ControllerEvent
    reply: trio.MemorySendChannel[ControllerStep]


def controller_config_of(config: BrokerConfig) -> ControllerConfig:
    """The controller's settings from the node's (effective) broker config."""
    return ControllerConfig(
        unclean_leader_election_enable=config.get_bool("unclean.leader.election.enable"),
        auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_per_broker_percentage=config.get_int(
            "leader.imbalance.per.broker.percentage"
        ),
        leader_imbalance_check_interval_seconds=config.get_int(
            "leader.imbalance.check.interval.seconds"
        ),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
    )


class ControllerService:
    """Runs the controller on this node when it wins `/controller` (see module docstring)."""

    def __init__(
        self,
        *,
        node_id: int,
        store: MetadataStore,
        config: ControllerConfig,
        clock: Clock = SYSTEM_CLOCK,
        channel_factory: ChannelFactory | None = None,
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self.node_id = node_id
        #: How to reach brokers: the inter-broker listener and its security (issue 12, 14).
        self.inter_broker = inter_broker or InterBrokerClient()
        self.store = store
        self._clock = clock
        self.config = config
        self.controller: Controller | None = None
        self.channels: dict[BrokerId, ControllerChannel] = {}
        self._channel_factory: ChannelFactory = channel_factory or functools.partial(
            BrokerChannel, inter_broker=self.inter_broker
        )
        self.watcher = TreeWatcher(store)
        self.metrics = NodeMetrics()
        """Leader elections are counted here (the node's registry, `trafka.metrics`)."""
        self._pending = PendingChanges()
        self._routed = False
        self._last_full_reread_s = 0.0
        self._send_events, self._receive_events = trio.open_memory_channel[
            ControllerEvent | _Reply
        ](EVENT_QUEUE_MAX)
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._timer_scopes: list[trio.CancelScope] = []
        self._failed_steps = 0
        self.pending_answers: dict[
            BrokerId, list[trio.MemorySendChannel[ControlledShutdownAnswer]]
        ] = {}
        self._config_topics: set[str] | None = set()
        """Topics whose configs to re-read on the next tick; None: all of them."""

    # ---- inputs from the rest of the node -----------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.controller is not None and self.controller.is_active

    @property
    def epoch(self) -> int:
        if self.controller is None or self.controller.epoch is None:
            return -1
        return int(self.controller.epoch)

    def _active(self) -> bool:
        return self.is_active

    def submit(self, event: ControllerEvent) -> None:
        """Queue an event from a request handler, a channel or a timer."""
        try:
            self._send_events.send_nowait(event)
        except trio.WouldBlock:
            log.warning("controller event queue full: %s dropped", type(event).__name__)
        self._wake.set()

    async def run_event(
        self, event: ControllerEvent, timeout_s: float = 30.0
    ) -> ControllerStep | None:
        """Feed `event` and return its step (after its writes committed); None if this node
        is not (or stops being) the controller or the step does not come in time."""
        if not self.is_active:
            return None
        send, receive = trio.open_memory_channel[ControllerStep](1)
        try:
            self._send_events.send_nowait(_Reply(event, send))
        except trio.WouldBlock:
            return None
        self._wake.set()
        with trio.move_on_after(timeout_s):
            try:
                return await receive.receive()
            except trio.EndOfChannel:
                return None
        return None

    def topic_configs_changed(self, topics: Iterable[str] | None) -> None:
        """The node applied a config change of `topics` (None: a full re-read of every
        entity): re-read their `/config/topics/<t>` soon (Kafka's TopicConfigHandler ->
        `enableTopicUncleanLeaderElection`)."""
        if topics is None:
            self._config_topics = None
        elif self._config_topics is not None:
            self._config_topics.update(topics)
            if len(self._config_topics) > watch_routes.MAX_DIRTY_TOPICS:
                self._config_topics = None
        self._wake.set()

    def unclean_default_changed(self, enabled: bool) -> None:
        """The node's effective `unclean.leader.election.enable` (its dynamic broker config
        or the cluster default changed): the default of every topic without an override."""
        if enabled == self.config.unclean_leader_election_enable:
            return
        self.config = replace(self.config, unclean_leader_election_enable=enabled)
        if self.is_active:  # otherwise the next term's Controller starts with it
            self.submit(UncleanLeaderElectionDefault(enabled))

    def wake(self, event: object | None = None) -> None:
        """A quorum event (`WatchEvent`/`SessionEvent`) for this node: re-read what it
        touched, soon. Without an event (a caller that does not pass it), re-read every
        watched path, as on a lost event stream."""
        if isinstance(event, WatchEvent):
            self._routed = True
            self._pending.mark_path(event.path)
        else:
            self._pending.mark_everything()
        self._wake.set()

    # ---- the one controller task --------------------------------------------------------------
    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                while True:
                    try:
                        await self._tick()
                    except Exception:
                        log.exception("controller tick failed")
                        await self._resign()
                    with trio.move_on_after(POLL_INTERVAL_S):
                        await self._wake.wait()
                    self._wake = trio.Event()
            finally:
                await self._resign_quietly()
                nursery.cancel_scope.cancel()

    async def _tick(self) -> None:
        holder = controller_id_in_tree(self.store)
        if self.is_active and holder != self.node_id:
            log.info("node %d: /controller is %d now: resigning", self.node_id, holder)
            await self._resign()
        if holder == -1:
            await self._elect()
            return
        if not self.is_active:
            get_node(self.store, znodes.CONTROLLER, watch=True)
            return
        while True:
            try:
                event = self._receive_events.receive_nowait()
            except trio.WouldBlock:
                break
            if isinstance(event, _Reply):
                with event.reply:
                    step = await self._process(event.event)
                    if step is not None:
                        event.reply.send_nowait(step)
            else:
                await self._process(event)
            if not self._active():
                return
        for change in self._changes():
            await self._process(change)
            if not self._active():
                return

    def _changes(self) -> list[ControllerEvent]:
        """Re-read what the routed watches touched (everything on every poll while watch
        events arrive without their path; everything every `FULL_REREAD_INTERVAL_S`
        otherwise, as a safety net)."""
        now_s = trio.current_time()
        if not self._routed or now_s - self._last_full_reread_s >= FULL_REREAD_INTERVAL_S:
            self._pending.mark_everything()
        dirty = self._pending.take()
        if dirty.everything:
            self._last_full_reread_s = now_s
        events = [] if dirty.empty else self.watcher.changes(dirty)
        if any(isinstance(event, BrokerChange) for event in events):
            assert self.watcher.seen.brokers is not None
            self._sync_channels(self.watcher.seen.brokers)
        config_topics, self._config_topics = self._config_topics, set()
        if config_topics is None or config_topics:
            events.extend(self.watcher.config_changes(config_topics))
        return events

    async def _elect(self) -> None:
        registration = znodes.ControllerRegistration(self.node_id, self._clock.now_ms())
        try:
            await self.store.create(znodes.CONTROLLER, registration.to_json(), ephemeral=True)
        except ZooKeeperError:
            return  # somebody else won (or the quorum is unavailable): try again later
        await self.store.sync()
        self.controller = Controller(BrokerId(self.node_id), self.config)
        self.watcher.reset()
        self._pending.mark_everything()  # arm every watch of the new term
        # Drain stale events of a previous term.
        while True:
            try:
                self._receive_events.receive_nowait()
            except trio.WouldBlock:
                break
        self._config_topics = set()  # the snapshot reads every topic's configs
        snapshot = read_snapshot(self.store)
        self.watcher.remember(snapshot)
        self._sync_channels(snapshot.brokers)
        await self._process(ControllerFailover(snapshot, self._clock.now_ms()))
        if self.is_active:
            log.info("node %d is the controller, epoch %d", self.node_id, self.epoch)

    async def _process(self, event: ControllerEvent) -> ControllerStep | None:
        controller = self.controller
        if controller is None:
            return None
        started_s = time.perf_counter()
        step = controller.handle(event)
        while True:
            if await self._execute_writes(step):
                self._failed_steps = 0
                break
            self._failed_steps += 1
            if self._failed_steps > MAX_CONSECUTIVE_FAILED_STEPS:
                log.warning("controller: %d failed steps in a row: resigning", self._failed_steps)
                await self._resign()
                return None
            snapshot = read_snapshot(self.store)
            step = controller.handle(WritesFailed(snapshot))
        self._perform(step)
        if step.elections:
            took_ms = (time.perf_counter() - started_s) * 1000
            for report in step.elections:  # LeaderElectionRateAndTimeMs, UncleanLeaderElections
                self.metrics.leader_elected(unclean=report.unclean, took_ms=took_ms)
        if step.resigned or not controller.is_active:
            await self._resign()
        return step

    async def _execute_writes(self, step: ControllerStep) -> bool:
        if not step.writes:
            return True
        try:
            multis = tree_ops.to_multis(step.writes, ClientTreeView(self.store))
            for ops in multis:
                await self.store.multi(list(ops))
        except (ZooKeeperError, tree_ops.MultiTooLarge) as error:
            log.info("controller multi failed: %s", error)
            await self.store.sync()
            return False
        return True

    def _perform(self, step: ControllerStep) -> None:
        for send in step.requests:
            channel = self.channels.get(send.broker_id)
            if channel is not None:
                channel.enqueue(send.request)
        for timer in step.timers:
            self._arm_timer(timer.at_ms)
        for answer in step.answers:
            for waiter in self.pending_answers.pop(answer.broker_id, []):
                try:
                    waiter.send_nowait(answer)
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
        if step.elections:
            unclean = [r for r in step.elections if r.unclean]
            log.info(
                "controller %d: %d leader elections (%s%s)",
                self.node_id,
                len(step.elections),
                ", ".join(
                    f"{r.tp.topic}-{r.tp.partition}->{r.leader}@{r.leader_epoch}"
                    for r in step.elections[:5]
                ),
                ", ..." if len(step.elections) > 5 else "",
            )
            for report in unclean:
                log.warning(
                    "UNCLEAN leader election: %s-%d leader %d epoch %d",
                    report.tp.topic,
                    report.tp.partition,
                    report.leader,
                    report.leader_epoch,
                )

    def _arm_timer(self, at_ms: int) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._timer_scopes.append(scope)

        async def fire() -> None:
            with scope:
                await trio.sleep(max(0.0, (at_ms - self._clock.now_ms()) / 1000))
                self.submit(AutoPreferredReplicaLeaderElection(self._clock.now_ms()))

        self._nursery.start_soon(fire)

    def _sync_channels(self, brokers: tuple[BrokerInfo, ...]) -> None:
        assert self._nursery is not None
        wanted = {b.broker_id: b for b in brokers}
        for broker_id in list(self.channels):
            channel = self.channels[broker_id]
            if broker_id not in wanted or wanted[broker_id] != channel.info:
                channel.cancel_scope.cancel()
                del self.channels[broker_id]
        for broker_id, info in wanted.items():
            if broker_id not in self.channels:
                channel = self._channel_factory(self.node_id, info, self.submit)
                self.channels[broker_id] = channel
                self._nursery.start_soon(channel.run)

    async def _resign(self) -> None:
        controller = self.controller
        if controller is not None and controller.is_active:
            controller.handle(ControllerResign())
        self.controller = None
        for channel in self.channels.values():
            channel.cancel_scope.cancel()
        self.channels.clear()
        for scope in self._timer_scopes:
            scope.cancel()
        self._timer_scopes.clear()
        self.watcher.reset()
        for waiters in self.pending_answers.values():
            for waiter in waiters:
                waiter.close()
        self.pending_answers.clear()
        # If /controller is still ours (e.g. too many failed steps), give it up.
        if controller_id_in_tree(self.store) == self.node_id:
            try:
                await self.store.delete(znodes.CONTROLLER)
            except ZooKeeperError:
                pass

    async def _resign_quietly(self) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(2):
                try:
                    await self._resign()
                except Exception:
                    log.exception("controller resign failed")
