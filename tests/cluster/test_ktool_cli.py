"""ktool's `--json`, progress lines, `--command-config` and console producer/consumer options
on one real 2-node knode cluster, next to Kafka 4.4's own tools (the shared ToolShell JVM).

* `--json` documents carry the same values as Kafka's tools print on the same cluster
  (kafka-log-dirs' JSON report parsed: equal; get-offsets, metadata-quorum, configs,
  consumer-groups, broker-api-versions: their values).
* `reassign execute --wait` draws its progress line on stderr when stderr is a terminal (a
  pty here), and never when it is a pipe or with `--quiet`.
* `--command-config FILE` reaches every command that talks to the cluster: with a SASL
  config against this PLAINTEXT cluster each one fails, without it each one succeeds.
* `produce` with headers and zstd reads back through kafka-console-consumer exactly as what
  kafka-console-producer wrote from the same lines; `consume --group` and Kafka's console
  consumer resume from each other's commits.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from typer.testing import CliRunner

from tests.cluster.java_support import ToolResult, ToolShell, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.client import command_config
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "kj"
GROUP = "kj-group"


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("ktool-json")
    with KnodeCluster(
        base, node_count=2, settings=["group.initial.rebalance.delay.ms=0"], start=False
    ) as c:
        start_slowly(c)
        _populate(c)
        yield c


def _populate(cluster: KnodeCluster) -> None:
    """TOPIC (2 partitions, RF 2) with 20 keyed records, GROUP's committed offsets on it."""
    assert _ktool(cluster, "topics", "create", TOPIC, "--partitions", "2",
                  "--replication-factor", "2").exit == 0  # fmt: skip
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(20):
        producer.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 20 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 20
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _ktool(cluster: KnodeCluster, *args: str, stdin: str | None = None) -> ToolResult:
    """ktool in-process, `--command-config` handled as `trafka.tools.ktool.main` does."""
    argv, config_file = command_config.strip_option(
        [*args, "--bootstrap-server", cluster.bootstrap_servers]
    )
    command_config.use(None if config_file is None else command_config.load(Path(config_file)))
    try:
        result = CliRunner().invoke(app, argv, input=stdin)
    finally:
        command_config.use(None)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return ToolResult(result.exit_code, result.stdout, result.stderr)


def _json(cluster: KnodeCluster, *args: str) -> object:
    result = _ktool(cluster, *args, "--json").ok()
    return json.loads(result.out)


def _kafka(
    shell: ToolShell, cluster: KnodeCluster, tool: str, *args: str, stdin: str | None = None
) -> ToolResult:
    return shell.run(tool, "--bootstrap-server", cluster.bootstrap_servers, *args, stdin=stdin)


# ---- --json against Kafka's tools ------------------------------------------------------------


def test_log_dirs_json_is_kafkas_report(shell: ToolShell, cluster: KnodeCluster) -> None:
    def settled() -> bool:  # both replicas written out: the sizes no longer move
        document = _json(cluster, "log-dirs", "--describe", "--topic-list", TOPIC)
        assert isinstance(document, dict)
        sizes: dict[str, set[int]] = {}
        for broker in document["brokers"]:
            for log_dir in broker["logDirs"]:
                for p in log_dir["partitions"]:
                    sizes.setdefault(p["partition"], set()).add(p["size"])
        return len(sizes) == 2 and all(len(s) == 1 for s in sizes.values())

    wait_until(settled, timeout_s=60, what="the replicas of kj to match")
    kafka = _kafka(shell, cluster, "kafka-log-dirs", "--describe", "--topic-list", TOPIC).ok()
    ours = _json(cluster, "log-dirs", "--describe", "--topic-list", TOPIC)
    assert ours == json.loads(kafka.lines[2])


def test_get_offsets_and_topics_json(shell: ToolShell, cluster: KnodeCluster) -> None:
    kafka = _kafka(shell, cluster, "kafka-get-offsets", "--topic", TOPIC).ok()
    expected = {}
    for line in kafka.lines:
        topic, partition, offset = line.rsplit(":", 2)
        expected[(topic, int(partition))] = int(offset)
    document = _json(cluster, "get-offsets", "--topic", TOPIC)
    assert isinstance(document, dict)
    assert {(p["topic"], p["partition"]): p["offset"] for p in document["partitions"]} == expected
    assert sum(expected.values()) == 20
    assert TOPIC in _json(cluster, "topics", "list")  # type: ignore[operator]
    described = _json(cluster, "topics", "describe", TOPIC)
    assert isinstance(described, list) and len(described) == 1


def test_quorum_json_matches_kafka_metadata_quorum(shell: ToolShell, cluster: KnodeCluster) -> None:
    kafka = _kafka(shell, cluster, "kafka-metadata-quorum", "describe", "--status").ok()
    fields = dict(re.split(r":\s+", line, maxsplit=1) for line in kafka.lines)
    status = _json(cluster, "quorum", "status")
    assert isinstance(status, dict)
    assert status["cluster_id"] == fields["ClusterId"]
    assert status["leader_id"] == int(fields["LeaderId"])
    assert status["leader_epoch"] == int(fields["LeaderEpoch"])
    assert status["current_voters"] == [v["id"] for v in json.loads(fields["CurrentVoters"])]
    assert status["current_observers"] == []
    rows = _json(cluster, "quorum", "replication")
    assert isinstance(rows, list)
    assert [r["status"] for r in rows] == ["Leader", "Follower"]
    assert rows[0]["node_id"] == status["leader_id"]
    assert _json(cluster, "quorum", "ls", "/brokers/ids") == ["1", "2"]


def test_configs_json_matches_kafka_configs(shell: ToolShell, cluster: KnodeCluster) -> None:
    assert _ktool(cluster, "configs", "--alter", "--entity-type", "topics", "--entity-name",
                  TOPIC, "--add-config", "retention.ms=3600000").exit == 0  # fmt: skip
    args = ("--describe", "--entity-type", "topics", "--entity-name", TOPIC)
    kafka = _kafka(shell, cluster, "kafka-configs", *args).ok()
    document = _json(cluster, "configs", *args)
    assert isinstance(document, list)
    [entity] = document
    assert entity["entity_type"] == "topics" and entity["entity_name"] == TOPIC
    [config] = entity["configs"]
    assert (config["name"], config["value"], config["source"]) == (
        "retention.ms",
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    synonyms = ", ".join(f"{s['source']}:{s['name']}={s['value']}" for s in config["synonyms"])
    assert kafka.lines[1].strip() == (
        f"retention.ms=3600000 sensitive=false synonyms={{{synonyms}}}"
    )
    quotas_args = ("--entity-type", "users", "--entity-name", "alice")
    assert _ktool(cluster, "configs", "--alter", *quotas_args,
                  "--add-config", "producer_byte_rate=1024").exit == 0  # fmt: skip
    quotas = _json(cluster, "configs", "--describe", *quotas_args)
    assert quotas == {
        "quotas": [{"entity": {"user": "alice"}, "quotas": {"producer_byte_rate": 1024.0}}],
        "scram_credentials": [],
    }


def test_groups_and_api_versions_json(shell: ToolShell, cluster: KnodeCluster) -> None:
    kafka = _kafka(shell, cluster, "kafka-consumer-groups", "--describe", "--group", GROUP).ok()
    header, *rows = [line.split() for line in kafka.lines]
    column = header.index("CURRENT-OFFSET")
    expected = {(row[1], int(row[2])): int(row[column]) for row in rows}
    document = _json(cluster, "groups", "describe", "--group", GROUP)
    assert isinstance(document, list)
    assert {(r["topic"], r["partition"]): r["current_offset"] for r in document} == expected
    listed = _json(cluster, "groups", "list")
    assert {"group": GROUP, "state": "Empty"} in listed  # type: ignore[operator]

    kafka = _kafka(shell, cluster, "kafka-broker-api-versions").ok()
    ids = [int(m) for m in re.findall(r"\(id: (\d+) rack", kafka.out)]
    versions = _json(cluster, "broker-api-versions")
    assert isinstance(versions, dict)
    assert [b["id"] for b in versions["brokers"]] == sorted(ids)
    assert _json(cluster, "reassign", "list") == []


def test_transactions_json_matches_kafka_transactions(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "kj-txn"}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, key=b"t", value=b"in a transaction")
    producer.commit_transaction(60)
    kafka = _kafka(shell, cluster, "org.apache.kafka.tools.TransactionsCommand", "list").ok()
    header, *rows = [line.split() for line in kafka.lines]
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    listed = _json(cluster, "transactions", "list")
    assert listed == [
        {
            "transactional_id": row[0],
            "coordinator": int(row[1]),
            "producer_id": int(row[2]),
            "transaction_state": row[3],
        }
        for row in rows
    ]
    assert [r["transactional_id"] for r in listed] == ["kj-txn"]  # type: ignore[union-attr]
    described = _json(cluster, "transactions", "describe", "--transactional-id", "kj-txn")
    assert isinstance(described, dict)
    assert described["transaction_state"] == "CompleteCommit"
    assert described["topic_partitions"] == []
    kafka = _kafka(shell, cluster, "org.apache.kafka.tools.TransactionsCommand", "describe",
                   "--transactional-id", "kj-txn").ok()  # fmt: skip
    header, row = [line.split() for line in kafka.lines]
    values = dict(zip(header, row, strict=False))  # TopicPartitions may be empty
    for column, key in [
        ("CoordinatorId", "coordinator_id"),
        ("ProducerId", "producer_id"),
        ("ProducerEpoch", "producer_epoch"),
        ("TransactionTimeoutMs", "transaction_timeout_ms"),
        ("CurrentTransactionStartTimeMs", "current_transaction_start_time_ms"),
    ]:
        expected = None if values[column] == "None" else int(values[column])
        assert described[key] == expected, column
    assert described["transaction_state"] == values["TransactionState"]


# ---- progress: a terminal only ---------------------------------------------------------------


def _run_ktool(*args: str, terminal: bool) -> tuple[int, str, str]:
    """`python -m trafka.tools.ktool ARGS` with stderr on a pseudo-terminal or a pipe."""
    command = [sys.executable, "-m", "trafka.tools.ktool", *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif process.poll() is not None:
            break
    os.close(master)
    assert process.stdout is not None
    out = process.stdout.read()
    process.stdout.close()
    return process.wait(timeout=60), out, b"".join(chunks).decode(errors="replace")


def _plan(tmp_path: Path, name: str, replicas: list[int]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "kr", "partition": 0, "replicas": replicas}]}
        )
    )
    return str(path)


def test_reassign_wait_shows_progress_on_a_terminal_only(
    cluster: KnodeCluster, tmp_path: Path
) -> None:
    assert _ktool(cluster, "topics", "create", "kr", "--partitions", "1",
                  "--replica-assignment", "1").exit == 0  # fmt: skip
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 50})
    for i in range(3000):
        producer.produce("kr", value=os.urandom(500))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)

    # A terminal, throttled to ~500 kB/s: the ~1.5 MB move takes seconds, with bytes shown.
    code, out, err = _run_ktool(
        "reassign", "execute", "--reassignment-json-file", _plan(tmp_path, "to2", [2]),
        "--throttle", "500000", "--wait", *bootstrap, terminal=True,
    )  # fmt: skip
    assert code == 0, (out, err)
    assert "Reassignment of partition kr-0 is completed." in out
    assert "Clearing broker-level throttles" in out
    assert "Reassignment: 1/1 partition(s) done" in err, err
    assert "\r" in err and err.endswith("\n")
    assert "copied to new replicas" in err, err

    # A pipe: the same command, no progress line at all.
    code, out, err = _run_ktool(
        "reassign", "execute", "--reassignment-json-file", _plan(tmp_path, "to1", [1]),
        "--wait", *bootstrap, terminal=False,
    )  # fmt: skip
    assert code == 0, (out, err)
    assert "Reassignment of partition kr-0 is completed." in out
    assert "partition(s) done" not in err and "\r" not in err

    # A terminal but --quiet: none either.
    code, out, err = _run_ktool(
        "reassign", "execute", "--reassignment-json-file", _plan(tmp_path, "to2", [2]),
        "--wait", "--quiet", *bootstrap, terminal=True,
    )  # fmt: skip
    assert code == 0, (out, err)
    assert "partition(s) done" not in err

    verified = _ktool(
        cluster, "reassign", "verify", "--reassignment-json-file", _plan(tmp_path, "to2", [2]),
        "--wait", "--json",
    ).ok()  # fmt: skip
    document = json.loads(verified.out)
    assert document["complete"] is True and document["throttles_removed"] is True
    assert document["partitions"][0]["replicas"] == [2]
    assert "Clearing broker-level throttles" in verified.err


# ---- --command-config reaches every command ---------------------------------------------------

CLUSTER_COMMANDS: list[tuple[str, ...]] = [
    ("topics", "list"),
    ("topics", "describe", TOPIC),
    ("groups", "list"),
    ("groups", "describe", "--group", GROUP),
    ("transactions", "list"),
    ("quorum", "status"),
    ("quorum", "replication"),
    ("quorum", "ls", "/brokers/ids"),
    ("reassign", "list"),
    ("configs", "--describe", "--entity-type", "topics", "--entity-name", TOPIC),
    ("configs", "--describe", "--entity-type", "users"),
    ("get-offsets", "--topic", TOPIC),
    ("log-dirs", "--describe"),
    ("broker-api-versions",),
    ("consume", "--topic", TOPIC, "--partition", "0", "--from-beginning", "--max-messages", "1"),
    ("preferred-elect", "--all-topic-partitions"),
]


def test_command_config_reaches_every_command(cluster: KnodeCluster, tmp_path: Path) -> None:
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
    )
    for args in CLUSTER_COMMANDS:
        plain = _ktool(cluster, *args)
        assert plain.exit == 0, (args, plain)
        started = time.monotonic()
        secured = _ktool(cluster, *args, "--command-config", str(sasl))
        assert secured.exit != 0, (args, secured)
        assert "SASL" in secured.err, (args, secured)  # refused for the config, not otherwise
        assert time.monotonic() - started < 30, args
    produced = _ktool(cluster, "produce", "--topic", TOPIC, "--command-config", str(sasl),
                      stdin="x\n")  # fmt: skip
    assert produced.exit != 0 and "SASL" in produced.err
    assert _ktool(cluster, "produce", "--topic", TOPIC, stdin="x\n").exit == 0


# ---- console producer and consumer ------------------------------------------------------------

LINES = [f"h1:a{i},h2:b\tk{i % 3}:value {i}" for i in range(12)] + ["nohdr:x\tk9:last"]
"""Headers, a key and a value per line (parse.headers, parse.key with key.separator `:`)."""


def _batches(cluster: KnodeCluster, topic: str) -> list[Any]:
    from trafka.log.records import iter_batches

    segment = cluster.nodes[1].data_dir / f"{topic}-0" / "00000000000000000000.log"
    return list(iter_batches(segment.read_bytes()))


def test_produce_headers_and_zstd_read_back_like_kafkas(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    for topic in ("kh-ktool", "kh-kafka"):
        assert _ktool(cluster, "topics", "create", topic, "--partitions", "1",
                      "--replication-factor", "2").exit == 0  # fmt: skip
    reader = ["--reader-property", "parse.headers=true", "--reader-property", "parse.key=true",
              "--reader-property", "key.separator=:"]  # fmt: skip
    stdin = "".join(f"{line}\n" for line in LINES)
    produced = _ktool(cluster, "produce", "--topic", "kh-ktool", *reader,
                      "--compression-codec", "zstd", stdin=stdin)  # fmt: skip
    assert produced.exit == 0, produced
    _kafka(shell, cluster, "kafka-console-producer", "--topic", "kh-kafka", *reader,
           "--compression-codec", "zstd", stdin=stdin).ok()  # fmt: skip
    printed = {}
    for topic in ("kh-ktool", "kh-kafka"):
        printed[topic] = _kafka(
            shell, cluster, "kafka-console-consumer", "--topic", topic, "--from-beginning",
            "--max-messages", str(len(LINES)), "--formatter-property", "print.headers=true",
            "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
        ).ok().lines  # fmt: skip
    assert printed["kh-ktool"] == printed["kh-kafka"]
    assert printed["kh-ktool"][0] == "Offset:0\th1:a0,h2:b\tk0\tvalue 0"
    assert len(printed["kh-ktool"]) == len(LINES)
    wait_until(lambda: len(_batches(cluster, "kh-ktool")) > 0, timeout_s=30, what="the segment")
    codecs = {int(b.header.compression) for b in _batches(cluster, "kh-ktool")}
    assert codecs == {4}  # zstd
    assert len(_batches(cluster, "kh-ktool")) == 1  # 13 short lines: one batch
    refused = _ktool(cluster, "produce", "--topic", "kh-ktool", *reader, stdin="no tab\n")
    assert refused.exit != 0
    assert "No headers delimiter found on line number 1: 'no tab'" in refused.err


def _committed(shell: ToolShell, cluster: KnodeCluster, group: str) -> int:
    described = _kafka(shell, cluster, "kafka-consumer-groups", "--describe", "--group", group)
    header, *rows = [line.split() for line in described.ok().lines]
    return int(rows[0][header.index("CURRENT-OFFSET")])


def test_consume_group_and_kafkas_console_consumer_resume_from_each_other(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    assert _ktool(cluster, "topics", "create", "kg", "--partitions", "1",
                  "--replication-factor", "2").exit == 0  # fmt: skip
    stdin = "".join(f"v{i}\n" for i in range(30))
    assert _ktool(cluster, "produce", "--topic", "kg", stdin=stdin).exit == 0
    first = _ktool(cluster, "consume", "--topic", "kg", "--group", "cg", "--from-beginning",
                   "--max-messages", "4").ok()  # fmt: skip
    assert first.lines == ["v0", "v1", "v2", "v3"]
    assert _committed(shell, cluster, "cg") == 4

    kafka = _kafka(shell, cluster, "kafka-console-consumer", "--topic", "kg", "--group", "cg",
                   "--max-messages", "3").ok()  # fmt: skip
    assert kafka.lines == ["v4", "v5", "v6"]  # Kafka resumes at ktool's commit
    resumed_at = _committed(shell, cluster, "cg")  # Kafka commits its position on close
    assert 7 <= resumed_at <= 30

    again = _ktool(cluster, "consume", "--topic", "kg", "--group", "cg", "--timeout-ms",
                   "1500").ok()  # fmt: skip
    assert again.lines == [f"v{i}" for i in range(resumed_at, 30)]  # ktool resumes at Kafka's
    assert _committed(shell, cluster, "cg") == 30
