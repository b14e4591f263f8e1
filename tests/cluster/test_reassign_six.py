"""Reassignment OAR {1,2,3} -> RAR {4,5,6} on six real knode processes (issue 5, Must show 5).

The partition's znodes are read straight from one node's replica of the metadata tree
(TrafkaDescribeZNodes, API 10000, without the quorum barrier: the local replica applies the
committed log in order, so what one node shows over time is a subsequence of the tree's
history) every few milliseconds while the reassignment runs: `/brokers/topics/<t>` (AR,
`adding_replicas`, `removing_replicas`), `.../partitions/0/state` (leader, ISR, leader epoch,
controller epoch), `/admin/reassign_partitions` and `/controller_epoch`.

Each observed state is placed on the seeds' table (CTL-34):

    rank  AR in the tree        leader / ISR                     seeds' step
    0     {1,2,3}               1 / {1,2,3}                      initial
    1     {1,2,3,4,5,6}         1 / not yet all of RAR           2 (leader epoch forced + 1)
    2     {1,2,3,4,5,6}         1 / {1,2,3,4,5,6}                4
    3     {1,2,3,4,5,6}         4 / {1,2,3,4,5,6}                7
    4     {1,2,3,4,5,6}         4 / {4,5,6}                      8
    5     {4,5,6}               4 / {4,5,6}, plan node gone      10, 11

Sampling may miss states (and our controller commits steps 5-11 in one multi, so ranks 3 and
4 are never committed on their own), so the test asserts what must hold: every state fits a
row, the rank never goes back, the expansion and the end are seen, the leader epoch never
decreases and moves at step 2 and at the leader change. Then: the OAR brokers deleted their
partition directories, RAR's logs are byte-identical and hold every produced message, and a
consumer reads every message back.

The second test SIGKILLs the controller right after the expansion is observed. The killed
node must be in OAR for the reassignment to be able to finish without it (all six brokers
are in OAR + RAR); only the voters 1-3 can be the controller, so OAR is {1,2,3}. Another
voter becomes controller with epoch + 1, resumes the reassignment from the tree (CTL-44) and
completes it: the final state carries the new controller epoch. The killed node is then
restarted and rejoins; its StopReplica(delete) was never delivered, so it deletes its
partition directory itself at start-up as a stray log (KAFKA-14616, docs/controller.md) and
keeps every other directory.

Both tests share one six-node cluster (module fixture) laid out as a KRaft cluster usually
is: nodes 1-3 are quorum voters (broker,controller), nodes 4-6 broker-only quorum learners.
RAR {4,5,6} is therefore led and replicated by broker-only nodes only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_partition_reassignments.v0 import request as alter
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.log.batch import iter_headers
from trafka.log.records import decode_batch
from trafka.metadata_quorum import znodes
from trafka.net.client import KafkaConnection
from trafka.net.messages.describe_znodes import DescribeZNodesRequestV0

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2500",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=5000",
    "replica.fetch.wait.max.ms=200",
    # small follower fetches: the new replicas take a while to catch up, so the
    # expanded state lasts and the controller can be killed in it
    "replica.fetch.max.bytes=131072",
    "auto.leader.rebalance.enable=false",
    "offsets.topic.replication.factor=1",
    "offsets.topic.num.partitions=1",
]
MESSAGES = 6_000
VALUE_BYTES = 1_000
NO_NODE = -101


def _value(number: int) -> bytes:
    return f"{number:08d}".encode().ljust(VALUE_BYTES, b".")


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base: Path = tmp_path_factory.mktemp("six")
    with KnodeCluster(base, node_count=6, voter_count=3, settings=SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 6,
            timeout_s=60,
            what="six registered brokers",
        )
        try:
            yield cluster
        finally:
            # SIGKILL: six controlled shutdowns at once only cost time here
            for node_id in cluster.nodes:
                cluster.kill(node_id)


# ---- reading the tree ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observed:
    """One state of the partition as one node's replica of the tree showed it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    state_controller_epoch: int
    in_plan: bool
    plan_node: bool
    controller_epoch: int
    seen_at_s: float = field(default=0.0, compare=False)

    def describe(self, origin_s: float | None = None) -> str:
        return (
            f"AR={list(self.replicas)} adding={list(self.adding)} removing={list(self.removing)}"
            f" leader={self.leader} isr={sorted(self.isr)} leader_epoch={self.leader_epoch}"
            f" state.controller_epoch={self.state_controller_epoch}"
            f" plan={'yes' if self.in_plan else ('other' if self.plan_node else 'no')}"
            + ("" if origin_s is None else f" (+{self.seen_at_s - origin_s:.2f} s)")
        )


async def _read(connection: KafkaConnection, topic: str) -> Observed | None:
    paths = (
        znodes.topic_path(topic),
        znodes.partition_state_path(topic, 0),
        znodes.REASSIGN_PARTITIONS,
        znodes.CONTROLLER_EPOCH,
    )
    response = await connection.request(
        DescribeZNodesRequestV0(paths=paths, include_data=True, sync=False)
    )
    assert int(response.error_code) == 0, response
    found = {str(e.path): bytes(e.data or b"") for e in response.entries if int(e.error_code) == 0}
    if paths[0] not in found or paths[1] not in found:
        return None
    assignment = znodes.TopicAssignment.from_json(found[paths[0]])
    state = znodes.PartitionState.from_json(found[paths[1]])
    in_plan = False
    if paths[2] in found and found[paths[2]]:
        plan = znodes.ReassignPartitions.from_json(found[paths[2]])
        in_plan = any(p.topic == topic and p.partition == 0 for p in plan.partitions)
    return Observed(
        replicas=assignment.partitions[0],
        adding=assignment.adding_replicas.get(0, ()),
        removing=assignment.removing_replicas.get(0, ()),
        leader=state.leader,
        isr=state.isr,
        leader_epoch=state.leader_epoch,
        state_controller_epoch=state.controller_epoch,
        in_plan=in_plan,
        plan_node=paths[2] in found,
        controller_epoch=znodes.ControllerEpoch.from_json(found[paths[3]]).epoch,
        seen_at_s=time.monotonic(),
    )


class Recorder:
    """Polls one node's tree and keeps every distinct state, in the order seen."""

    def __init__(self, cluster: KnodeCluster, node_id: int, topic: str) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.topic = topic
        self.states: list[Observed] = []
        self.changed = trio.Event()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        connection = await KafkaConnection.connect(
            "127.0.0.1", self.cluster.nodes[self.node_id].port, client_id="observer"
        )
        try:
            first = await _read(connection, self.topic)
            assert first is not None
            self.states.append(first)
            task_status.started()
            while True:
                observed = await _read(connection, self.topic)
                if observed is not None and observed != self.states[-1]:
                    self.states.append(observed)
                    self.changed.set()
                    self.changed = trio.Event()
                await trio.sleep(0.005)
        finally:
            await connection.close()

    async def wait_for(
        self, predicate: Callable[[Observed], bool], timeout_s: float, what: str
    ) -> Observed:
        with trio.move_on_after(timeout_s):
            while True:
                for observed in self.states:
                    if predicate(observed):
                        return observed
                await self.changed.wait()
        raise AssertionError(f"timed out waiting for {what}:\n{self.history()}")

    def history(self) -> str:
        origin_s = self.states[0].seen_at_s if self.states else 0.0
        return "\n".join(observed.describe(origin_s) for observed in self.states)


def _rank(observed: Observed, oar: tuple[int, ...], rar: tuple[int, ...]) -> int:
    """The row of the seeds' table (CTL-34) this state belongs to; AssertionError if none."""
    ar, isr = observed.replicas, set(observed.isr)
    expanded = (*oar, *(r for r in rar if r not in oar))
    assert isr <= set(ar), f"ISR outside AR: {observed.describe()}"
    if ar == oar:
        assert not observed.adding and not observed.removing, observed.describe()
        assert observed.leader in oar, observed.describe()
        return 0
    if ar == expanded:
        # step 1: AR = OAR + RAR with Kafka's adding/removing replicas (KIP-455)
        assert observed.adding == rar and observed.removing == oar, observed.describe()
        if observed.leader in rar:
            return 4 if isr == set(rar) else 3
        assert observed.leader in (*oar, -1), observed.describe()
        return 2 if set(rar) <= isr else 1
    assert ar == rar, f"AR neither OAR, OAR+RAR nor RAR: {observed.describe()}"
    assert not observed.adding and not observed.removing, observed.describe()
    assert observed.leader in rar and isr == set(rar), observed.describe()
    assert not observed.in_plan and not observed.plan_node, observed.describe()  # step 11
    return 5


def _check_sequence(states: list[Observed], oar: tuple[int, ...], rar: tuple[int, ...]) -> None:
    history = "\n".join(s.describe() for s in states)
    ranks = [_rank(s, oar, rar) for s in states]
    assert ranks[0] == 0 and ranks[-1] == 5, history
    assert ranks == sorted(ranks), f"the table went backwards {ranks}:\n{history}"
    assert 1 in ranks or 2 in ranks, f"the expansion was not seen:\n{history}"
    epochs = [s.leader_epoch for s in states]
    assert epochs == sorted(epochs), f"leader epoch went back:\n{history}"
    # step 2: the expansion forces a leader epoch bump
    initial = states[ranks.index(0)]
    first_expanded = states[next(i for i, r in enumerate(ranks) if r >= 1)]
    assert first_expanded.leader_epoch > initial.leader_epoch, history
    # step 7: the leader moves into RAR with a new leader epoch
    last_old_leader = [s for s in states if s.leader in oar][-1]
    first_new_leader = next(s for s in states if s.leader in rar)
    assert first_new_leader.leader_epoch > last_old_leader.leader_epoch, history
    assert states[-1].leader == rar[0], history  # the first live RAR replica in the ISR
    expanded = [s for s, r in zip(states, ranks, strict=True) if 1 <= r <= 4]
    assert all(s.in_plan for s in expanded), f"plan removed before the end:\n{history}"


# ---- data ------------------------------------------------------------------------------------


def _produce(cluster: KnodeCluster, topic: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    for number in range(MESSAGES):
        while True:
            try:
                producer.produce(topic, _value(number), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def _consume(cluster: KnodeCluster, topic: str) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        numbers: list[int] = []
        deadline = time.monotonic() + 60
        while len(numbers) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            assert isinstance(value, bytes)
            numbers.append(int(value[:8]))
        return numbers
    finally:
        consumer.close()


def _log_records(cluster: KnodeCluster, node_id: int, topic: str) -> list[bytes]:
    """Every record value in the broker's log dir for partition 0, read from its segments."""
    directory = cluster.nodes[node_id].data_dir / f"{topic}-0"
    values: list[bytes] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for position, _ in iter_headers(data):
            values.extend(r.value or b"" for r in decode_batch(data, position).records)
    return values


def _partition_dirs(cluster: KnodeCluster, topic: str) -> set[int]:
    return {
        node_id
        for node_id, node in cluster.nodes.items()
        if (node.data_dir / f"{topic}-0").exists()
    }


def _dir_names(cluster: KnodeCluster, node_id: int) -> set[str]:
    """The partition directories (and the quorum's) in a node's log dir."""
    return {p.name for p in cluster.nodes[node_id].data_dir.iterdir() if p.is_dir()}


def _check_data(cluster: KnodeCluster, topic: str, rar: tuple[int, ...]) -> None:
    expected = [_value(n) for n in range(MESSAGES)]

    def every_new_replica_holds_it() -> bool:
        return all(_log_records(cluster, r, topic) == expected for r in rar)

    wait_until(every_new_replica_holds_it, timeout_s=30, what=f"{topic} in RAR's log dirs")
    assert _consume(cluster, topic) == list(range(MESSAGES))


# ---- driving ---------------------------------------------------------------------------------


def _create(cluster: KnodeCluster, topic: str, replicas: tuple[int, ...]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[list(replicas)])]
    )
    futures[topic].result(30)
    wait_until(
        lambda: (
            admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader == replicas[0]
        ),
        timeout_s=30,
        what=f"{topic} led by {replicas[0]}",
    )


def _execute(cluster: KnodeCluster, plan_path: Path, topic: str, rar: tuple[int, ...]) -> None:
    plan_path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": list(rar)}]}
        )
    )
    address = ",".join(cluster.address(n) for n, node in cluster.nodes.items() if node.running)
    executed = subprocess.run(
        [
            sys.executable,
            "-m",
            "trafka.tools.ktool",
            "reassign",
            "execute",
            "--reassignment-json-file",
            str(plan_path),
            "--bootstrap-server",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert executed.returncode == 0, executed.stdout + executed.stderr
    assert f"Successfully started partition reassignment(s) for {topic}-0" in executed.stdout


async def _alter(cluster: KnodeCluster, controller: int, topic: str, rar: tuple[int, ...]) -> None:
    """AlterPartitionReassignments (key 45) straight to the controller: answered once the plan
    is in `/admin/reassign_partitions`, so nothing is in flight when the controller dies."""
    connection = await KafkaConnection.connect(
        "127.0.0.1", cluster.nodes[controller].port, client_id="reassign"
    )
    try:
        response = await connection.request(
            alter.AlterPartitionReassignmentsRequest(
                topics=(
                    alter.ReassignableTopic(
                        name=TopicName(topic),
                        partitions=(
                            alter.ReassignablePartition(
                                partition_index=i32(0),
                                replicas=tuple(BrokerId(r) for r in rar),
                            ),
                        ),
                    ),
                )
            )
        )
    finally:
        await connection.close()
    assert int(response.error_code) == 0, response
    (answer,) = (p for t in response.responses for p in t.partitions)
    assert int(answer.error_code) == 0, response


async def _controller(cluster: KnodeCluster, node_id: int) -> tuple[int, int]:
    """(/controller's broker id, /controller_epoch) as node `node_id` sees them."""
    connection = await KafkaConnection.connect(
        "127.0.0.1", cluster.nodes[node_id].port, client_id="observer"
    )
    try:
        response = await connection.request(
            DescribeZNodesRequestV0(
                paths=(znodes.CONTROLLER, znodes.CONTROLLER_EPOCH), include_data=True, sync=True
            )
        )
    finally:
        await connection.close()
    data = {str(e.path): bytes(e.data or b"") for e in response.entries if int(e.error_code) == 0}
    controller = -1
    if znodes.CONTROLLER in data:
        controller = znodes.ControllerRegistration.from_json(data[znodes.CONTROLLER]).broker_id
    return controller, znodes.ControllerEpoch.from_json(data[znodes.CONTROLLER_EPOCH]).epoch


# ---- the tests -------------------------------------------------------------------------------


async def test_reassignment_follows_the_seeds_table(six: KnodeCluster, tmp_path: Path) -> None:
    topic, oar, rar = "moving", (1, 2, 3), (4, 5, 6)
    await trio.to_thread.run_sync(_create, six, topic, oar)
    await trio.to_thread.run_sync(_produce, six, topic)
    recorder = Recorder(six, rar[-1], topic)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        await trio.to_thread.run_sync(_execute, six, tmp_path / "plan.json", topic, rar)
        await recorder.wait_for(lambda s: s.replicas == rar, 60, "AR = RAR")
        nursery.cancel_scope.cancel()
    _check_sequence(recorder.states, oar, rar)
    wait_until(
        lambda: _partition_dirs(six, topic) == set(rar),
        timeout_s=30,
        what=f"OAR's {topic}-0 directories deleted",
    )
    await trio.to_thread.run_sync(_check_data, six, topic, rar)
    print(f"\nobserved ({len(recorder.states)} states):\n{recorder.history()}")


async def test_reassignment_completes_after_the_controller_is_killed(
    six: KnodeCluster, tmp_path: Path
) -> None:
    controller, epoch = await _controller(six, 1)
    # The killed controller must be in OAR (see the module docstring): a voter.
    oar, rar = (1, 2, 3), (4, 5, 6)
    assert controller in oar, f"broker-only node {controller} is the controller"
    topic = "failover"
    await trio.to_thread.run_sync(_create, six, topic, oar)
    await trio.to_thread.run_sync(_produce, six, topic)
    recorder = Recorder(six, rar[-1], topic)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        await _alter(six, controller, topic, rar)
        expanded = await recorder.wait_for(
            lambda s: s.replicas != oar, 60, "AR extended to OAR + RAR"
        )
        six.kill(controller)
        killed_at = len(recorder.states)
        assert _rank(expanded, oar, rar) in (1, 2), recorder.history()
        done = await recorder.wait_for(lambda s: s.replicas == rar, 60, "AR = RAR")
        nursery.cancel_scope.cancel()
    history = recorder.history()
    _check_sequence(recorder.states, oar, rar)
    # The new controller finished it: epoch + 1, and the last steps carry its epoch.
    new_controller, new_epoch = await _controller(six, rar[-1])
    assert new_controller not in (controller, -1) and new_epoch == epoch + 1, history
    assert done.controller_epoch == epoch + 1 and done.state_controller_epoch == epoch + 1, history
    assert all(s.controller_epoch == epoch for s in recorder.states[:killed_at]), history
    wait_until(
        lambda: _partition_dirs(six, topic) - {controller} == set(rar),
        timeout_s=30,
        what=f"the live OAR brokers' {topic}-0 directories deleted",
    )
    await trio.to_thread.run_sync(_check_data, six, topic, rar)

    # The killed node comes back as an ordinary broker and deletes its stray failover-0 (its
    # StopReplica(delete) could not be delivered) at start-up, keeping everything else.
    assert controller in _partition_dirs(six, topic)
    kept = {name for name in _dir_names(six, controller) if name != f"{topic}-0"}
    await trio.to_thread.run_sync(six.start, controller)
    admin = AdminClient({"bootstrap.servers": six.address(rar[0])})
    wait_until(
        lambda: controller in admin.list_topics(timeout=5).brokers,
        timeout_s=60,
        what=f"broker {controller} registered again",
    )
    assert (await _controller(six, rar[-1])) == (new_controller, new_epoch)
    wait_until(
        lambda: _partition_dirs(six, topic) == set(rar),
        timeout_s=60,
        what=f"the restarted broker {controller} deleted its stray {topic}-0",
    )
    # The stray is renamed `<dir>.<uuid>-delete` at once and removed by a background thread.
    wait_until(
        lambda: _dir_names(six, controller) == kept,
        timeout_s=30,
        what=f"broker {controller}'s renamed {topic}-0 removed, everything else kept",
    )
    print(f"\nkilled controller {controller} (epoch {epoch}) after state {killed_at}:\n{history}")
