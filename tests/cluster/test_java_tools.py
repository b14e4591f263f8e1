"""Kafka 4.4's CLI tools (bin/kafka-*.sh main classes) against a real 3-node knode cluster.

Every tool runs through its main class with the arguments its shell script passes; most runs
share one JVM (`ToolShell`, tests/cluster/java_support.py), a few start their own JVM exactly
as the script does. Each test asserts what the tool prints, not only its exit code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.cluster.java_support import ToolResult, ToolShell, run_tool_process, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("java-tools")
    with KnodeCluster(
        base,
        node_count=3,
        settings=["group.initial.rebalance.delay.ms=0"],
        start=False,
    ) as c:
        start_slowly(c)
        yield c


class Tools:
    """`tools.run("kafka-topics", "--create", ...)`: --bootstrap-server is added."""

    def __init__(self, shell: ToolShell, cluster: KnodeCluster) -> None:
        self.shell, self.cluster = shell, cluster

    def run(self, tool: str, *args: str, stdin: str | None = None) -> ToolResult:
        return self.shell.run(
            tool, "--bootstrap-server", self.cluster.bootstrap_servers, *args, stdin=stdin
        )


@pytest.fixture
def tools(shell: ToolShell, cluster: KnodeCluster) -> Tools:
    return Tools(shell, cluster)


def _partition_rows(describe_out: str) -> dict[int, dict[str, str]]:
    """kafka-topics --describe partition lines -> {partition: {Leader, Replicas, Isr, ...}}."""
    rows: dict[int, dict[str, str]] = {}
    for line in describe_out.splitlines():
        if "\tPartition: " not in line:
            continue
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        rows[int(fields["Partition"])] = fields
    return rows


# ---- kafka-topics -------------------------------------------------------------------------------
def test_kafka_topics(tools: Tools) -> None:
    created = tools.run(
        "kafka-topics",
        "--create",
        "--topic",
        "tt-one",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=3600000",
    ).ok()
    assert created.lines == ["Created topic tt-one."]
    exists = tools.run("kafka-topics", "--create", "--topic", "tt-one", "--partitions", "1")
    assert exists.exit == 1
    assert "Topic 'tt-one' already exists." in exists.out
    # --if-not-exists: quiet success
    assert tools.run("kafka-topics", "--create", "--if-not-exists", "--topic", "tt-one").ok()

    assert "tt-one" in tools.run("kafka-topics", "--list").ok().lines

    described = tools.run("kafka-topics", "--describe", "--topic", "tt-one").ok()
    header = described.lines[0]
    assert header.startswith("Topic: tt-one\tTopicId: ")
    assert "\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: retention.ms=3600000" in header
    rows = _partition_rows(described.out)
    assert sorted(rows) == [0, 1]
    for row in rows.values():
        replicas = row["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"]
        assert row["Leader"] == replicas[0]
        assert sorted(row["Isr"].split(",")) == ["1", "2", "3"]

    assert tools.run("kafka-topics", "--alter", "--topic", "tt-one", "--partitions", "5").ok()
    described = tools.run("kafka-topics", "--describe", "--topic", "tt-one").ok()
    assert "\tPartitionCount: 5\t" in described.lines[0]
    assert sorted(_partition_rows(described.out)) == [0, 1, 2, 3, 4]
    fewer = tools.run("kafka-topics", "--alter", "--topic", "tt-one", "--partitions", "2")
    assert fewer.exit == 1
    assert "Topic currently has 5 partitions, which is higher than the requested 2." in fewer.out

    # a healthy cluster: nothing under-replicated or unavailable
    under = tools.run("kafka-topics", "--describe", "--under-replicated-partitions").ok()
    assert under.lines == []
    assert tools.run("kafka-topics", "--describe", "--unavailable-partitions").ok().lines == []

    missing = tools.run("kafka-topics", "--describe", "--topic", "tt-nope")
    assert missing.exit == 1
    assert "Topic 'tt-nope' does not exist as expected" in missing.out

    assert tools.run("kafka-topics", "--delete", "--topic", "tt-one").ok().lines == []
    wait_until(
        lambda: "tt-one" not in tools.run("kafka-topics", "--list").ok().lines,
        timeout_s=30,
        what="tt-one to be deleted",
    )


def test_kafka_topics_in_its_own_jvm(tools: Tools, cluster: KnodeCluster) -> None:
    """The same main class as a process of its own, as bin/kafka-topics.sh runs it."""
    tools.run("kafka-topics", "--create", "--topic", "tt-proc", "--partitions", "1").ok()
    listed = run_tool_process(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--list"
    ).ok()
    assert "tt-proc" in listed.lines
    assert listed.lines == tools.run("kafka-topics", "--list").ok().lines
    missing = run_tool_process(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--delete", "--topic", "x"
    )
    assert missing.exit == 1
    assert "Topic 'x' does not exist as expected" in missing.out


# ---- console producer / consumer, get-offsets, consumer groups -----------------------------------
def test_console_producer_consumer_and_get_offsets(tools: Tools, cluster: KnodeCluster) -> None:
    tools.run("kafka-topics", "--create", "--topic", "tc", "--partitions", "3").ok()
    keyed = "".join(f"key{i % 5}:value-{i}\n" for i in range(30))
    tools.run(
        "kafka-console-producer",
        "--topic",
        "tc",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        stdin=keyed,
    ).ok()
    # the producer in a JVM of its own, reading its real stdin
    run_tool_process(
        "kafka-console-producer",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--topic",
        "tc",
        stdin="".join(f"plain-{i}\n" for i in range(10)),
    ).ok()

    consumed = tools.run(
        "kafka-console-consumer",
        "--topic",
        "tc",
        "--from-beginning",
        "--max-messages",
        "40",
        "--group",
        "tc-group",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.partition=true",
        "--formatter-property",
        "print.offset=true",
    ).ok()
    assert "Processed a total of 40 messages" in consumed.err
    rows = [line.split("\t") for line in consumed.lines]
    assert len(rows) == 40
    values = {row[3]: row for row in rows}
    for i in range(30):
        row = values[f"value-{i}"]
        assert row[2] == f"key{i % 5}"
    for i in range(10):
        assert values[f"plain-{i}"][2] == "null"
    per_partition: dict[str, list[int]] = {}
    for row in rows:
        per_partition.setdefault(row[0], []).append(int(row[1].removeprefix("Offset:")))
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))  # each partition in order from 0
    # same key, same partition
    by_key: dict[str, set[str]] = {}
    for row in rows:
        by_key.setdefault(row[2], set()).add(row[0])
    assert all(len(parts) == 1 for key, parts in by_key.items() if key != "null")

    latest = tools.run("kafka-get-offsets", "--topic", "tc").ok()
    ends = {int(p): int(o) for _, p, o in (line.split(":") for line in latest.lines)}
    assert sorted(ends) == [0, 1, 2] and sum(ends.values()) == 40
    for partition, offsets in per_partition.items():
        assert ends[int(partition.removeprefix("Partition:"))] == len(offsets)
    earliest = tools.run("kafka-get-offsets", "--topic", "tc", "--time", "-2").ok()
    assert earliest.lines == ["tc:0:0", "tc:1:0", "tc:2:0"]
    one = tools.run("kafka-get-offsets", "--topic-partitions", "tc:1").ok()
    assert one.lines == [f"tc:1:{ends[1]}"]


def _group_table(out: str) -> list[dict[str, str]]:
    """A kafka-consumer-groups table (header line, then rows) as dicts."""
    lines = [line for line in out.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:]]


def test_kafka_consumer_groups(tools: Tools, cluster: KnodeCluster) -> None:
    tools.run("kafka-topics", "--create", "--topic", "tg", "--partitions", "2").ok()
    tools.run(
        "kafka-console-producer",
        "--topic",
        "tg",
        "--reader-property",
        "parse.key=true",
        stdin="".join(f"k{i}\tm{i}\n" for i in range(20)),
    ).ok()
    # an active member (librdkafka) while the tool describes the group
    member = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "tg-group",
            "client.id": "tg-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe(["tg"])
        seen = 0
        deadline_polls = 200
        while seen < 20 and deadline_polls:
            deadline_polls -= 1
            message = member.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 20
        member.commit(asynchronous=False)

        assert "tg-group" in tools.run("kafka-consumer-groups", "--list").ok().lines
        offsets = tools.run("kafka-consumer-groups", "--describe", "--group", "tg-group").ok()
        table = _group_table(offsets.out)
        assert sorted(r["PARTITION"] for r in table) == ["0", "1"]
        # "-": no committed offset (a partition the producer left empty)
        assert sum(int(r["LOG-END-OFFSET"]) for r in table) == 20
        for row in table:
            assert row["GROUP"] == "tg-group" and row["TOPIC"] == "tg"
            if row["CURRENT-OFFSET"] == "-":
                assert (row["LOG-END-OFFSET"], row["LAG"]) == ("0", "-"), row
            else:
                assert row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0"
            assert row["CLIENT-ID"] == "tg-client" and row["HOST"].startswith("/127.0.0.1")

        members = tools.run(
            "kafka-consumer-groups", "--describe", "--group", "tg-group", "--members"
        ).ok()
        (row,) = _group_table(members.out)
        assert row["CLIENT-ID"] == "tg-client" and row["#PARTITIONS"] == "2"
        verbose = tools.run(
            "kafka-consumer-groups", "--describe", "--group", "tg-group", "--members", "--verbose"
        ).ok()
        assert "tg:0,1" in verbose.out  # ASSIGNMENT column

        state = tools.run(
            "kafka-consumer-groups", "--describe", "--group", "tg-group", "--state"
        ).ok()
        header, line = [text for text in state.out.splitlines() if text.strip()]
        assert header.split() == [
            "GROUP",
            "COORDINATOR",
            "(ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS",
        ]
        group, coordinator, coordinator_id, strategy, group_state, count = line.split()
        assert group == "tg-group" and coordinator.startswith("127.0.0.1:")
        assert coordinator_id in ("(1)", "(2)", "(3)")
        assert (strategy, group_state, count) == ("range", "Stable", "1")

        busy = tools.run(
            "kafka-consumer-groups",
            "--reset-offsets",
            "--group",
            "tg-group",
            "--topic",
            "tg",
            "--to-earliest",
            "--execute",
        )
        assert busy.exit != 0 or "inactive" in busy.out + busy.err
        assert "Assignments can only be reset if the group 'tg-group' is inactive" in (
            busy.out + busy.err
        )
    finally:
        member.close()

    reset = tools.run(
        "kafka-consumer-groups",
        "--reset-offsets",
        "--group",
        "tg-group",
        "--topic",
        "tg",
        "--to-offset",
        "3",
        "--execute",
    ).ok()
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in _group_table(reset.out)) == [
        ("0", "3"),
        ("1", "3"),
    ]
    after = tools.run("kafka-consumer-groups", "--describe", "--group", "tg-group", "--offsets")
    assert "Consumer group 'tg-group' has no active members." in after.ok().err
    table = _group_table(after.out)
    assert all(r["CURRENT-OFFSET"] == "3" and r["CONSUMER-ID"] == "-" for r in table)
    assert sum(int(r["LAG"]) for r in table) == 20 - 6
    state = tools.run("kafka-consumer-groups", "--describe", "--group", "tg-group", "--state")
    assert " Empty " in state.ok().out

    deleted_offsets = tools.run(
        "kafka-consumer-groups", "--delete-offsets", "--group", "tg-group", "--topic", "tg:1"
    ).ok()
    assert "Request succeeded for deleting offsets from group tg-group." in deleted_offsets.out
    assert re.search(r"tg\s+1\s+Successful", deleted_offsets.out)

    deleted = tools.run("kafka-consumer-groups", "--delete", "--group", "tg-group").ok()
    assert "Deletion of requested consumer groups ('tg-group') was successful." in deleted.out
    assert "tg-group" not in tools.run("kafka-consumer-groups", "--list").ok().lines
    gone = tools.run("kafka-consumer-groups", "--delete", "--group", "tg-group")
    assert "Group 'tg-group' could not be deleted due to:" in gone.out
    assert "GroupIdNotFoundException" in gone.out


# ---- reassignment, leader election ------------------------------------------------------------
def test_reassign_partitions_and_leader_election(
    tools: Tools, cluster: KnodeCluster, tmp_path: Path
) -> None:
    tools.run(
        "kafka-topics",
        "--create",
        "--topic",
        "tr",
        "--replica-assignment",
        "1:2,2:3",
    ).ok()
    tools.run("kafka-console-producer", "--topic", "tr", stdin="x\n" * 50).ok()

    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": "tr"}]}))
    generated = tools.run(
        "kafka-reassign-partitions",
        "--generate",
        "--topics-to-move-json-file",
        str(move),
        "--broker-list",
        "1,2,3",
    ).ok()
    lines = generated.lines
    current_at = lines.index("Current partition replica assignment")
    proposed_at = lines.index("Proposed partition reassignment configuration")
    current = json.loads(lines[current_at + 1])
    assert {(p["partition"], tuple(p["replicas"])) for p in current["partitions"]} == {
        (0, (1, 2)),
        (1, (2, 3)),
    }
    proposed = json.loads(lines[proposed_at + 1])
    assert sorted(p["partition"] for p in proposed["partitions"]) == [0, 1]
    assert all(len(p["replicas"]) == 2 for p in proposed["partitions"])

    # partition 0: [1,2] -> [2,1] (same replicas, preferred leader now 2); partition 1 -> [3,1]
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "tr", "partition": 0, "replicas": [2, 1]},
                    {"topic": "tr", "partition": 1, "replicas": [3, 1]},
                ],
            }
        )
    )
    executed = tools.run(
        "kafka-reassign-partitions",
        "--execute",
        "--reassignment-json-file",
        str(plan),
        "--throttle",
        "50000000",
    ).ok()
    assert "Save this to use as the --reassignment-json-file option during rollback" in (
        executed.out
    )
    assert "Successfully started partition reassignments for tr-0,tr-1" in executed.out
    assert "Warning: You must run --verify periodically, until the reassignment completes" in (
        executed.out
    )

    def verified() -> ToolResult | None:
        result = tools.run(
            "kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan)
        ).ok()
        return result if "is still in progress" not in result.out else None

    done = wait_until(verified, timeout_s=60, interval_s=0.5, what="reassignment to complete")
    assert "Reassignment of partition tr-0 is completed." in done.out
    assert "Reassignment of partition tr-1 is completed." in done.out
    assert "Clearing broker-level throttles on brokers 1,2,3" in done.out
    assert "Clearing topic-level throttles on topic tr" in done.out
    rows = _partition_rows(tools.run("kafka-topics", "--describe", "--topic", "tr").ok().out)
    assert rows[0]["Replicas"] == "2,1" and rows[0]["Leader"] == "1"  # leader unchanged
    assert rows[1]["Replicas"] == "3,1"

    # the preferred leader (2) is not the leader (1): elect it
    elected = tools.run(
        "kafka-leader-election", "--election-type", "preferred", "--topic", "tr", "--partition", "0"
    ).ok()
    assert "Successfully completed leader election (PREFERRED) for partitions tr-0" in elected.out
    rows = _partition_rows(tools.run("kafka-topics", "--describe", "--topic", "tr").ok().out)
    assert rows[0]["Leader"] == "2"
    again = tools.run(
        "kafka-leader-election", "--election-type", "preferred", "--topic", "tr", "--partition", "0"
    ).ok()
    assert "Valid replica already elected for partitions tr-0" in again.out

    # cancel: a reassignment held back by a 1 byte/s throttle is still in progress. The
    # throttle is a quota: the new replica's first fetch is let through (up to
    # replica.fetch.max.bytes, 1 MiB), as in Kafka, so tr-0 must hold more than that or the
    # copy may finish before --verify runs.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20})
    for _ in range(3000):
        producer.produce("tr", b"y" * 1000, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    slow = tmp_path / "slow.json"
    slow.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "tr", "partition": 0, "replicas": [3, 2]}]}
        )
    )
    tools.run(
        "kafka-reassign-partitions",
        "--execute",
        "--reassignment-json-file",
        str(slow),
        "--throttle",
        "1",
    ).ok()
    pending = tools.run(
        "kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(slow)
    ).ok()
    assert "Reassignment of partition tr-0 is still in progress." in pending.out
    cancelled = tools.run(
        "kafka-reassign-partitions", "--cancel", "--reassignment-json-file", str(slow)
    ).ok()
    assert "Successfully cancelled partition reassignment for: tr-0" in cancelled.out
    assert "Clearing topic-level throttles on topic tr" in cancelled.out
    rows = _partition_rows(tools.run("kafka-topics", "--describe", "--topic", "tr").ok().out)
    assert rows[0]["Replicas"] == "2,1"


# ---- configs ------------------------------------------------------------------------------------
def test_kafka_configs(tools: Tools) -> None:
    tools.run("kafka-topics", "--create", "--topic", "tcfg", "--partitions", "1").ok()
    altered = tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "tcfg",
        "--add-config",
        "retention.ms=1234567,max.message.bytes=200000",
    ).ok()
    assert altered.lines == ["Completed updating config for topic tcfg."]
    described = tools.run(
        "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "tcfg"
    ).ok()
    assert described.lines[0] == "Dynamic configs for topic tcfg are:"
    assert (
        "  retention.ms=1234567 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1234567}"
        in described.lines
        or any(
            line.startswith("  retention.ms=1234567 sensitive=false") for line in described.lines
        )
    )
    assert any(line.startswith("  max.message.bytes=200000 ") for line in described.lines)
    tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "tcfg",
        "--delete-config",
        "max.message.bytes",
    ).ok()
    described = tools.run(
        "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "tcfg"
    ).ok()
    assert not any("max.message.bytes" in line for line in described.lines)
    bad = tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "tcfg",
        "--add-config",
        "no.such.config=1",
    )
    assert bad.exit == 1
    assert "no.such.config" in bad.out + bad.err

    # one broker's dynamic config
    tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
        "--add-config",
        "log.retention.ms=86400001",
    ).ok()
    broker = tools.run(
        "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "2"
    ).ok()
    assert broker.lines[0] == "Dynamic configs for broker 2 are:"
    assert any(
        line.startswith(
            "  log.retention.ms=86400001 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG"
        )
        for line in broker.lines
    ), broker.out
    every = tools.run(
        "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "2", "--all"
    ).ok()
    assert every.lines[0] == "All configs for broker 2 are:"
    assert any(line.startswith("  node.id=2 ") for line in every.lines)

    # the cluster-wide default (--entity-default), seen by every broker
    tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=86400002",
    ).ok()

    def default_described() -> ToolResult | None:
        result = tools.run(
            "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default"
        ).ok()
        return result if len(result.lines) > 1 else None

    default = wait_until(default_described, timeout_s=30, what="the cluster default")
    assert default.lines == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=86400002 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400002}",
    ]

    def broker_one_applied() -> ToolResult | None:
        # Every broker applies the default from its change notification, asynchronously
        # (as in Kafka): broker 1 may answer with the old value for a moment.
        result = tools.run(
            "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"
        ).ok()
        applied = any(
            line.startswith("  log.retention.ms=86400002 sensitive=false") for line in result.lines
        )
        return result if applied else None

    wait_until(broker_one_applied, timeout_s=30, what="broker 1 applying the cluster default")
    tools.run(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "log.retention.ms",
    ).ok()


# ---- broker-api-versions, log-dirs, delete-records, quorum --------------------------------------
def test_kafka_broker_api_versions(tools: Tools, cluster: KnodeCluster) -> None:
    out = tools.run("kafka-broker-api-versions").ok().out
    for node_id in cluster.nodes:
        assert f"{cluster.address(node_id)} (id: {node_id} rack: null isFenced: false) -> (" in out
    # the APIs the Java client needs are usable at the client's newest version
    for api in ("Produce(0)", "Fetch(1)", "Metadata(3)", "ApiVersions(18)", "JoinGroup(11)"):
        lines = [line for line in out.splitlines() if line.strip().startswith(api)]
        assert len(lines) == 3, api
        assert all("[usable: " in line for line in lines), lines
    # transactions are served, and KIP-848's consumer protocol (docs/groups.md)
    assert "\tEndTxn(26): 0 to " in out
    assert "\tConsumerGroupHeartbeat(68): 0 to 1 [usable: 1]," in out
    assert "\tConsumerGroupDescribe(69): 0 to 1 [usable: 1]," in out


def test_kafka_log_dirs_and_delete_records(tools: Tools, tmp_path: Path) -> None:
    tools.run(
        "kafka-topics",
        "--create",
        "--topic",
        "tl",
        "--partitions",
        "1",
        "--replication-factor",
        "2",
    ).ok()
    tools.run("kafka-console-producer", "--topic", "tl", stdin="record\n" * 100).ok()

    def replicated() -> ToolResult | None:
        result = tools.run("kafka-log-dirs", "--describe", "--topic-list", "tl").ok()
        sizes = re.findall(r'"partition":"tl-0","size":(\d+)', result.out)
        return result if len(sizes) == 2 and all(int(size) > 0 for size in sizes) else None

    # generous: a follower held back by the previous test's throttled reassignment catches up
    result = wait_until(replicated, timeout_s=120, what="both replicas of tl-0 on disk")
    assert result.lines[0] == "Querying brokers for log directories information"
    assert result.lines[1].startswith("Received log directory information from brokers ")
    report = json.loads(result.lines[2])
    assert report["version"] == 1
    holders = {}
    for broker in report["brokers"]:
        for log_dir in broker["logDirs"]:
            assert log_dir["error"] is None
            for partition in log_dir["partitions"]:
                assert partition["partition"] == "tl-0"
                holders[broker["broker"]] = partition
    assert len(holders) == 2
    assert all(p["size"] > 0 and p["isFuture"] is False for p in holders.values())

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "tl", "partition": 0, "offset": 60}]})
    )
    deleted = tools.run("kafka-delete-records", "--offset-json-file", str(offsets)).ok()
    assert deleted.lines == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: tl-0\tlow_watermark: 60",
    ]
    assert tools.run("kafka-get-offsets", "--topic", "tl", "--time", "-2").ok().lines == ["tl:0:60"]
    offsets.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "tl", "partition": 0, "offset": 999}]})
    )
    beyond = tools.run("kafka-delete-records", "--offset-json-file", str(offsets))
    assert "partition: tl-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in (
        beyond.out
    )


def test_kafka_metadata_quorum(tools: Tools) -> None:
    status = tools.run("kafka-metadata-quorum", "describe", "--status").ok()
    fields = dict(re.split(r":\s+", line, maxsplit=1) for line in status.lines)
    assert int(fields["LeaderId"]) in (1, 2, 3)
    assert int(fields["LeaderEpoch"]) >= 1 and int(fields["HighWatermark"]) > 0
    assert [v["id"] for v in json.loads(fields["CurrentVoters"])] == [1, 2, 3]
    assert json.loads(fields["CurrentObservers"]) == []
    assert fields["ClusterId"]

    replication = tools.run("kafka-metadata-quorum", "describe", "--replication").ok()
    header, *rows = [line.split() for line in replication.lines]
    assert header[:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"]
    assert header[-1] == "Status"
    assert sorted(int(row[0]) for row in rows) == [1, 2, 3]
    statuses = sorted(row[-1] for row in rows)
    assert statuses == ["Follower", "Follower", "Leader"]
    leader_row = next(row for row in rows if row[-1] == "Leader")
    assert int(leader_row[0]) == int(fields["LeaderId"])


# ---- perf tests ---------------------------------------------------------------------------------
def test_producer_and_consumer_perf_tests(tools: Tools, cluster: KnodeCluster) -> None:
    tools.run("kafka-topics", "--create", "--topic", "tp", "--partitions", "2").ok()
    produced = tools.shell.run(
        "kafka-producer-perf-test",
        "--topic",
        "tp",
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={cluster.bootstrap_servers}",
        "acks=all",
    ).ok()
    summary = produced.lines[-1]
    assert re.match(
        r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        summary,
    ), summary
    consumed = tools.run(
        "kafka-consumer-perf-test", "--topic", "tp", "--messages", "20000", "--timeout", "60000"
    ).ok()
    header, row = consumed.lines[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec,")
    values = dict(zip(header.split(", "), row.split(", "), strict=True))
    assert int(values["data.consumed.in.nMsg"]) == 20000
    assert float(values["data.consumed.in.MB"]) == pytest.approx(20000 * 100 / 1024 / 1024, 0.01)
    assert (
        tools.run("kafka-get-offsets", "--topic", "tp").ok().lines
        and sum(
            int(line.split(":")[2])
            for line in tools.run("kafka-get-offsets", "--topic", "tp").lines
        )
        == 20000
    )


# ---- last: a stopped broker ---------------------------------------------------------------------
def test_under_replicated_partitions_while_a_broker_is_down(
    tools: Tools, cluster: KnodeCluster
) -> None:
    tools.run(
        "kafka-topics",
        "--create",
        "--topic",
        "tu",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    ).ok()
    cluster.stop(3)
    try:

        def under() -> ToolResult | None:
            result = tools.run(
                "kafka-topics", "--describe", "--under-replicated-partitions", "--topic", "tu"
            ).ok()
            return result if len(result.lines) == 3 else None

        found = wait_until(under, timeout_s=60, interval_s=1, what="3 under-replicated")
        for row in _partition_rows(found.out).values():
            assert "3" in row["Replicas"].split(",") and "3" not in row["Isr"].split(",")
            assert row["Leader"] in ("1", "2")
        unavailable = tools.run(
            "kafka-topics", "--describe", "--unavailable-partitions", "--topic", "tu"
        ).ok()
        assert unavailable.lines == []
    finally:
        cluster.start(3)
    wait_until(
        lambda: (
            not tools.run(
                "kafka-topics", "--describe", "--under-replicated-partitions", "--topic", "tu"
            )
            .ok()
            .lines
        ),
        timeout_s=90,
        interval_s=1,
        what="node 3 back in every ISR",
    )
