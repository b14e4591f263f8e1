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


def _batch_ids(folder: Path) -> set[int]:
    """The micro-batch ids with a file in a checkpoint's `offsets` or `commits` folder."""
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def _committed_batches(checkpoint: Path) -> int:
    return len(_batch_ids(checkpoint / "commits"))


def _in_flight(checkpoint: Path) -> int | None:
    """A micro-batch planned (its offsets written) but not committed, after two committed."""
    committed = _batch_ids(checkpoint / "commits")
    planned = _batch_ids(checkpoint / "offsets") - committed
    return min(planned) if len(committed) >= 2 and planned else None


def _uncommitted_files(out: Path) -> int:
    """Parquet files in the sink's folder that its `_spark_metadata` log does not list."""
    listed = set()
    metadata = out / "_spark_metadata"
    if metadata.is_dir():
        for log in metadata.iterdir():
            if not log.name.split(".")[0].isdigit() or log.name.endswith(".tmp"):
                continue  # a log file being written (Spark renames it into place)
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    listed.add(Path(json.loads(line)["path"].split(":", 1)[-1]).name)
    return sum(1 for p in out.glob("*.parquet") if p.name not in listed)


@pytest.mark.soak  # minutes of Spark: `make soak`, not `make test` (docs/status.md)
def test_streaming_to_parquet_survives_a_driver_sigkill(tmp_path: Path) -> None:
    partitions = 4
    started = time.monotonic()
    with KnodeCluster(tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        _create(bootstrap, ("copied", partitions))
        _produce(
            bootstrap,
            "copied",
            [(i % partitions, b"", str(i).encode()) for i in range(RECORDS)],
        )
        produced_s = time.monotonic() - started
        per_trigger = max(RECORDS // 10, 1000)
        batches = -(-RECORDS // per_trigger)
        out = tmp_path / "out"
        args = {
            "bootstrap": bootstrap,
            "topic": "copied",
            "per_trigger": per_trigger,
            "out": str(out),
            "checkpoint": str(tmp_path / "checkpoint"),
        }
        checkpoint = tmp_path / "checkpoint"
        first_log = (tmp_path / "first-run.log").open("wb")
        first_started = time.monotonic()
        first = subprocess.Popen(
            ["nice", "-n", "5", sys.executable, "-m", "tests.spark.kafka_jobs", "stream",
             json.dumps(args), str(tmp_path / "first.json")],
            cwd=REPO, stdout=first_log, stderr=first_log, start_new_session=True,
        )  # fmt: skip
        try:
            # Midway and mid-batch: two micro-batches committed and the next one planned (its
            # offsets written, so a restart must run that same range again) but not committed;
            # best with its first Parquet files on disk and not yet in the sink's log (which
            # readers must then ignore): up to two more batches are given to catch that.
            def kill_point() -> bool:
                if first.poll() is not None:
                    return True
                if _in_flight(checkpoint) is None:
                    return False
                return _uncommitted_files(out) > 0 or _committed_batches(checkpoint) >= 4

            wait_until(
                kill_point,
                timeout_s=JOB_TIMEOUT_S,
                interval_s=0.02,
                what="two committed micro-batches and a third in flight",
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
        first_s = time.monotonic() - first_started
        killed_after = _committed_batches(checkpoint)
        in_flight = _in_flight(checkpoint)
        assert in_flight is not None, "the kill did not land inside a planned micro-batch"
        planned = (checkpoint / "offsets" / str(in_flight)).read_text()
        orphans = _uncommitted_files(out)
        assert killed_after < batches, "killed after the last batch"
        assert not (tmp_path / "first.json").exists()

        restart_started = time.monotonic()
        summary = _job("stream", args, tmp_path)
        restart_s = time.monotonic() - restart_started
        print(
            f"\nspark-kafka streaming: {RECORDS} records in {partitions} partitions, "
            f"{batches} micro-batches of {per_trigger}; produced in {produced_s:.0f} s; "
            f"first run SIGKILLed after {first_s:.0f} s with {killed_after} batches committed, "
            f"batch {in_flight} in flight ({orphans} uncommitted parquet file(s) on disk); "
            f"restart finished in {restart_s:.0f} s; output rows {summary['rows']}, "
            f"distinct (partition, offset) {summary['positions']}, "
            f"duplicates {summary['rows'] - summary['positions']}, "
            f"missing {RECORDS - summary['positions']}; "
            f"total {time.monotonic() - started:.0f} s"
        )
        assert summary == {
            "rows": RECORDS,
            "values": RECORDS,
            "positions": RECORDS,
            "low": 0,
            "high": RECORDS - 1,
        }
        # The restart ran the in-flight batch over the range the killed run had planned.
        assert (checkpoint / "offsets" / str(in_flight)).read_text() == planned
        assert _committed_batches(checkpoint) == batches
