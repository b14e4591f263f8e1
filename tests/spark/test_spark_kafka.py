"""Spark's own Kafka connector (spark-sql-kafka-0-10) against a real knode (issue 17 item 2).

Each Spark job runs in a Python process of its own (tests/spark/kafka_jobs.py) with the jars
`make spark-kafka` copies. One knode per test; confluent-kafka produces the input.

* batch reads with startingOffsets/endingOffsets as JSON per partition, earliest/latest and
  -2/-1 give exactly the expected rows; batch `write.format("kafka")` and streaming
  `writeStream.format("kafka")` land in trafka and read back exactly;
* Structured Streaming from trafka to Parquet with a checkpoint: the driver (the Python
  process and its JVM) is SIGKILLed after a few committed micro-batches, started again with
  the same checkpoint, and the Parquet output holds every record exactly once.
  SPARK_KAFKA_RECORDS (default 20,000) sets the count; docs/spark-kafka.md records a run
  with 1,000,000.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.spark.kafka_jobs import REPO, connector_jars
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

RECORDS = int(os.environ.get("SPARK_KAFKA_RECORDS", "20000"))
JOB_TIMEOUT_S = float(os.environ.get("SPARK_KAFKA_TIMEOUT", "900"))


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    if not connector_jars():
        pytest.fail("Spark's Kafka connector is not fetched: run `make spark-kafka`")


def _create(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, parts, 1) for name, parts in topics])
    for future in futures.values():
        future.result(timeout=60)


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000}
    )
    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    for partition, key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    assert failed == []


def _job(name: str, args: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    result = tmp_path / f"{name}-result.json"
    log = tmp_path / f"{name}.log"
    with log.open("wb") as err:
        code = subprocess.run(
            ["nice", "-n", "5", sys.executable, "-m", "tests.spark.kafka_jobs", name,
             json.dumps(args), str(result)],
            cwd=REPO, stdout=err, stderr=err, timeout=JOB_TIMEOUT_S, check=False,
        ).returncode  # fmt: skip
    assert code == 0, log.read_text(errors="replace")[-4000:]
    loaded: dict[str, Any] = json.loads(result.read_text())
    return loaded


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[list[Any]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        rows: list[list[Any]] = []
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        deadline = time.monotonic() + 60
        while len(rows) < sum(ends.values()) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            rows.append(
                [message.partition(), message.offset(), bytes(message.key() or b"").decode(),
                 bytes(message.value() or b"").decode()]
            )  # fmt: skip
        return sorted(rows)
    finally:
        consumer.close()


def test_batch_reads_offsets_and_writes_back(tmp_path: Path) -> None:
    with KnodeCluster(tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        _create(bootstrap, ("events", 2), ("batch-out", 2), ("stream-out", 2))
        # partition 0: k0..k9 at offsets 0..9; partition 1: k10..k14 at offsets 0..4
        records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
        records += [(1, f"k{i}".encode(), f"v{i}".encode()) for i in range(10, 15)]
        _produce(bootstrap, "events", records)
        everything: list[list[Any]] = sorted(
            [p, o, f"k{i}", f"v{i}"]
            for p, o, i in [(0, i, i) for i in range(10)] + [(1, i - 10, i) for i in range(10, 15)]
        )
        ranges = {
            "all": ("earliest", "latest"),
            "json": (
                json.dumps({"events": {"0": 3, "1": -2}}),
                json.dumps({"events": {"0": 7, "1": 2}}),
            ),
            "json-latest": (
                json.dumps({"events": {"0": 8, "1": 4}}),
                json.dumps({"events": {"0": -1, "1": -1}}),
            ),
            "empty": ("earliest", json.dumps({"events": {"0": 0, "1": 0}})),
        }
        result = _job(
            "batch",
            {
                "bootstrap": bootstrap,
                "topic": "events",
                "reads": ranges,
                "sink_topic": "batch-out",
                "stream_sink_topic": "stream-out",
                "write_count": 20,
                "checkpoint": str(tmp_path / "kafka-sink-checkpoint"),
            },
            tmp_path,
        )
        reads = result["reads"]
        assert reads["all"] == everything
        assert reads["json"] == [r for r in everything if (r[0] == 0 and 3 <= r[1] < 7)] + [
            r for r in everything if r[0] == 1 and r[1] < 2
        ]
        assert reads["json-latest"] == [
            [0, 8, "k8", "v8"],
            [0, 9, "k9", "v9"],
            [1, 4, "k14", "v14"],
        ]
        assert reads["empty"] == []
        assert [f["topic"] for f in result["first"]] == ["events"]
        assert result["first"][0]["timestampType"] == 0  # CreateTime
        assert abs(result["first"][0]["ts_ms"] - time.time() * 1000) < 600_000

        batch_out = _consume_all(bootstrap, "batch-out", 2)
        assert sorted((r[2], r[3], r[0]) for r in batch_out) == sorted(
            (f"b{i}", f"batch-{i}", i % 2) for i in range(20)
        )
        stream_out = _consume_all(bootstrap, "stream-out", 2)
        assert sorted((r[2], r[3]) for r in stream_out) == sorted(
            (f"k{i}", f"V{i}") for i in range(15)
        )
        assert result["stream_progress_rows"] == 15


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return 0
    return sum(1 for p in commits.iterdir() if p.name.isdigit())


@pytest.mark.soak  # minutes of Spark: `make soak`, not `make test` (docs/status.md)
def test_streaming_to_parquet_survives_a_driver_sigkill(tmp_path: Path) -> None:
    partitions = 4
    with KnodeCluster(tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        _create(bootstrap, ("copied", partitions))
        _produce(
            bootstrap,
            "copied",
            [(i % partitions, b"", str(i).encode()) for i in range(RECORDS)],
        )
        per_trigger = max(RECORDS // 10, 1000)
        args = {
            "bootstrap": bootstrap,
            "topic": "copied",
            "per_trigger": per_trigger,
            "out": str(tmp_path / "out"),
            "checkpoint": str(tmp_path / "checkpoint"),
        }
        checkpoint = tmp_path / "checkpoint"
        first_log = (tmp_path / "first-run.log").open("wb")
        first = subprocess.Popen(
            ["nice", "-n", "5", sys.executable, "-m", "tests.spark.kafka_jobs", "stream",
             json.dumps(args), str(tmp_path / "first.json")],
            cwd=REPO, stdout=first_log, stderr=first_log, start_new_session=True,
        )  # fmt: skip
        try:
            # Midway: at least two micro-batches committed, the job still running.
            wait_until(
                lambda: _committed_batches(checkpoint) >= 2 or first.poll() is not None,
                timeout_s=JOB_TIMEOUT_S,
                interval_s=0.05,
                what="two committed micro-batches",
            )
            assert first.poll() is None, "the first run finished before it could be killed"
            # SIGKILL the driver: the Python process and the JVM it started (its group).
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(30)
            first_log.close()
        killed_after = _committed_batches(checkpoint)
        assert killed_after < -(-RECORDS // per_trigger), "killed after the last batch"
        assert not (tmp_path / "first.json").exists()

        summary = _job("stream", args, tmp_path)
        assert summary == {
            "rows": RECORDS,
            "values": RECORDS,
            "positions": RECORDS,
            "low": 0,
            "high": RECORDS - 1,
        }
        assert _committed_batches(checkpoint) > killed_after
