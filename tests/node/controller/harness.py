"""An in-memory znode tree that executes `ControllerStep.writes` as ZooKeeper's multi would,
and a driver that feeds a `Controller` and honours the shell contract of `effects.py`.

A fake with the tree's semantics (versions, all-or-nothing multi, parents, recursive
delete, sequential children), not a mock: tests assert on the resulting tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trafka.metadata_quorum import znodes
from trafka.node.controller.effects import (
    CheckVersion,
    ControllerStep,
    CreateNode,
    DeleteNode,
    SetNode,
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
from trafka.node.replication.ids import BrokerId, TopicPartition, ZkVersion


class MultiFailed(Exception):
    pass


@dataclass
class FakeTree:
    nodes: dict[str, tuple[Any, int]] = field(default_factory=dict)
    zxid: int = 0
    sequence: int = 0

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :]
            for p in self.nodes
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )

    def get(self, path: str) -> Any:
        return self.nodes[path][0]

    def version(self, path: str) -> int:
        return self.nodes[path][1]

    def exists(self, path: str) -> bool:
        return path in self.nodes

    def create(self, path: str, data: Any) -> int:
        """Create with parents; returns the creation zxid (a broker epoch)."""
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if parent not in self.nodes:
                self.nodes[parent] = (None, 0)
        if path in self.nodes:
            raise MultiFailed(f"exists: {path}")
        self.zxid += 1
        self.nodes[path] = (data, 0)
        return self.zxid

    def create_sequential(self, parent: str, prefix: str, data: Any) -> str:
        name = f"{prefix}{self.sequence:010d}"
        self.sequence += 1
        self.create(f"{parent}/{name}", data)
        return name

    def set(self, path: str, data: Any, expected_version: int) -> int:
        if path not in self.nodes:
            raise MultiFailed(f"no node: {path}")
        _, version = self.nodes[path]
        if expected_version != -1 and expected_version != version:
            raise MultiFailed(f"bad version {path}: {version} != {expected_version}")
        self.nodes[path] = (data, version + 1)
        return version + 1

    def delete(self, path: str, recursive: bool = False) -> None:
        if path not in self.nodes:
            raise MultiFailed(f"no node: {path}")
        below = [p for p in self.nodes if p.startswith(path + "/")]
        if below and not recursive:
            raise MultiFailed(f"not empty: {path}")
        for p in [*below, path]:
            del self.nodes[p]

    def multi(self, ops: tuple[ZnodeOp, ...]) -> bool:
        saved = (dict(self.nodes), self.zxid, self.sequence)
        try:
            for op in ops:
                self._apply(op)
        except MultiFailed:
            self.nodes, self.zxid, self.sequence = saved
            return False
        return True

    def _apply(self, op: ZnodeOp) -> None:
        if isinstance(op, CheckVersion):
            if op.path not in self.nodes or self.version(op.path) != op.expected_version:
                raise MultiFailed(f"check failed: {op.path}")
        elif isinstance(op, CreateNode) and op.sequential:
            parent, prefix = op.path.rsplit("/", 1)
            self.create_sequential(parent, prefix, op.data)
        elif isinstance(op, CreateNode):
            self.create(op.path, op.data)
        elif isinstance(op, SetNode):
            self.set(op.path, op.data, op.expected_version)
        elif isinstance(op, DeleteNode):
            if op.if_exists and op.path not in self.nodes:
                return
            self.delete(op.path, op.recursive)

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
) -> FakeTree:
    tree = TREE_CLASS()
    if with_epoch:
        tree.create(CONTROLLER_EPOCH_PATH, znodes.ControllerEpoch(0))
    for broker in brokers:
        register(tree, broker, racks)
    return tree


def register(tree: FakeTree, broker: int, racks: dict[int, str] | None = None) -> BrokerInfo:
    path = f"{BROKER_IDS_PATH}/{broker}"
    epoch = tree.zxid + 1
    info = BrokerInfo(
        BrokerId(broker),
        epoch,
        (racks or {}).get(broker),
        (f"PLAINTEXT://127.0.0.1:{9090 + broker}",),
    )
    tree.create(path, info)
    return info


def unregister(tree: FakeTree, broker: int) -> None:
    tree.delete(f"{BROKER_IDS_PATH}/{broker}")


def create_topic(tree: FakeTree, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    data = znodes.TopicAssignment({p: tuple(rs) for p, rs in assignment.items()})
    tree.create(topic_path(topic), data)


def set_topic_config(tree: FakeTree, topic: str, configs: dict[str, str]) -> None:
    """What a broker's (Incremental)AlterConfigs writes: `/config/topics/<topic>`."""
    data = znodes.EntityConfig(dict(configs))
    if tree.exists(topic_config_path(topic)):
        tree.set(topic_config_path(topic), data, -1)
    else:
        tree.create(topic_config_path(topic), data)


def request_deletion(tree: FakeTree, topic: str) -> None:
    tree.create(delete_topic_path(topic), None)


def write_plan(tree: FakeTree, plan: dict[TopicPartition, tuple[int, ...]]) -> None:
    data = reassignment_plan({tp: tuple(BrokerId(b) for b in rs) for tp, rs in plan.items()})
    if tree.exists(REASSIGN_PARTITIONS_PATH):
        tree.set(REASSIGN_PARTITIONS_PATH, data, -1)
    else:
        tree.create(REASSIGN_PARTITIONS_PATH, data)


def write_preferred(tree: FakeTree, tps: tuple[TopicPartition, ...]) -> None:
    tree.create(
        PREFERRED_REPLICA_ELECTION_PATH, znodes.PreferredReplicaElection(to_znode_partitions(tps))
    )


@dataclass
class Driver:
    """Feeds events to a controller the way the shell will (effects.py contract)."""

    tree: FakeTree
    controller: Controller
    steps: list[ControllerStep] = field(default_factory=list)
    failed_multis: int = 0

    @classmethod
    def elect(
        cls, tree: FakeTree, broker: int, config: ControllerConfig | None = None, now_ms: int = 0
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


def leader_changes_isr(tree: FakeTree, tp: TopicPartition, isr: tuple[int, ...]) -> Any:
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


class RealTree(FakeTree):
    """The same interface over the quorum's real `ZNodeTree` (bytes, Kafka's JSON), so the
    flow tests double as a contract test of the controller's writes against the real
    multi semantics and codecs (STYLE 7). Writes go through `tree_ops.to_multi_ops`."""

    def __init__(self) -> None:
        super().__init__()
        from trafka.metadata_quorum.tree import ZNodeTree

        self.real = ZNodeTree()

    def _submit(self, op: Any) -> Any:
        from trafka.metadata_quorum.tree import Entry

        return self.real.apply(Entry("", 0, 0, op)).result

    def exists(self, path: str) -> bool:
        return self.real.exists(path) is not None

    def children(self, path: str) -> list[str]:
        return sorted(self.real.children(path)) if self.exists(path) else []

    def version(self, path: str) -> int:
        return self.real.get(path)[1].version

    def get(self, path: str) -> Any:
        data, stat = self.real.get(path)
        return _decode(path, data, stat.czxid)

    def create(self, path: str, data: Any) -> int:
        if isinstance(data, BrokerInfo):
            data = _registration(data)
        if not self.multi((CreateNode(path, data),)):
            raise MultiFailed(f"create {path}")
        return self.real.get(path)[1].czxid

    def create_sequential(self, parent: str, prefix: str, data: Any) -> str:
        from trafka.metadata_quorum.tree import Create
        from trafka.node.controller.tree_ops import encode

        result = self._submit(Create(f"{parent}/{prefix}", encode(data), sequential=True))
        return str(result.path).rsplit("/", 1)[1]

    def set(self, path: str, data: Any, expected_version: int) -> int:
        from trafka.metadata_quorum.tree import SetData, SetDataResult
        from trafka.node.controller.tree_ops import encode

        result = self._submit(SetData(path, encode(data), expected_version))
        if not isinstance(result, SetDataResult):
            raise MultiFailed(f"set {path}: {result}")
        return result.stat.version

    def delete(self, path: str, recursive: bool = False) -> None:
        if not self.multi((DeleteNode(path, recursive=recursive),)):
            raise MultiFailed(f"delete {path}")

    def multi(self, ops: tuple[ZnodeOp, ...]) -> bool:
        from trafka.metadata_quorum.tree import Multi
        from trafka.node.controller.tree_ops import to_multi_ops

        result = self._submit(Multi(to_multi_ops(ops, self.real)))
        return getattr(result, "error_index", 0) == -1


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


TREE_CLASS: type[FakeTree] = FakeTree
"""Which tree `new_tree` builds; the flow tests run once with each."""
