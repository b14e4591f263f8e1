"""ktool's Kafka-tool commands against Kafka 4.4's own tools on the same real knode cluster.

Each test runs a ktool command (in-process, as the console script would) and the Kafka tool it
mirrors (its main class in the shared ToolShell JVM, tests/cluster/java_support.py) with the
same arguments against the same 2-node cluster, and compares what they print line for line
(except values that legitimately differ between two runs, named where they are masked).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from typer.testing import CliRunner

from tests.cluster.java_support import ToolResult, ToolShell, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("ktool-parity")
    with KnodeCluster(
        base, node_count=2, settings=["group.initial.rebalance.delay.ms=0"], start=False
    ) as c:
        start_slowly(c)
        yield c


@dataclass(frozen=True)
class Both:
    kafka: ToolResult
    ktool: ToolResult


class Tools:
    def __init__(self, shell: ToolShell, cluster: KnodeCluster) -> None:
        self.shell, self.cluster = shell, cluster

    def kafka(self, tool: str, *args: str, stdin: str | None = None) -> ToolResult:
        return self.shell.run(
            tool, "--bootstrap-server", self.cluster.bootstrap_servers, *args, stdin=stdin
        )

    def ktool(self, command: str, *args: str, stdin: str | None = None) -> ToolResult:
        result = CliRunner().invoke(
            app,
            [*command.split(), "--bootstrap-server", self.cluster.bootstrap_servers, *args],
            input=stdin,
        )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return ToolResult(result.exit_code, result.stdout, result.stderr)

    def both(self, tool: str, command: str, *args: str) -> Both:
        return Both(self.kafka(tool, *args), self.ktool(command, *args))


@pytest.fixture
def tools(shell: ToolShell, cluster: KnodeCluster) -> Tools:
    return Tools(shell, cluster)


def _same(both: Both) -> list[str]:
    """Assert both exited alike and printed the same lines; return the lines."""
    assert both.kafka.exit == both.ktool.exit, (both.kafka, both.ktool)
    assert both.ktool.lines == both.kafka.lines, (both.kafka, both.ktool)
    return both.ktool.lines


def _produce(tools: Tools, topic: str, lines: list[str]) -> None:
    tools.kafka(
        "kafka-console-producer",
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        stdin="".join(f"{line}\n" for line in lines),
    ).ok()


def _wait_for_end_offsets(tools: Tools, topic: str, total: int) -> None:
    """Until the high watermarks of `topic` add up to `total` (followers have caught up)."""

    def ends() -> bool:
        lines = tools.kafka("kafka-get-offsets", "--topic", topic).ok().lines
        return sum(int(line.split(":")[2]) for line in lines) == total

    wait_until(ends, timeout_s=60, what=f"{topic}'s high watermarks to reach {total}")


# ---- get-offsets --------------------------------------------------------------------------------
def test_get_offsets(tools: Tools) -> None:
    tools.kafka(
        "kafka-topics",
        "--create",
        "--topic",
        "kp-go",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
    ).ok()
    tools.kafka("kafka-topics", "--create", "--topic", "kp-go2", "--partitions", "2").ok()
    _produce(tools, "kp-go", [f"k{i % 7}:v{i}" for i in range(50)])
    _produce(tools, "kp-go2", [f"k{i}:w{i}" for i in range(5)])
    _wait_for_end_offsets(tools, "kp-go", 50)
    _wait_for_end_offsets(tools, "kp-go2", 5)

    latest = _same(tools.both("kafka-get-offsets", "get-offsets", "--topic", "kp-go"))
    assert len(latest) == 3
    assert sum(int(line.split(":")[2]) for line in latest) == 50
    assert _same(
        tools.both("kafka-get-offsets", "get-offsets", "--topic", "kp-go", "--time", "-2")
    ) == ["kp-go:0:0", "kp-go:1:0", "kp-go:2:0"]
    for args in (
        ("--topic", "kp-go", "--time", "earliest"),
        ("--topic", "kp-go", "--time", "latest", "--partitions", "0,2"),
        ("--topic", "kp-go.*"),
        ("--topic-partitions", "kp-go:1,kp-go2:0-1"),
        ("--topic-partitions", "kp-go.*:1-"),
        ("--topic-partitions", "kp-go:-2"),
        ("--topic", "kp-go", "--time", "-3"),
        ("--topic", "kp-go", "--time", "0"),
        ("--topic", "kp-go", "--time", "9999999999999"),
        ("--exclude-internal-topics", "--topic", ".*go.*"),
    ):
        _same(tools.both("kafka-get-offsets", "get-offsets", *args))

    # nothing matches: both fail with the same message
    missing = tools.both("kafka-get-offsets", "get-offsets", "--topic", "kp-nope")
    assert missing.ktool.exit == missing.kafka.exit == 1
    assert missing.ktool.err.strip() == missing.kafka.err.strip()
    assert "Could not match any topic-partitions" in missing.ktool.err

    as_json = json.loads(tools.ktool("get-offsets", "--topic", "kp-go", "--json").ok().out)
    assert [f"{p['topic']}:{p['partition']}:{p['offset']}" for p in as_json["partitions"]] == (
        latest
    )


# ---- delete-records -----------------------------------------------------------------------------
def _offset_file(path: Path, entries: list[tuple[str, int, int]]) -> str:
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries],
            }
        )
    )
    return str(path)


def test_delete_records(tools: Tools, tmp_path: Path) -> None:
    tools.kafka(
        "kafka-topics",
        "--create",
        "--topic",
        "kp-dr",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    ).ok()
    producer = Producer({"bootstrap.servers": tools.cluster.bootstrap_servers, "acks": "all"})
    for partition in (0, 1):
        for _ in range(40):
            producer.produce("kp-dr", b"r", partition=partition)
    assert producer.flush(60) == 0
    _wait_for_end_offsets(tools, "kp-dr", 80)

    def run_both(
        entries_kafka: list[tuple[str, int, int]], entries_ktool: list[tuple[str, int, int]]
    ) -> Both:
        kafka = tools.kafka(
            "kafka-delete-records",
            "--offset-json-file",
            _offset_file(tmp_path / "kafka.json", entries_kafka),
        )
        ktool = tools.ktool(
            "delete-records",
            "--offset-json-file",
            _offset_file(tmp_path / "ktool.json", entries_ktool),
        )
        return Both(kafka, ktool)

    # Kafka's tool deletes up to 10 on partition 0, ktool then up to 20 on partition 1 (each
    # must do its own work): their lines differ only in that value
    first = run_both([("kp-dr", 0, 10)], [("kp-dr", 1, 20)])
    assert first.kafka.ok().lines == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: kp-dr-0\tlow_watermark: 10",
    ]
    assert first.ktool.ok().lines == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: kp-dr-1\tlow_watermark: 20",
    ]
    assert tools.kafka("kafka-get-offsets", "--topic", "kp-dr", "--time", "-2").ok().lines == [
        "kp-dr:0:10",
        "kp-dr:1:20",
    ]
    # the same request twice: the same answer (nothing more deleted), then errors alike
    for entries in (
        [("kp-dr", 0, 5), ("kp-dr", 1, -1)],
        [("kp-dr", 0, 999)],
        [("kp-dr", 0, 30)],
    ):
        both = run_both(entries, entries)
        # Kafka's tool prints the partitions in its result map's (hash) order, not the
        # file's: the same lines, compared as a set after the two header lines
        assert both.kafka.exit == both.ktool.exit, (both.kafka, both.ktool)
        assert both.ktool.lines[:2] == both.kafka.lines[:2], (both.kafka, both.ktool)
        assert sorted(both.ktool.lines[2:]) == sorted(both.kafka.lines[2:]), (
            both.kafka,
            both.ktool,
        )
    # a topic that does not exist: Kafka's Admin client retries its metadata lookup until the
    # 60 s timeout and prints a TimeoutException; ktool answers at once with the error code
    missing = tools.ktool(
        "delete-records",
        "--offset-json-file",
        _offset_file(tmp_path / "missing.json", [("kp-dr-none", 0, 1)]),
    ).ok()
    assert missing.lines[-1] == (
        "partition: kp-dr-none-0\terror: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: This server does not host this topic-partition."
    )
    assert tools.kafka("kafka-get-offsets", "--topic", "kp-dr", "--time", "-2").ok().lines == [
        "kp-dr:0:30",
        "kp-dr:1:40",
    ]
    # a file that is not the tool's JSON: both refuse it
    (tmp_path / "bad.json").write_text('{"partitions": [{"topic": "kp-dr"}]}')
    bad = tools.both(
        "kafka-delete-records", "delete-records", "--offset-json-file", str(tmp_path / "bad.json")
    )
    assert bad.kafka.exit != 0 and bad.ktool.exit != 0


# ---- log-dirs -----------------------------------------------------------------------------------
def test_log_dirs(tools: Tools) -> None:
    tools.kafka(
        "kafka-topics",
        "--create",
        "--topic",
        "kp-ld",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    ).ok()
    _produce(tools, "kp-ld", [f"k{i}:v{i}" for i in range(30)])
    _wait_for_end_offsets(tools, "kp-ld", 30)

    def settled() -> bool:  # both replicas of both partitions written out, sizes equal
        out = tools.ktool("log-dirs", "--describe", "--topic-list", "kp-ld", "--json").ok().out
        sizes: dict[str, set[int]] = {}
        for broker in json.loads(out)["brokers"]:
            for log_dir in broker["logDirs"]:
                for p in log_dir["partitions"]:
                    sizes.setdefault(p["partition"], set()).add(p["size"])
        return len(sizes) == 2 and all(len(s) == 1 and 0 not in s for s in sizes.values())

    wait_until(settled, timeout_s=60, what="kp-ld's replicas to match")
    for args in (
        ("--describe", "--topic-list", "kp-ld"),
        ("--describe", "--topic-list", "kp-ld,kp-nope", "--broker-list", "2"),
        ("--describe", "--topic-list", "kp-nope"),
    ):
        lines = _same(tools.both("kafka-log-dirs", "log-dirs", *args))
        assert lines[0] == "Querying brokers for log directories information"
    report = json.loads(lines[2])
    assert all(d["partitions"] == [] for b in report["brokers"] for d in b["logDirs"])
    missing = tools.both("kafka-log-dirs", "log-dirs", "--describe", "--broker-list", "1,7")
    assert missing.kafka.exit != 0 and missing.ktool.exit != 0
    assert "The given brokers do not exist from --broker-list: 7" in missing.ktool.err


# ---- consumer groups ----------------------------------------------------------------------------
def _consumer(tools: Tools, group: str, client_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": tools.cluster.bootstrap_servers,
            "group.id": group,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _consume_and_commit(consumer: Consumer, topic: str, count: int) -> None:
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == count, f"consumed {seen} of {count} from {topic}"
    consumer.commit(asynchronous=False)


def test_groups_describe_all_groups(tools: Tools) -> None:
    tools.kafka(
        "kafka-topics",
        "--create",
        "--topic",
        "kp-grp",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
    ).ok()
    _produce(tools, "kp-grp", [f"k{i}:v{i}" for i in range(40)])
    _wait_for_end_offsets(tools, "kp-grp", 40)
    # an empty group with committed offsets (no member owns them) ...
    idle = _consumer(tools, "kp-idle-group", "idle-client")
    _consume_and_commit(idle, "kp-grp", 40)
    idle.close()
    # ... and a stable group whose one member owns all three partitions, with lag
    active = _consumer(tools, "kp-active", "active-client")
    try:
        _consume_and_commit(active, "kp-grp", 40)
        _produce(tools, "kp-grp", [f"k{i}:more{i}" for i in range(9)])
        _wait_for_end_offsets(tools, "kp-grp", 49)
        for args in (
            ("--describe", "--all-groups", "--offsets", "--verbose"),
            ("--describe", "--all-groups"),
            ("--describe", "--group", "kp-idle-group", "--group", "kp-active", "--verbose"),
            ("--describe", "--group", "kp-nope", "--offsets"),
        ):
            command = "groups describe"
            both = Both(
                tools.kafka("kafka-consumer-groups", *args),
                tools.ktool(command, *(a for a in args if a != "--describe")),
            )
            lines = _same(both)
            if args[1] == "--all-groups" and "--verbose" in args:
                assert lines[0].split()[3] == "LEADER-EPOCH"
                groups = [line.split()[0] for line in lines[1:] if not line.startswith("GROUP")]
                assert {"kp-active", "kp-idle-group"} <= set(groups)
                lags = [line.split()[6] for line in lines if line.startswith("kp-active ")]
                assert len(lags) == 3 and sum(map(int, lags)) == 9
                assert "Consumer group 'kp-idle-group' has no active members." in both.ktool.err
    finally:
        active.close()


# ---- console consumer ---------------------------------------------------------------------------
def test_consume(tools: Tools) -> None:
    tools.kafka(
        "kafka-topics",
        "--create",
        "--topic",
        "kp-cons",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    ).ok()
    _produce(tools, "kp-cons", [f"k{i}:v{i}" for i in range(20)])
    _wait_for_end_offsets(tools, "kp-cons", 20)
    shown = ("print.key=true", "print.offset=true", "print.partition=true", "print.timestamp=true")
    for args in (
        ("--topic", "kp-cons", "--partition", "0", "--from-beginning", "--max-messages", "4"),
        (
            "--topic",
            "kp-cons",
            "--partition",
            "1",
            "--offset",
            "2",
            "--max-messages",
            "3",
            *(a for p in shown for a in ("--formatter-property", p)),
        ),
        (
            "--topic",
            "kp-cons",
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            "2",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator=|",
            "--formatter-property",
            "print.headers=true",
        ),
    ):
        both = tools.both("kafka-console-consumer", "consume", *args)
        lines = _same(both)
        count = int(args[args.index("--max-messages") + 1])
        assert len(lines) == count
        assert f"Processed a total of {count} messages" in both.ktool.err
    assert lines[0].startswith("NO_HEADERS|k")


# ---- console producer ---------------------------------------------------------------------------
def test_produce(tools: Tools) -> None:
    for topic in ("kp-prod-kafka", "kp-prod-ktool"):
        tools.kafka(
            "kafka-topics",
            "--create",
            "--topic",
            topic,
            "--partitions",
            "3",
            "--replication-factor",
            "2",
        ).ok()
    lines = "".join(f"key-{i}:value {i}\n" for i in range(30))
    reader = ("--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
    tools.kafka("kafka-console-producer", "--topic", "kp-prod-kafka", *reader, stdin=lines).ok()
    tools.ktool("produce", "--topic", "kp-prod-ktool", *reader, stdin=lines).ok()
    _wait_for_end_offsets(tools, "kp-prod-kafka", 30)
    _wait_for_end_offsets(tools, "kp-prod-ktool", 30)
    ends = tools.kafka("kafka-get-offsets", "--topic", "kp-prod-kafka").ok().lines
    counts = {int(line.split(":")[1]): int(line.split(":")[2]) for line in ends}
    shown = ("print.key=true", "print.offset=true", "print.partition=true")
    for partition, count in counts.items():
        read = [
            tools.kafka(
                "kafka-console-consumer",
                "--topic",
                topic,
                "--partition",
                str(partition),
                "--from-beginning",
                "--max-messages",
                str(count),
                *(a for p in shown for a in ("--formatter-property", p)),
            )
            .ok()
            .lines
            for topic in ("kp-prod-kafka", "kp-prod-ktool")
        ]
        assert read[0] == read[1]
        assert len(read[1]) == count
    assert sum(counts.values()) == 30 and len([c for c in counts.values() if c]) > 1
    refused = tools.ktool("produce", "--topic", "kp-prod-ktool", *reader, stdin="no-separator\n")
    assert refused.exit != 0
    assert "No key separator found on line number 1: 'no-separator'" in refused.err


def _blocks(lines: list[str]) -> dict[str, list[str]]:
    """kafka-broker-api-versions output by broker header line (the order of brokers may
    differ between the tools)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in lines:
        if line.endswith("-> ("):
            current = blocks.setdefault(line, [])
        else:
            current.append(line)
    return blocks


def test_broker_api_versions(tools: Tools) -> None:
    both = tools.both("kafka-broker-api-versions", "broker-api-versions")
    assert both.kafka.exit == both.ktool.exit == 0, (both.kafka, both.ktool)
    kafka, ours = _blocks(both.kafka.lines), _blocks(both.ktool.lines)
    assert sorted(kafka) == sorted(ours) and len(ours) == len(tools.cluster.nodes)
    for header, theirs_lines in kafka.items():
        assert len(theirs_lines) == len(ours[header]), (theirs_lines, ours[header])
        for theirs, mine in zip(theirs_lines, ours[header], strict=True):
            if theirs == mine:
                continue
            # ktool's client speaks the inter-broker APIs that Kafka 4's client dropped
            assert theirs.split(": ")[0] in {
                "\tLeaderAndIsr(4)",
                "\tStopReplica(5)",
                "\tUpdateMetadata(6)",
                "\tControlledShutdown(7)",
            }, (theirs, mine)
            assert theirs.split("[")[0] == mine.split("[")[0]
            assert theirs.endswith("[unusable: node too new],") and "[usable: " in mine
    document = json.loads(tools.ktool("broker-api-versions", "--json").out)
    assert sorted(b["id"] for b in document["brokers"]) == sorted(tools.cluster.nodes)
    produce = document["brokers"][0]["apis"][0]
    assert produce["name"] == "Produce(0)" and produce["usable"] == produce["max_version"]
