"""The controller simulations' tree: the quorum's real `ZNodeTree` behind `LocalTransport`
(see `RealTree`), and a driver that feeds a `Controller` and honours the shell contract of
`effects.py`. Tests assert on the resulting tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.config import QuorumConfig, Voter
from trafka.metadata_quorum.local import LocalTransport
from trafka.metadata_quorum.tree import (
    Create,
    CreateResult,
    Entry,
    Multi,
    MultiResult,
    Operation,
    Result,
    SetData,
    SetDataResult,
    ZNodeTree,
)
from trafka.node.controller.effects import (
    ControllerStep,
    CreateNode,
    DeleteNode,
    ZnodeOp,
)
from trafka.node.controller.events import ControllerEvent, ControllerFailover, WritesFailed
from trafka.node.controller.machine import Controller, ControllerConfig
from trafka.node.controller.payloads import (
    BROKER_IDS_PATH,
    CONFIG_TOPICS_PATH,
    CONTROLLER_EPOCH_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerInfo,
    TreeSnapshot,
    Versioned,
    delete_topic_path,
    partition_state_path,
    reassignment_plan,
    to_znode_partitions,
    topic_config_path,
    topic_path,
)
from trafka.node.controller.tree_ops import encode, to_multi_ops
from trafka.node.replication.ids import BrokerId, TopicPartition, ZkVersion

T = TypeVar("T")


class MultiFailed(Exception):
    pass


class RealTree:
    """The tree the controller simulations run on: the quorum's real `ZNodeTree` behind the
    in-memory `LocalTransport` (every write is an `Entry` proposed and applied as on a node,
    bytes and Kafka's JSON, real multi semantics), so the flow tests double as a contract test
    of the controller's writes (STYLE 7). Controller writes go through `tree_ops.to_multi_ops`.
    Synchronous: `LocalTransport` applies each proposal at once."""

    def __init__(self) -> None:
        config = QuorumConfig(
            1, (Voter(1, "127.0.0.1", 0),), Path("/nonexistent"), "", gil_switch_interval_s=None
        )
        self.transport = LocalTransport(config, lambda _entry, _applied: None)

    def _submit(self, op: Operation) -> Result:
        answers: list[Result | None] = []
        self.transport.propose(Entry("", 0, 0, op), lambda result, _failure: answers.append(result))
        (answer,) = answers
        assert answer is not None
        return answer

    def _read(self, reader: Callable[[ZNodeTree], T]) -> T:
        return self.transport.read(reader)

    def exists(self, path: str) -> bool:
        return self._read(lambda tree: tree.exists(path)) is not None

    def children(self, path: str) -> list[str]:
        return sorted(self._read(lambda tree: tree.children(path))) if self.exists(path) else []

    def version(self, path: str) -> int:
        return self._read(lambda tree: tree.get(path))[1].version

    def get(self, path: str) -> Any:
        data, stat = self._read(lambda tree: tree.get(path))
        return _decode(path, data, stat.czxid)

    def create(self, path: str, data: Any) -> int:
        """Create with parents; returns the creation zxid (a broker epoch)."""
        if isinstance(data, BrokerInfo):
            data = _registration(data)
        if not self.multi((CreateNode(path, data),)):
            raise MultiFailed(f"create {path}")
        return self._read(lambda tree: tree.get(path))[1].czxid

    def create_sequential(self, parent: str, prefix: str, data: Any) -> str:
        """`<parent>/<prefix><10 digits>` (the parent created first if missing, as a node's
        ISR writer does at start)."""
        if not self.exists(parent):
            self.create(parent, None)
        result = self._submit(Create(f"{parent}/{prefix}", encode(data), sequential=True))
        assert isinstance(result, CreateResult), result
        return str(result.path).rsplit("/", 1)[1]

    def set(self, path: str, data: Any, expected_version: int) -> int:
        result = self._submit(SetData(path, encode(data), expected_version))
        if not isinstance(result, SetDataResult):
            raise MultiFailed(f"set {path}: {result}")
        return result.stat.version

    def delete(self, path: str, recursive: bool = False) -> None:
        if not self.multi((DeleteNode(path, recursive=recursive),)):
            raise MultiFailed(f"delete {path}")

    def multi(self, ops: tuple[ZnodeOp, ...]) -> bool:
        multi_ops = self._read(lambda tree: to_multi_ops(ops, tree))
        result = self._submit(Multi(multi_ops))
        return isinstance(result, MultiResult) and result.error_index == -1

    # -- what a shell reads ---------------------------------------------------------------

    def brokers(self) -> tuple[BrokerInfo, ...]:
        return tuple(self.get(f"{BROKER_IDS_PATH}/{c}") for c in self.children(BROKER_IDS_PATH))

    def topics(self) -> dict[str, Versioned[znodes.TopicAssignment]]:
        return {
            t: Versioned(self.get(topic_path(t)), ZkVersion(self.version(topic_path(t))))
            for t in self.children(TOPICS_PATH)
        }

    def partition_state(self, tp: TopicPartition) -> Versioned[znodes.PartitionState] | None:
        path = partition_state_path(tp)
        if not self.exists(path):
            return None
        return Versioned(self.get(path), ZkVersion(self.version(path)))

    def reassignment(self) -> Versioned[znodes.ReassignPartitions] | None:
        if not self.exists(REASSIGN_PARTITIONS_PATH):
            return None
        return Versioned(
            self.get(REASSIGN_PARTITIONS_PATH), ZkVersion(self.version(REASSIGN_PARTITIONS_PATH))
        )

    def snapshot(self) -> TreeSnapshot:
        states = {}
        for topic, versioned in self.topics().items():
            for partition in versioned.data.partitions:
                tp = TopicPartition(topic, partition)
                state = self.partition_state(tp)
                if state is not None:
                    states[tp] = state
        preferred = (
            self.get(PREFERRED_REPLICA_ELECTION_PATH)
            if self.exists(PREFERRED_REPLICA_ELECTION_PATH)
            else None
        )
        return TreeSnapshot(
            controller_epoch=(
                Versioned(
                    self.get(CONTROLLER_EPOCH_PATH),
                    ZkVersion(self.version(CONTROLLER_EPOCH_PATH)),
                )
                if self.exists(CONTROLLER_EPOCH_PATH)
                else None
            ),
            brokers=self.brokers(),
            topics=self.topics(),
            partition_states=states,
            reassignment=self.reassignment(),
            preferred_election=preferred,
            topics_to_delete=tuple(self.children(DELETE_TOPICS_PATH)),
            isr_change_notifications=tuple(self.children(ISR_CHANGE_NOTIFICATION_PATH)),
            topic_configs=self.topic_configs(),
        )

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """What the shell reads: every topic's `/config/topics/<t>` overrides."""
        return {
            t: dict(self.get(topic_config_path(t)).config)
            for t in self.children(CONFIG_TOPICS_PATH)
            if t in self.children(TOPICS_PATH)
        }


def new_tree(
    *brokers: int, racks: dict[int, str] | None = None, with_epoch: bool = True
) -> RealTree:
    tree = TREE_CLASS()
    if with_epoch:
        tree.create(CONTROLLER_EPOCH_PATH, znodes.ControllerEpoch(0))
    for broker in brokers:
        register(tree, broker, racks)
    return tree


def register(tree: RealTree, broker: int, racks: dict[int, str] | None = None) -> BrokerInfo:
    path = f"{BROKER_IDS_PATH}/{broker}"
    info = BrokerInfo(
        BrokerId(broker),
        0,
        (racks or {}).get(broker),
        (f"PLAINTEXT://127.0.0.1:{9090 + broker}",),
    )
    epoch = tree.create(path, info)
    return replace(info, broker_epoch=epoch)


def unregister(tree: RealTree, broker: int) -> None:
    tree.delete(f"{BROKER_IDS_PATH}/{broker}")


def create_topic(tree: RealTree, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    data = znodes.TopicAssignment({p: tuple(rs) for p, rs in assignment.items()})
    tree.create(topic_path(topic), data)


def set_topic_config(tree: RealTree, topic: str, configs: dict[str, str]) -> None:
    """What a broker's (Incremental)AlterConfigs writes: `/config/topics/<topic>`."""
    data = znodes.EntityConfig(dict(configs))
    if tree.exists(topic_config_path(topic)):
        tree.set(topic_config_path(topic), data, -1)
    else:
        tree.create(topic_config_path(topic), data)


def request_deletion(tree: RealTree, topic: str) -> None:
    tree.create(delete_topic_path(topic), None)


def write_plan(tree: RealTree, plan: dict[TopicPartition, tuple[int, ...]]) -> None:
    data = reassignment_plan({tp: tuple(BrokerId(b) for b in rs) for tp, rs in plan.items()})
    if tree.exists(REASSIGN_PARTITIONS_PATH):
        tree.set(REASSIGN_PARTITIONS_PATH, data, -1)
    else:
        tree.create(REASSIGN_PARTITIONS_PATH, data)


def write_preferred(tree: RealTree, tps: tuple[TopicPartition, ...]) -> None:
    tree.create(
        PREFERRED_REPLICA_ELECTION_PATH, znodes.PreferredReplicaElection(to_znode_partitions(tps))
    )


@dataclass
class Driver:
    """Feeds events to a controller the way the shell will (effects.py contract)."""

    tree: RealTree
    controller: Controller
    steps: list[ControllerStep] = field(default_factory=list)
    failed_multis: int = 0

    @classmethod
    def elect(
        cls, tree: RealTree, broker: int, config: ControllerConfig | None = None, now_ms: int = 0
    ) -> Driver:
        driver = cls(tree, Controller(BrokerId(broker), config))
        driver.run(ControllerFailover(tree.snapshot(), now_ms))
        return driver

    def run(self, event: ControllerEvent, max_retries: int = 5) -> ControllerStep:
        step = self.controller.handle(event)
        for _ in range(max_retries):
            self.steps.append(step)
            if not step.writes or self.tree.multi(step.writes):
                return step
            self.failed_multis += 1
            step = self.controller.handle(WritesFailed(self.tree.snapshot()))
        raise AssertionError("controller could not commit its writes")

    def state(self, tp: TopicPartition) -> znodes.PartitionState:
        versioned = self.tree.partition_state(tp)
        assert versioned is not None
        return versioned.data


def leader_changes_isr(tree: RealTree, tp: TopicPartition, isr: tuple[int, ...]) -> Any:
    """What a partition leader does on ISR expand/shrink: a conditional write of the state
    (same leader and epoch) plus a sequential notification child; returns the event the
    shell would then build."""
    from trafka.node.controller.events import IsrChangeNotification

    current = tree.partition_state(tp)
    assert current is not None
    data = znodes.PartitionState(
        current.data.leader, current.data.leader_epoch, tuple(isr), current.data.controller_epoch
    )
    tree.set(partition_state_path(tp), data, current.version)
    child = tree.create_sequential(
        ISR_CHANGE_NOTIFICATION_PATH,
        "isr_change_",
        znodes.IsrChangeNotification(to_znode_partitions((tp,))),
    )
    state = tree.partition_state(tp)
    assert state is not None
    return IsrChangeNotification((child,), {tp: state})


def _registration(info: BrokerInfo) -> znodes.BrokerRegistration:
    host_port = info.endpoints[0].split("://", 1)[1]
    host, port = host_port.rsplit(":", 1)
    return znodes.BrokerRegistration(
        broker_id=int(info.broker_id),
        endpoints=(znodes.Endpoint("PLAINTEXT", host, int(port)),),
        timestamp_ms=0,
        rack=info.rack,
    )


def _decode(path: str, data: bytes, czxid: int) -> Any:
    if path == CONTROLLER_EPOCH_PATH:
        return znodes.ControllerEpoch.from_json(data)
    if path.startswith(BROKER_IDS_PATH + "/"):
        broker_id = int(path.rsplit("/", 1)[1])
        registration = znodes.BrokerRegistration.from_json(data, broker_id)
        return BrokerInfo.from_registration(registration, czxid)
    if path.startswith(TOPICS_PATH + "/") and path.count("/") == 3:
        return znodes.TopicAssignment.from_json(data)
    if path.startswith(TOPICS_PATH + "/") and path.endswith("/state"):
        return znodes.PartitionState.from_json(data)
    if path == REASSIGN_PARTITIONS_PATH:
        return znodes.ReassignPartitions.from_json(data)
    if path == PREFERRED_REPLICA_ELECTION_PATH:
        return znodes.PreferredReplicaElection.from_json(data)
    if path.startswith(ISR_CHANGE_NOTIFICATION_PATH + "/"):
        return znodes.IsrChangeNotification.from_json(data)
    if path.startswith(CONFIG_TOPICS_PATH + "/"):
        return znodes.EntityConfig.from_json(data)
    return None


TREE_CLASS: type[RealTree] = RealTree
"""Which tree `new_tree` builds; the flow tests run once with each."""
