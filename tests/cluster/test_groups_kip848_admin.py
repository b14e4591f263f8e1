"""KIP-848 administration with real clients on a 2-node cluster (issue 18): per-group dynamic
configs through Kafka 4.4's `kafka-configs --entity-type groups` and raw requests, and
online migration between the classic and consumer protocols
(`group.consumer.migration.policy`).

One cluster and one tool JVM for the module; every test uses its own group ids.
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.cluster.java_support import TOOLS, ToolShell, java_command, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.net import codec
from trafka.net.client import KafkaConnection
from trafka.net.kio_shape import build

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

FIND_COORDINATOR, INCREMENTAL_ALTER_CONFIGS, CONSUMER_GROUP_HEARTBEAT = 10, 44, 68
DESCRIBE_CONFIGS = 32
GROUP_RESOURCE = 32
OFFSETS_PARTITIONS = 4
SETTINGS = [
    "group.initial.rebalance.delay.ms=0",
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    "offsets.topic.replication.factor=2",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
]


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("kip848-admin")
    with KnodeCluster(base, node_count=2, settings=SETTINGS, start=False) as c:
        start_slowly(c)
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("mig", 6, 2)])["mig"].result(60)
        yield c


def request(cluster: KnodeCluster, node_id: int, api_key: int, data: Any, high: int) -> Any:
    async def run() -> Any:
        connection = await KafkaConnection.connect(
            "127.0.0.1", cluster.nodes[node_id].port, client_id="kip848-admin"
        )
        try:
            await connection.negotiate_api_versions()
            version = connection.version_for(api_key, 0, high)
            request_class = codec.request_class(api_key, version)
            assert request_class is not None
            return await connection.request(build(request_class, data), version)
        finally:
            await connection.close()

    return trio.run(run)


def coordinator_of(cluster: KnodeCluster, group_id: str) -> int:
    def found() -> int | None:
        response = request(
            cluster,
            1,
            FIND_COORDINATOR,
            {"key_type": 0, "coordinator_keys": [group_id]},
            4,
        )
        (coordinator,) = response.coordinators
        return int(coordinator.node_id) if coordinator.error_code == ErrorCode.none else None

    return wait_until(found, timeout_s=60, what=f"the coordinator of {group_id}")


def join(cluster: KnodeCluster, node_id: int, group_id: str) -> Any:
    return request(
        cluster,
        node_id,
        CONSUMER_GROUP_HEARTBEAT,
        {
            "group_id": group_id,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": ["mig"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
        1,
    )


def alter_group(
    cluster: KnodeCluster, node_id: int, group_id: str, configs: dict[str, str | None]
) -> Any:
    (result,) = request(
        cluster,
        node_id,
        INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group_id,
                    "configs": [
                        {"name": k, "config_operation": 0 if v is not None else 1, "value": v}
                        for k, v in configs.items()
                    ],
                }
            ],
            "validate_only": False,
        },
        1,
    ).responses
    return result


def group_on(cluster: KnodeCluster, coordinator: int) -> str:
    """A group id whose coordinator is `coordinator` (the partition's leader)."""
    for index in range(10_000):
        group_id = f"cfg-{index}"
        if coordinator_of(cluster, group_id) == coordinator:
            return group_id
    raise AssertionError("no group id for that coordinator")


# ---- per-group configs --------------------------------------------------------------------------
def test_group_configs_reach_the_coordinator_of_another_broker(cluster: KnodeCluster) -> None:
    """Altered through the node that does not coordinate the group: the change notification
    brings it to the coordinator, whose next heartbeat answer carries the new interval."""
    group_id = group_on(cluster, 2)
    before = join(cluster, 2, group_id)
    assert before.error_code == ErrorCode.none and before.heartbeat_interval.total_seconds() == 1
    result = alter_group(
        cluster,
        1,
        group_id,
        {"consumer.heartbeat.interval.ms": "4000", "consumer.session.timeout.ms": "50000"},
    )
    assert result.error_code == ErrorCode.none, result.error_message
    wait_until(
        lambda: join(cluster, 2, group_id).heartbeat_interval.total_seconds() == 4,
        timeout_s=30,
        what="the coordinator applying the group's heartbeat interval",
    )
    refused = alter_group(cluster, 2, group_id, {"consumer.session.timeout.ms": "61000"})
    assert refused.error_code == ErrorCode.invalid_config
    assert refused.error_message == (
        "consumer.session.timeout.ms must be less than or equal to "
        "group.consumer.max.session.timeout.ms"
    )
    unknown = alter_group(cluster, 2, group_id, {"session.timeout.ms": "50000"})
    assert unknown.error_code == ErrorCode.invalid_config
    assert unknown.error_message == "Unknown group config name: session.timeout.ms"
    too_long = alter_group(cluster, 2, "g" * 2000, {"consumer.session.timeout.ms": "50000"})
    assert too_long.error_code == ErrorCode.invalid_request
    deleted = alter_group(cluster, 2, group_id, {"consumer.heartbeat.interval.ms": None})
    assert deleted.error_code == ErrorCode.none
    wait_until(
        lambda: join(cluster, 2, group_id).heartbeat_interval.total_seconds() == 1,
        timeout_s=30,
        what="the broker's heartbeat interval back",
    )


def test_kafka_configs_entity_type_groups(shell: ToolShell, cluster: KnodeCluster) -> None:
    def tool(*args: str) -> Any:
        return shell.run("kafka-configs", "--bootstrap-server", cluster.bootstrap_servers, *args)

    added = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--add-config",
        "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=2000",
    )
    assert added.exit == 0, added.err
    assert added.lines == ["Completed updating config for group tool-group."]
    described = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group")
    assert described.exit == 0, described.err
    assert described.lines == [
        "Dynamic configs for group tool-group are:",
        "  consumer.heartbeat.interval.ms=2000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=2000, "
        "STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=1000}",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    ]
    every = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group", "--all")
    assert every.exit == 0, every.err
    assert "All configs for group tool-group are:" in every.lines
    listed = tool("--describe", "--entity-type", "groups")
    assert "Dynamic configs for group tool-group are:" in listed.lines
    too_small = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--add-config",
        "consumer.heartbeat.interval.ms=500",
    )
    assert too_small.exit != 0
    assert (
        "consumer.heartbeat.interval.ms must be greater than or equal to "
        "group.consumer.min.heartbeat.interval.ms" in too_small.out + too_small.err
    )
    removed = tool(
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "tool-group",
        "--delete-config",
        "consumer.session.timeout.ms,consumer.heartbeat.interval.ms",
    )
    assert removed.exit == 0, removed.err
    gone = tool("--describe", "--entity-type", "groups", "--entity-name", "tool-group")
    assert gone.lines == ["The group 'tool-group' doesn't exist and doesn't have dynamic config."]


# ---- online migration -----------------------------------------------------------------------
class Member:
    """A confluent-kafka consumer of topic `mig` polling in its own thread, with either
    protocol; auto-commits every 200 ms and records every (partition, offset) it reads."""

    def __init__(self, cluster: KnodeCluster, name: str, protocol: str) -> None:
        self.name = name
        self.read: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        settings: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "mig-group",
            "client.id": name,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
        }
        if protocol == "classic":
            settings.update(
                {
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                    "partition.assignment.strategy": "range",
                }
            )
        self._consumer = Consumer(settings)
        self._consumer.subscribe(["mig"])
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.1)
            if message is not None and not message.error():
                with self._lock:
                    self.read.append((int(message.partition() or 0), int(message.offset() or 0)))

    def count(self) -> int:
        with self._lock:
            return len(self.read)

    def offsets(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.read)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def _produce(cluster: KnodeCluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for value in range(count):
        producer.produce("mig", str(value).encode(), partition=value % 6)
    assert producer.flush(60) == 0


def _group(admin: AdminClient) -> Any:
    (future,) = admin.describe_consumer_groups(["mig-group"]).values()
    return future.result(10)


def test_online_migration_classic_to_consumer_and_back(cluster: KnodeCluster) -> None:
    """A classic group whose members move one by one to the consumer protocol and back:
    every record is read, and no migration step restarts a partition from its beginning
    (the committed offsets are kept: a reset would read everything again)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    members: list[Member] = []
    produced = 0

    def read_everything(what: str) -> None:
        wait_until(
            lambda: len({o for m in members for o in m.offsets()}) == produced,
            timeout_s=60,
            what=what,
        )

    def wait_type(kind: ConsumerGroupType, size: int) -> None:
        def ready() -> bool:
            group = _group(admin)
            return (
                group.type == kind
                and len(group.members) == size
                and sum(len(m.assignment.topic_partitions) for m in group.members) == 6
            )

        wait_until(ready, timeout_s=60, what=f"the group as {kind} with {size} members")

    try:
        members += [
            Member(cluster, "classic-a", "classic"),
            Member(cluster, "classic-b", "classic"),
        ]
        wait_type(ConsumerGroupType.CLASSIC, 2)
        _produce(cluster, 300)
        produced += 300
        read_everything("the classic group reading the first records")
        # upgrade: a consumer-protocol member joins the classic group with members
        members.append(Member(cluster, "consumer-c", "consumer"))
        wait_type(ConsumerGroupType.CONSUMER, 3)
        _produce(cluster, 300)
        produced += 300
        read_everything("the mixed group reading")
        # the classic members move to the consumer protocol, one at a time
        for name in ("classic-a", "classic-b"):
            leaving = next(m for m in members if m.name == name)
            leaving.close()
            members.append(Member(cluster, name.replace("classic", "consumer"), "consumer"))
        wait_type(ConsumerGroupType.CONSUMER, 3)
        _produce(cluster, 300)
        produced += 300
        read_everything("the consumer group reading")
        # and back: a classic member joins, every consumer-protocol member leaves
        members.append(Member(cluster, "classic-d", "classic"))
        wait_type(ConsumerGroupType.CONSUMER, 4)
        for member in members:
            if member.name.startswith("consumer"):
                member.close()
        wait_type(ConsumerGroupType.CLASSIC, 1)
        _produce(cluster, 300)
        produced += 300
        read_everything("the classic group reading again")
        total = sum(m.count() for m in members)
        assert total < produced + 300, f"{total} reads of {produced} records: offsets were reset"
    finally:
        for member in members:
            if not member._stop.is_set():
                member.close()


# ---- OffsetCommit / OffsetFetch v10 (topic ids) --------------------------------------------------
OFFSET_COMMIT, OFFSET_FETCH, METADATA = 8, 9, 3


def test_offset_commit_and_fetch_v10_by_topic_id(cluster: KnodeCluster) -> None:
    metadata = request(cluster, 1, METADATA, {"topics": [{"name": "mig", "topic_id": None}]}, 12)
    (topic,) = metadata.topics
    topic_id = topic.topic_id
    stranger = uuid.uuid4()
    group_id = "v10-group"
    node = coordinator_of(cluster, group_id)
    committed = request(
        cluster,
        node,
        OFFSET_COMMIT,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": 2,
                            "committed_offset": 42,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                },
                {
                    "topic_id": stranger,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                },
            ],
        },
        10,
    )
    answers = {
        t.topic_id: [(p.partition_index, p.error_code) for p in t.partitions]
        for t in committed.topics
    }
    assert answers == {topic_id: [(2, ErrorCode.none)], stranger: [(0, ErrorCode.unknown_topic_id)]}
    fetched = request(
        cluster,
        node,
        OFFSET_FETCH,
        {
            "groups": [
                {
                    "group_id": group_id,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [
                        {"topic_id": topic_id, "partition_indexes": [2, 3]},
                        {"topic_id": stranger, "partition_indexes": [0]},
                    ],
                }
            ],
            "require_stable": False,
        },
        10,
    )
    (group,) = fetched.groups
    offsets = {
        (t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
        for t in group.topics
        for p in t.partitions
    }
    assert offsets == {
        (topic_id, 2): (42, ErrorCode.none),
        (topic_id, 3): (-1, ErrorCode.none),
        (stranger, 0): (-1, ErrorCode.unknown_topic_id),
    }
    everything = request(
        cluster,
        node,
        OFFSET_FETCH,
        {"groups": [{"group_id": group_id, "topics": None}], "require_stable": False},
        10,
    )
    assert [
        (t.topic_id, [p.committed_offset for p in t.partitions])
        for t in everything.groups[0].topics
    ] == [(topic_id, [42])]


def test_kafka_tools_read_offsets_committed_by_the_java_consumer(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    """Kafka 4.4's console consumer with group.protocol=consumer commits (OffsetCommit v10)
    and kafka-consumer-groups reads the offsets back (OffsetFetch v10)."""
    _produce(cluster, 60)
    consumed = shell.run(
        "kafka-console-consumer",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--topic",
        "mig",
        "--group",
        "java-v10",
        "--from-beginning",
        "--max-messages",
        "30",
        "--command-property",
        "group.protocol=consumer",
    )
    assert consumed.exit == 0, consumed.err
    assert len([line for line in consumed.lines if line.isdigit()]) == 30
    described = shell.run(
        "kafka-consumer-groups",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--describe",
        "--group",
        "java-v10",
    )
    assert described.exit == 0, described.err
    rows = [line.split() for line in described.lines if line.startswith("java-v10")]
    assert rows and sum(int(row[3]) for row in rows if row[3].isdigit()) >= 30, described.out


def test_java_classic_consumer_upgraded_and_downgraded(
    shell: ToolShell, cluster: KnodeCluster, tmp_path: Path
) -> None:
    """Kafka 4.4's console consumer with group.protocol=classic keeps running while another
    joins with group.protocol=consumer (the group is upgraded, the classic member rejoins
    through the server-side assignment) and leaves again (downgraded): both read records, and
    every record is read."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("jmig", 4, 2)])["jmig"].result(60)
    out = tmp_path / "classic.out"

    def produce(first: int, count: int) -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for value in range(first, first + count):
            producer.produce("jmig", str(value).encode(), partition=value % 4)
        assert producer.flush(60) == 0

    def classic_read() -> set[str]:
        return {line for line in out.read_text().splitlines() if line.isdigit()}

    def group_type() -> tuple[ConsumerGroupType, int]:
        (future,) = admin.describe_consumer_groups(["java-mig"]).values()
        described = future.result(10)
        return described.type, len(described.members)

    def split() -> bool:
        """Upgraded, and the classic member released partitions to the other member."""
        (future,) = admin.describe_consumer_groups(["java-mig"]).values()
        described = future.result(10)
        sizes = sorted(len(m.assignment.topic_partitions) for m in described.members)
        return described.type == ConsumerGroupType.CONSUMER and sizes == [2, 2]

    common = ["--bootstrap-server", cluster.bootstrap_servers, "--topic", "jmig"]
    common += ["--group", "java-mig", "--from-beginning"]
    with out.open("w") as sink:
        classic = subprocess.Popen(
            [
                *java_command(),
                TOOLS["kafka-console-consumer"],
                *common,
                "--timeout-ms",
                "60000",
                "--command-property",
                "group.protocol=classic",
                "--command-property",
                "auto.commit.interval.ms=200",
                "--command-property",
                "heartbeat.interval.ms=300",
            ],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    try:
        wait_until(
            lambda: group_type() == (ConsumerGroupType.CLASSIC, 1), timeout_s=60, what="classic"
        )
        produce(0, 40)
        wait_until(lambda: len(classic_read()) == 40, timeout_s=60, what="40 classic reads")
        # once the consumer-protocol member is in (the group upgraded), 40 more records
        producer = threading.Thread(
            target=lambda: (
                wait_until(split, timeout_s=60, what="the upgraded group split"),
                produce(40, 40),
            ),
            daemon=True,
        )
        producer.start()
        upgraded = shell.run(
            "kafka-console-consumer",
            *common,
            "--max-messages",
            "10",
            "--timeout-ms",
            "30000",
            "--command-property",
            "group.protocol=consumer",
        )
        assert upgraded.exit == 0, upgraded.err
        consumer_read = {line for line in upgraded.lines if line.isdigit()}
        assert len(consumer_read) == 10, upgraded.err
        producer.join(60)
        # the consumer-protocol member left: the classic member is alone in a classic group
        wait_until(
            lambda: group_type() == (ConsumerGroupType.CLASSIC, 1),
            timeout_s=60,
            what="the group downgraded",
        )
        produce(80, 20)
        wait_until(
            lambda: classic_read() | consumer_read >= {str(v) for v in range(100)},
            timeout_s=60,
            what="every record read",
        )
    finally:
        classic.kill()
        classic.wait(30)
