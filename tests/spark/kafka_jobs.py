"""Spark jobs through Spark's own Kafka connector, each run as a separate Python process.

    python -m tests.spark.kafka_jobs batch  '{"bootstrap": ..., "topic": ..., ...}' RESULT.json
    python -m tests.spark.kafka_jobs stream '{"bootstrap": ..., "topic": ..., ...}' RESULT.json

A process of its own for each job because the connector's jars must be on the driver's
classpath when its JVM starts (`spark.jars` at the first session; a pytest process that already
runs the audit tests' session could not add them), and because the streaming test SIGKILLs the
driver. The jars are the ones `make spark-kafka` copies (tests/spark/connector). Each job
writes what it saw to RESULT.json; the tests assert on it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONNECTOR_JARS = REPO / "tests" / "spark" / "connector" / "target" / "dependency"


def connector_jars() -> list[Path]:
    return sorted(CONNECTOR_JARS.glob("*.jar"))


def session(master: str, app: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = connector_jars()
    if not jars:
        raise SystemExit(f"no connector jars in {CONNECTOR_JARS}: run `make spark-kafka`")
    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rows(frame: Any) -> list[list[Any]]:
    """(partition, offset, key, value) sorted, keys and values as text."""
    picked = frame.selectExpr(
        "partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v"
    )
    return sorted([r.partition, r.offset, r.k, r.v] for r in picked.collect())


def batch(args: dict[str, Any]) -> dict[str, Any]:
    """Batch reads with startingOffsets/endingOffsets, then batch and streaming writes."""
    spark = session("local[2]", "trafka-spark-kafka-batch")
    bootstrap, topic = args["bootstrap"], args["topic"]

    def read(starting: str, ending: str) -> list[list[Any]]:
        frame = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", starting)
            .option("endingOffsets", ending)
            .load()
        )
        return _rows(frame)

    result: dict[str, Any] = {"reads": {}}
    for name, (starting, ending) in args["reads"].items():
        result["reads"][name] = read(starting, ending)
    # The whole frame's columns once: topic and timestamps as Spark's source gives them.
    first = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: [0]}))
        .option("startingOffsets", json.dumps({topic: {"0": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 1}}))
        .load()
        .collect()
    )
    result["first"] = [
        {
            "topic": r.topic,
            "timestampType": r.timestampType,
            "ts_ms": int(r.timestamp.timestamp() * 1000),
        }
        for r in first
    ]

    # Batch write: key/value/partition columns into the sink topic.
    out = args["sink_topic"]
    written = spark.createDataFrame(
        [(f"b{i}", f"batch-{i}", i % 2) for i in range(args["write_count"])],
        "key string, value string, partition int",
    )
    (
        written.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .save()
    )
    # Streaming write: the source topic copied, upper-cased, with availableNow.
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "UPPER(CAST(value AS STRING)) AS value")
    )
    query = (
        stream.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", args["stream_sink_topic"])
        .option("checkpointLocation", args["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    result["stream_progress_rows"] = sum(p["numInputRows"] for p in query.recentProgress)
    spark.stop()
    return result


def stream(args: dict[str, Any]) -> dict[str, Any]:
    """Copy a topic to Parquet with a checkpoint until caught up; then read the output back.

    `trigger(availableNow=True)` with `maxOffsetsPerTrigger` makes many small micro-batches
    (the test kills the process between two of them) and stops once every record present at
    start is written. The read-back goes through Spark's Parquet reader, which only sees the
    files the sink's `_spark_metadata` log committed.
    """
    spark = session(args.get("master", "local[2]"), "trafka-spark-kafka-stream")
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args["bootstrap"])
        .option("subscribe", args["topic"])
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args["per_trigger"]))
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", args["out"])
        .option("checkpointLocation", args["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    from pyspark.sql import functions as F

    back = spark.read.parquet(args["out"])
    summary = back.agg(
        F.count("*").alias("rows"),
        F.countDistinct("value").alias("values"),
        F.countDistinct("partition", "offset").alias("positions"),
        F.min(F.col("value").cast("long")).alias("low"),
        F.max(F.col("value").cast("long")).alias("high"),
    ).collect()[0]
    spark.stop()
    counts: dict[str, Any] = summary.asDict()
    return counts


JOBS = {"batch": batch, "stream": stream}


def main() -> None:
    job, raw, result_path = sys.argv[1], sys.argv[2], sys.argv[3]
    result = JOBS[job](json.loads(raw))
    Path(result_path).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
