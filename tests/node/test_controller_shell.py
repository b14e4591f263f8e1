"""The controller shell's pure parts: the controller's request dataclasses encoded as the
declared wire messages (LeaderAndIsr v4, UpdateMetadata v6, StopReplica v2) survive a round
trip through the codec with every field the brokers read; `TreeWatcher` re-reads only the
watched paths a fired watch touched (routed by `watch_routes`), over the quorum's real
`ZNodeTree` and `WatchManager`."""

from __future__ import annotations

from collections import Counter

import trio

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import (
    Create,
    Delete,
    Entry,
    ErrorResult,
    EventType,
    Multi,
    SetData,
    Stat,
    WatchEvent,
    WatchManager,
    ZNodeTree,
)
from trafka.net import codec
from trafka.node.controller.effects import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from trafka.node.controller.events import (
    BrokerChange,
    ControllerFailover,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElectionDefault,
)
from trafka.node.controller.machine import Controller, ControllerConfig
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller.service import ControllerService
from trafka.node.controller.tree_reads import read_snapshot
from trafka.node.controller.watch_routes import EVERYTHING, NOTHING, Dirty, PendingChanges
from trafka.node.controller.watcher import TreeWatcher
from trafka.node.controller.wire import encode_request
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)

BROKERS = (
    BrokerInfo(BrokerId(1), 100, None, ("PLAINTEXT://127.0.0.1:9092",)),
    BrokerInfo(BrokerId(2), 101, "r2", ("PLAINTEXT://[::1]:9093",)),
)


def _round_trip(request: object) -> object:
    wire = encode_request(request)
    api_key, version = int(wire.__api_key__), int(wire.__version__)
    return codec.decode_request(api_key, version, codec.encode_request(wire))


def test_leader_and_isr_round_trip() -> None:
    request = LeaderAndIsrRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(7),
        broker_epoch=101,
        partition_states=tuple(
            LeaderAndIsrPartitionState(
                tp=TopicPartition(topic, partition),
                controller_epoch=ControllerEpoch(7),
                leader=BrokerId(2),
                leader_epoch=LeaderEpoch(3),
                isr=(BrokerId(2), BrokerId(1)),
                zk_version=ZkVersion(5),
                replicas=(BrokerId(1), BrokerId(2)),
                is_new=partition == 1,
            )
            for topic in ("a", "b")
            for partition in (0, 1)
        ),
        live_leaders=BROKERS,
    )
    decoded = _round_trip(request)
    assert decoded.controller_id == 1 and decoded.controller_epoch == 7  # type: ignore[attr-defined]
    assert decoded.broker_epoch == 101  # type: ignore[attr-defined]
    topics = {t.topic_name: t for t in decoded.topic_states}  # type: ignore[attr-defined]
    assert sorted(topics) == ["a", "b"]
    states = topics["b"].partition_states
    assert [s.partition_index for s in states] == [0, 1]
    assert states[1].leader == 2 and states[1].leader_epoch == 3 and states[1].is_new
    assert tuple(states[1].isr) == (2, 1) and tuple(states[1].replicas) == (1, 2)
    assert states[0].zk_version == 5 and not states[0].is_new
    leaders = decoded.live_leaders  # type: ignore[attr-defined]
    assert [(b.broker_id, b.host_name, b.port) for b in leaders] == [
        (1, "127.0.0.1", 9092),
        (2, "::1", 9093),
    ]


def test_update_metadata_round_trip() -> None:
    request = UpdateMetadataRequest(
        controller_id=BrokerId(2),
        controller_epoch=ControllerEpoch(4),
        broker_epoch=-1,
        partition_states=(
            UpdateMetadataPartitionState(
                tp=TopicPartition("t", 0),
                controller_epoch=ControllerEpoch(4),
                leader=BrokerId(-2),
                leader_epoch=LeaderEpoch(9),
                isr=(BrokerId(1),),
                zk_version=ZkVersion(2),
                replicas=(BrokerId(1), BrokerId(2)),
                offline_replicas=(BrokerId(2),),
            ),
        ),
        live_brokers=BROKERS,
    )
    decoded = _round_trip(request)
    assert decoded.controller_epoch == 4  # type: ignore[attr-defined]
    (topic,) = decoded.topic_states  # type: ignore[attr-defined]
    (state,) = topic.partition_states
    assert topic.topic_name == "t" and state.leader == -2 and tuple(state.offline_replicas) == (2,)
    brokers = decoded.live_brokers  # type: ignore[attr-defined]
    assert [(b.id, b.rack, b.endpoints[0].host, b.endpoints[0].port) for b in brokers] == [
        (1, None, "127.0.0.1", 9092),
        (2, "r2", "::1", 9093),
    ]


def test_stop_replica_round_trip() -> None:
    request = StopReplicaRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(2),
        broker_epoch=55,
        delete_partitions=True,
        partitions=(TopicPartition("x", 2), TopicPartition("x", 0), TopicPartition("y", 1)),
    )
    decoded = _round_trip(request)
    assert decoded.delete_partitions is True  # type: ignore[attr-defined]
    wanted = {(t.name, tuple(t.partition_indexes)) for t in decoded.topics}  # type: ignore[attr-defined]
    assert wanted == {("x", (2, 0)), ("y", (1,))}


# ---- TreeWatcher: routed re-reads over the quorum's real ZNodeTree and WatchManager ---------


class LocalReplica:
    """The local-read surface of `MetadataQuorum` (get/exists/children_local with one-shot
    watches) over a real `ZNodeTree` and `WatchManager`, counting reads per path."""

    def __init__(self) -> None:
        self.tree = ZNodeTree()
        self.watches = WatchManager()
        self.reads: Counter[str] = Counter()

    def get_local(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        self.reads[path] += 1
        found = self.tree.get(path)
        if watch:
            self.watches.add_data_watch(path)
        return found

    def exists_local(self, path: str, *, watch: bool = False) -> Stat | None:
        self.reads[path] += 1
        if watch:
            self.watches.add_data_watch(path)
        return self.tree.exists(path)

    def children_local(self, path: str, *, watch: bool = False) -> list[str]:
        self.reads[path] += 1
        names = self.tree.children(path)
        if watch:
            self.watches.add_child_watch(path)
        return names

    def apply(self, *ops: Create | Delete | SetData) -> list[WatchEvent]:
        op = ops[0] if len(ops) == 1 else Multi(tuple(ops))
        applied = self.tree.apply(Entry("", 0, 0, op))
        assert not isinstance(applied.result, ErrorResult), applied.result
        return self.watches.trigger(applied.zxid, applied.changes)


def _assignment(*replicas: int) -> bytes:
    return znodes.TopicAssignment({0: tuple(replicas)}).to_json()


def _replica(topic_count: int) -> LocalReplica:
    replica = LocalReplica()
    for path in ("/brokers", znodes.BROKER_IDS, znodes.BROKER_TOPICS, "/admin"):
        replica.apply(Create(path))
    replica.apply(Create(znodes.ISR_CHANGE_NOTIFICATION))
    replica.apply(
        *(Create(znodes.topic_path(f"t{n}"), _assignment(1, 2)) for n in range(topic_count))
    )
    return replica


def _routed(replica: LocalReplica, fired: list[WatchEvent]) -> Dirty:
    pending = PendingChanges()
    for event in fired:
        pending.mark_path(event.path)
    return pending.take()


def test_one_changed_topic_costs_one_topic_read() -> None:
    replica = _replica(topic_count=200)
    watcher = TreeWatcher(replica)
    first = watcher.changes(EVERYTHING)
    assert {BrokerChange, TopicChange} <= {type(e) for e in first}
    replica.reads.clear()

    fired = replica.apply(SetData(znodes.topic_path("t7"), _assignment(1, 2, 3)))
    assert [e.path for e in fired] == [znodes.topic_path("t7")]
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], PartitionModifications)
    assert events[0].topic == "t7" and events[0].assignment.data.partitions == {0: (1, 2, 3)}
    # the topic list and the one topic: not 200 topics, nothing else
    assert replica.reads == Counter({znodes.BROKER_TOPICS: 1, znodes.topic_path("t7"): 1})
    # and the watch is armed again
    again = replica.apply(SetData(znodes.topic_path("t7"), _assignment(3)))
    assert [e.path for e in again] == [znodes.topic_path("t7")]


def test_created_and_deleted_topics() -> None:
    replica = _replica(topic_count=50)
    watcher = TreeWatcher(replica)
    watcher.changes(EVERYTHING)
    replica.reads.clear()

    fired = replica.apply(Create(znodes.topic_path("new"), _assignment(2)))
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], TopicChange)
    assert "new" in events[0].topics and len(events[0].topics) == 51
    # the topic list, the new topic and its configs (written before it, never notified)
    assert replica.reads == Counter(
        {
            znodes.BROKER_TOPICS: 1,
            znodes.topic_path("new"): 1,
            znodes.topic_config_path("new"): 1,
        }
    )

    fired = replica.apply(Delete(znodes.topic_path("t3")))
    assert {e.path for e in fired} == {znodes.topic_path("t3"), znodes.BROKER_TOPICS}
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], TopicChange)
    assert "t3" not in events[0].topics and len(events[0].topics) == 50


def test_full_reread_without_changes_parses_nothing_again() -> None:
    replica = _replica(topic_count=20)
    watcher = TreeWatcher(replica)
    watcher.changes(EVERYTHING)
    before = dict(watcher.seen.topics or {})
    assert watcher.changes(EVERYTHING) == []
    after = watcher.seen.topics or {}
    assert all(after[name] is before[name] for name in before)  # same parsed objects
    assert watcher.changes(NOTHING) == []


def test_admin_paths_brokers_and_isr_changes_are_routed() -> None:
    replica = _replica(topic_count=3)
    watcher = TreeWatcher(replica)
    watcher.changes(EVERYTHING)

    registration = znodes.BrokerRegistration(
        1, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9092),), 0
    )
    fired = replica.apply(Create(znodes.broker_path(1), registration.to_json()))
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], BrokerChange)
    assert [b.broker_id for b in events[0].brokers] == [1]

    plan = znodes.ReassignPartitions((znodes.PartitionReassignment("t0", 0, (2, 3)),))
    fired = replica.apply(Create(znodes.REASSIGN_PARTITIONS, plan.to_json()))
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], PartitionReassignment)
    assert events[0].plan is not None and events[0].plan.data == plan

    state = znodes.PartitionState(leader=2, leader_epoch=4, isr=(2, 3), controller_epoch=1)
    notification = znodes.IsrChangeNotification((znodes.TopicPartition("t0", 0),))
    fired = replica.apply(
        Create(znodes.partitions_path("t0")),
        Create(znodes.partition_path("t0", 0)),
        Create(znodes.partition_state_path("t0", 0), state.to_json()),
        Create(
            f"{znodes.ISR_CHANGE_NOTIFICATION}/{znodes.ISR_CHANGE_PREFIX}",
            notification.to_json(),
            sequential=True,
        ),
    )
    events = watcher.changes(_routed(replica, fired))
    assert len(events) == 1 and isinstance(events[0], IsrChangeNotification)
    assert events[0].states[TopicPartition("t0", 0)].data == state

    fired = replica.apply(Create(znodes.DELETE_TOPICS), Create(znodes.delete_topic_path("t1")))
    events = watcher.changes(_routed(replica, fired))
    assert [type(e) for e in events] == [TopicDeletion] and events[0].topics == ("t1",)


async def test_service_rereads_only_what_its_watch_events_name(nursery: trio.Nursery) -> None:
    replica = _replica(topic_count=100)
    service = ControllerService(node_id=1, store=replica, config=ControllerConfig())
    service._nursery = nursery
    service.wake()  # no event (a caller that does not pass it): every watched path
    assert any(isinstance(e, TopicChange) for e in service._changes())
    replica.reads.clear()

    for event in replica.apply(SetData(znodes.topic_path("t5"), _assignment(4))):
        service.wake(event)
    events = service._changes()
    assert [type(e) for e in events] == [PartitionModifications]
    assert replica.reads == Counter({znodes.BROKER_TOPICS: 1, znodes.topic_path("t5"): 1})
    # once events carry their path, an idle poll reads nothing
    replica.reads.clear()
    assert service._changes() == [] and not replica.reads
    # another component's watch on the same node (a partition state: the controller learns of
    # ISR changes through /isr_change_notification) wakes the controller but costs no read
    state_path = znodes.partition_state_path("t5", 0)
    service.wake(WatchEvent(EventType.NODE_DATA_CHANGED, state_path, replica.tree.last_zxid))
    assert service._changes() == [] and not replica.reads


# ---- topic configs: read with a new topic, re-read when the node's listener names them ---------

UNCLEAN_ON = {"unclean.leader.election.enable": "true"}


def _config(configs: dict[str, str]) -> bytes:
    return znodes.EntityConfig(configs).to_json()


def test_a_new_topic_brings_its_configs() -> None:
    replica = _replica(topic_count=2)
    replica.apply(Create("/config"), Create(znodes.CONFIG_TOPICS))
    watcher = TreeWatcher(replica)
    watcher.changes(EVERYTHING)
    fired = replica.apply(
        Create(znodes.topic_config_path("lax"), _config(UNCLEAN_ON)),
        Create(znodes.topic_path("lax"), _assignment(1, 2)),
    )
    events = watcher.changes(_routed(replica, fired))
    assert [type(e) for e in events] == [TopicChange, TopicConfigChange]
    assert events[1] == TopicConfigChange("lax", UNCLEAN_ON)


def test_named_topic_configs_are_reread_and_fed_when_changed() -> None:
    replica = _replica(topic_count=3)
    replica.apply(Create("/config"), Create(znodes.CONFIG_TOPICS))
    watcher = TreeWatcher(replica)
    watcher.changes(EVERYTHING)
    replica.reads.clear()
    replica.apply(Create(znodes.topic_config_path("t1"), _config(UNCLEAN_ON)))
    assert watcher.config_changes(["t1", "unknown"]) == [TopicConfigChange("t1", UNCLEAN_ON)]
    assert replica.reads == Counter({znodes.topic_config_path("t1"): 1})  # known topics only
    assert watcher.config_changes(["t1"]) == []  # unchanged: nothing fed twice
    replica.apply(SetData(znodes.topic_config_path("t1"), _config({})))
    replica.apply(Create(znodes.topic_config_path("t2"), _config(UNCLEAN_ON)))
    assert watcher.config_changes(None) == [
        TopicConfigChange("t1", {}),
        TopicConfigChange("t2", UNCLEAN_ON),
    ]


async def test_service_feeds_config_changes_the_node_reports(nursery: trio.Nursery) -> None:
    replica = _replica(topic_count=3)
    replica.apply(Create("/config"), Create(znodes.CONFIG_TOPICS))
    service = ControllerService(node_id=1, store=replica, config=ControllerConfig())
    service._nursery = nursery
    service.wake()
    service._changes()
    replica.apply(Create(znodes.topic_config_path("t0"), _config(UNCLEAN_ON)))
    service.topic_configs_changed(["t0"])
    assert service._changes() == [TopicConfigChange("t0", UNCLEAN_ON)]
    assert service._changes() == []  # taken once
    # The broker default: kept for the next term while this node is not the controller...
    service.unclean_default_changed(True)
    assert service.config.unclean_leader_election_enable
    assert service._receive_events.statistics().current_buffer_used == 0
    # ... and fed to the controller while it is one (an unchanged value is not).
    service.controller = Controller(BrokerId(1), service.config)
    service.controller.handle(ControllerFailover(read_snapshot(replica), 0))
    service.unclean_default_changed(True)
    service.unclean_default_changed(False)
    assert service._receive_events.receive_nowait() == UncleanLeaderElectionDefault(False)
    assert service._receive_events.statistics().current_buffer_used == 0
