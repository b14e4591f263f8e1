"""Run Kafka's Java client, CLI tools and Kafka Streams (tests/java) from pytest.

`make java` (part of `make test`) builds tests/java: the programs under src/main/java in
target/classes and every jar they need in target/dependency. When that has not happened the
tests FAIL with the command to run: they are not skipped.

Kafka's CLI tools run through their main classes, as `bin/kafka-*.sh` runs them
(`kafka-run-class.sh MAIN ARGS` is `java -cp CLASSPATH MAIN ARGS`). A JVM start costs 1-3 s
on the 2-core test machine, so most runs go through one long-lived JVM, `ToolShell`, that
calls each tool's `main(String[])` in turn with stdin/stdout/stderr swapped for buffers and
Kafka's `Exit` procedure turned into an exit code; `run_tool_process` runs a tool in a JVM of
its own, exactly as the shell script would (a few tests use it to show both agree).
"""

from __future__ import annotations

import base64
import json
import queue
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.support.cluster import KnodeCluster

REPO = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO / "tests" / "java"
CLASSES = JAVA_DIR / "target" / "classes"
DEPENDENCIES = JAVA_DIR / "target" / "dependency"

# `bin/<script>.sh` of Kafka 4.4 -> the main class it runs (all in kafka-tools).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
}

# Client-side JVM flags: C1 only and a small heap start faster on 2 shared cores.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss1m", "-Xmx512m"]


def start_slowly(cluster: KnodeCluster, timeout_s: float = 240.0) -> None:
    """Start every node and wait longer than KnodeCluster does: with the JVMs of these tests
    beside other suites on 2 shared cores, a node's start-up can exceed 90 s."""
    for node_id in cluster.nodes:
        cluster.start(node_id, wait=False)
    for node_id in cluster.nodes:
        cluster.wait_ready(node_id, timeout_s=timeout_s)
    settle(cluster)


def settle(cluster: KnodeCluster, timeout_s: float = 120.0) -> None:
    """One acks=all message into each partition of a fresh RF-3 topic: every broker leads a
    partition and follows the others before the tests start timing their own calls."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    count = len(cluster.nodes)
    topic = "java-support-warm-up"
    admin.create_topics([NewTopic(topic, count, replication_factor=count)])[topic].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    delivered: list[object] = []
    for partition in range(count):
        producer.produce(
            topic,
            value=b"warm-up",
            partition=partition,
            on_delivery=lambda error, _message: delivered.append(error),
        )
    assert producer.flush(timeout_s) == 0, f"warm-up produce did not finish in {timeout_s}s"
    assert delivered == [None] * count, delivered


def java_command() -> list[str]:
    """`java -cp ...` for tests/java, or fail the test with what to run."""
    java = shutil.which("java")
    if java is None:
        pytest.fail(
            "the Java tests need a JDK 17+: apt-get install -y openjdk-17-jdk-headless maven"
        )
    if not (CLASSES / "trafka" / "javatests" / "ToolShell.class").is_file() or not any(
        DEPENDENCIES.glob("kafka-clients-*.jar")
    ):
        pytest.fail("tests/java is not built: run `make java` (Maven fetches Kafka's jars)")
    return [java, *JVM_FLAGS, "-cp", f"{CLASSES}:{DEPENDENCIES}/*"]


@dataclass(frozen=True)
class ToolResult:
    exit: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]

    def ok(self) -> ToolResult:
        """Self, after asserting the tool exited 0 (the message shows its output)."""
        assert self.exit == 0, f"exit {self.exit}\nstdout:\n{self.out}\nstderr:\n{self.err}"
        return self


def run_tool_process(
    tool: str, *args: str, stdin: str | None = None, timeout_s: float = 120.0
) -> ToolResult:
    """One tool in a JVM of its own: `java -cp CLASSPATH MAIN ARGS` as kafka-run-class.sh."""
    completed = subprocess.run(
        [*java_command(), TOOLS[tool], *args],
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return ToolResult(completed.returncode, completed.stdout, completed.stderr)


class ToolShell:
    """One JVM running trafka.javatests.ToolShell; `run(tool, *args)` calls the tool's main."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [*java_command(), "trafka.javatests.ToolShell"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        ready = self._next(timeout_s=60.0)
        assert ready.get("ready") is True, ready

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next(self, timeout_s: float) -> dict[str, object]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            self.close()
            raise AssertionError(f"ToolShell gave no answer in {timeout_s}s") from None
        if line is None:
            raise AssertionError(f"ToolShell exited with {self._process.wait()}")
        answer: dict[str, object] = json.loads(line)
        return answer

    def run(
        self, tool: str, *args: str, stdin: str | None = None, timeout_s: float = 120.0
    ) -> ToolResult:
        main = TOOLS.get(tool, tool)
        fields = [main, base64.b64encode(stdin.encode()).decode() if stdin else "-", *args]
        assert not any("\t" in field or "\n" in field for field in fields), fields
        assert self._process.stdin is not None
        self._process.stdin.write("\t".join(fields) + "\n")
        self._process.stdin.flush()
        answer = self._next(timeout_s)
        return ToolResult(int(str(answer["exit"])), str(answer["out"]), str(answer["err"]))

    def close(self) -> None:
        if self._process.poll() is None:
            if self._process.stdin is not None:
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reader.join(timeout=10)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> ToolShell:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def run_program(
    main_class: str, *args: str, timeout_s: float = 300.0
) -> tuple[list[dict[str, Any]], str]:
    """Run one of tests/java's programs; return its JSON stdout lines and its stderr."""
    completed = subprocess.run(
        [*java_command(), f"trafka.javatests.{main_class}", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    records = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    assert completed.returncode == 0, (
        f"{main_class} exited {completed.returncode}\nstdout:\n{completed.stdout[-4000:]}"
        f"\nstderr:\n{completed.stderr[-6000:]}"
    )
    return records, completed.stderr
