"""Kafka's Java client (kafka-clients 4.4) and Kafka Streams against a real 3-node knode cluster.

The Java side lives in tests/java (built by `make java`): `Clients` (producer with each codec,
classic-protocol consumer groups: range, cooperative-sticky, static membership), `AdminCalls`
(the Admin API, one JSON line per call) and `WordCount` (Kafka Streams). Each program is one
JVM start that does many things and prints JSON lines; the assertions are here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.java_support import java_command, run_program, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    java_command()  # fail at once when tests/java is not built
    base = tmp_path_factory.mktemp("java-clients")
    with KnodeCluster(
        base,
        node_count=3,
        settings=["group.initial.rebalance.delay.ms=0"],
        start=False,
    ) as c:
        start_slowly(c)
        yield c


def _dump_batches(cluster: KnodeCluster, topic: str) -> list[str]:
    """`ktool dump-log` batch lines of every replica of every partition of `topic`."""
    segments = [
        str(segment)
        for node in cluster.nodes.values()
        for segment in sorted(node.data_dir.glob(f"{topic}-*/*.log"))
    ]
    completed = subprocess.run(
        [sys.executable, "-m", "trafka.tools.ktool", "dump-log", *segments],
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.count("Dumping ") == len(segments) == 3 * len(cluster.nodes)
    return [line for line in completed.stdout.splitlines() if "baseOffset:" in line]


def test_producer_all_codecs_idempotent_and_group_consumer(cluster: KnodeCluster) -> None:
    count = 1500
    records, _ = run_program("Clients", "codecs", cluster.bootstrap_servers, "jc", str(count))
    by_codec = {r["codec"]: r for r in records}
    assert sorted(by_codec) == ["gzip", "lz4", "snappy", "zstd"]
    for codec, result in by_codec.items():
        assert result["sent"] == count, result
        assert result["sent_offsets_dense"] is True, result
        assert result["received"] == count, result
        assert result["distinct"] == count, result
        assert result["content_ok"] is True, result
        assert result["ordered"] is True, result
        assert result["committed_total"] == count, result
        # on disk (every replica): the producer's codec, and a producer id and sequences
        # because the Java producer is idempotent by default
        batches = _dump_batches(cluster, f"jc-{codec}")
        assert batches, codec
        for line in batches:
            assert f"compresscodec: {codec}" in line, line
            producer_id = int(re.search(r"producerId: (-?\d+)", line).group(1))  # type: ignore[union-attr]
            assert producer_id >= 0, line
            assert "baseSequence: -1" not in line, line


def test_consumer_assignors_and_static_membership(cluster: KnodeCluster) -> None:
    records, _ = run_program("Clients", "groups", cluster.bootstrap_servers, "jg")
    by_strategy = {r["strategy"]: r for r in records}

    rng = by_strategy["range"]
    assert rng["one_member_covers"] and rng["two_members_cover"], rng
    parts = rng["after_two"]
    # RangeAssignor: contiguous halves of the 6 partitions
    assert sorted([parts["range-a"]["partitions"], parts["range-b"]["partitions"]]) == [
        [0, 1, 2],
        [3, 4, 5],
    ]
    # eager protocol: the first member gave up everything before the new assignment
    assert "revoked:[0,1,2,3,4,5]" in parts["range-a"]["events"], parts

    coop = by_strategy["cooperative-sticky"]
    assert coop["one_member_covers"] and coop["two_members_cover"], coop
    parts = coop["after_two"]
    a, b = parts["cooperative-sticky-a"], parts["cooperative-sticky-b"]
    assert len(a["partitions"]) == 3 and len(b["partitions"]) == 3, parts
    assert not set(a["partitions"]) & set(b["partitions"]), parts
    # cooperative: only the partitions that moved were revoked, never all six
    revoked = [e for e in a["events"] if e.startswith("revoked:")]
    assert revoked == [f"revoked:{json.dumps(b['partitions']).replace(' ', '')}"], a["events"]

    static = by_strategy["static"]
    assert static["stable"] and static["rejoined"], static
    # same group.instance.id back within the session timeout: same partitions, no rebalance
    assert static["partitions_after"] == static["partitions_before"], static
    assert static["generation_after"] == static["generation_before"], static
    assert static["other_generation_after"] == static["generation_before"], static
    # the other member saw no rebalance while the static member was away and back
    assert static["other_events_while_away"] == [], static


def test_admin_client(cluster: KnodeCluster) -> None:
    records, _ = run_program("AdminCalls", cluster.bootstrap_servers, "ja")
    calls: dict[str, dict[str, Any]] = {r["call"]: r for r in records}

    def ok(name: str) -> dict[str, Any]:
        result = calls[name]
        assert result["ok"] is True, result
        return result

    def error(name: str) -> str:
        result = calls[name]
        assert result["ok"] is False, result
        return str(result["error"])

    assert ok("describeCluster")["nodes"] == [1, 2, 3]
    assert ok("describeCluster")["controller"] in (1, 2, 3)
    assert ok("createTopics.validateOnly")["exists_after"] is False
    assert ok("createTopics") == {
        "call": "createTopics",
        "partitions": 2,
        "rf": 2,
        "topic_id_set": True,
        "ok": True,
    }
    assert error("createTopics.duplicate").startswith("TopicExistsException")
    assert error("createTopics.rf_too_big").startswith("InvalidReplicationFactorException")
    assert {"ja-admin", "ja-doomed"} <= set(ok("listTopics")["names"])
    described = ok("describeTopics")
    assert described["internal"] is False
    assert sorted(described["partitions"]) == ["0", "1"]
    for info in described["partitions"].values():
        assert len(info["replicas"]) == 2 and sorted(info["isr"]) == sorted(info["replicas"])
        assert info["leader"] == info["replicas"][0]
    assert error("describeTopics.unknown").startswith("UnknownTopicOrPartitionException")

    topic_configs = ok("describeConfigs.topic")["configs"]
    assert topic_configs["retention.ms"] == {
        "value": "3600000",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "default": False,
        "read_only": False,
    }
    assert topic_configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    altered = ok("incrementalAlterConfigs.topic")["configs"]
    assert altered["retention.ms"]["value"] == "7200000"
    assert altered["cleanup.policy"]["value"] == "compact,delete"
    assert error("incrementalAlterConfigs.topic_invalid").startswith(
        "InvalidConfigurationException"
    )
    broker = ok("describeConfigs.broker")["configs"]
    assert broker["node.id"]["value"] == "1" and broker["node.id"]["read_only"] is True
    default = ok("incrementalAlterConfigs.broker_default")
    assert default["default"]["log.retention.ms"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert default["broker1"]["log.retention.ms"]["value"] == "604800001"

    assert ok("createPartitions")["count"] == 4
    assert error("createPartitions.decrease").startswith("InvalidPartitionsException")
    assert ok("listOffsets") == {
        "call": "listOffsets",
        "earliest": 0,
        "latest": 100,
        "max_timestamp_offset": ok("listOffsets")["max_timestamp_offset"],
        "ok": True,
    }
    assert 0 <= ok("listOffsets")["max_timestamp_offset"] < 100
    assert ok("deleteRecords")["low_watermark"] == 40
    assert ok("deleteRecords")["earliest_after"] == 40
    assert error("deleteRecords.beyond_end").startswith("OffsetOutOfRangeException")
    dirs = ok("describeLogDirs")["brokers"]
    assert sorted(dirs) == ["1", "2", "3"]
    holders = [b for b, d in dirs.items() if "ja-admin-0" in d["replica_sizes"]]
    assert len(holders) == 2
    # the leader's replica holds the 100 records (a follower may still be fetching)
    assert max(dirs[b]["replica_sizes"]["ja-admin-0"] for b in holders) > 0

    # a replica added after DeleteRecords starts inside a batch and still catches up
    moved = ok("alterPartitionReassignments")
    assert moved["listed_while_moving"] is True
    assert moved["pending_after"] == 0, moved
    assert moved["partition0"]["replicas"] == moved["to"], moved
    assert sorted(moved["partition0"]["isr"]) == sorted(moved["to"]), moved
    assert error("alterPartitionReassignments.cancel_none").startswith(
        "NoReassignmentInProgressException"
    )
    elected = ok("electLeaders.preferred")
    assert elected["results"]["ja-admin-0"] in ("elected", "ElectionNotNeededException")
    assert elected["partition0"]["leader"] == moved["to"][0]

    active = ok("describeConsumerGroups.active")
    assert (active["state"], active["members"], active["assignor"]) == ("Stable", 1, "range")
    assert active["assigned"] == 4 and active["simple"] is False
    # Kafka: a classic group with members refuses offsets from outside the generation
    assert error("alterConsumerGroupOffsets.active").startswith("UnknownMemberIdException")
    # groupId:type:protocol:state (the type from ListGroups v5, KIP-848)
    assert "ja-group:Classic:consumer:Empty" in ok("listGroups")["groups"], ok("listGroups")
    offsets = ok("listConsumerGroupOffsets")["offsets"]
    assert offsets["ja-admin-0"] == {"offset": 70, "metadata": "meta"}
    assert offsets["ja-admin-1"] == {"offset": 0, "metadata": ""}
    assert ok("describeConsumerGroups.empty")["state"] == "Empty"
    assert ok("alterConsumerGroupOffsets")["offset"] == 55
    assert ok("deleteConsumerGroupOffsets")["left"] == ["ja-admin-0"]
    assert ok("deleteConsumerGroups")["still_listed"] is False
    assert error("deleteConsumerGroups.unknown").startswith("GroupIdNotFoundException")

    quorum = ok("describeMetadataQuorum")
    assert quorum["voters"] == [1, 2, 3] and quorum["leader"] in (1, 2, 3)
    assert quorum["high_watermark"] > 0 and quorum["observers"] == 0
    # no feature flags (KIP-584): empty, as docs/status.md says
    features = ok("describeFeatures")
    assert features["finalized"] == [] and features["supported"] == []
    assert ok("deleteTopics")["gone"] is True
    assert error("deleteTopics.unknown").startswith("UnknownTopicOrPartitionException")


# ---- Kafka Streams ----------------------------------------------------------------------------
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def _lines(start: int, count: int) -> list[str]:
    """Line i holds the words WORDS[j] for j <= i % 8: word j appears a known number of times."""
    return [" ".join(WORDS[: (i % len(WORDS)) + 1]).upper() for i in range(start, start + count)]


def _expected(lines: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in lines:
        for word in line.lower().split():
            counts[word] = counts.get(word, 0) + 1
    return counts


class _Latest:
    """Reads the output topic from the start, keeping the last count per word."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.counts: dict[str, int] = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-reader",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])

    def poll(self) -> dict[str, int]:
        for message in self.consumer.consume(num_messages=1000, timeout=0.5):
            if message.error() is None:
                key = message.key() or b""
                value = message.value() or b""
                self.counts[key.decode()] = int.from_bytes(value, "big", signed=True)
        return self.counts


def _produce(bootstrap: str, topic: str, lines: list[str], first: int) -> None:
    # idempotent: a produce that waits on the killed broker's ISR slot can time out after it
    # was appended, and a plain producer's retry would then write the lines twice
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i, line in enumerate(lines, start=first):
        producer.produce(topic, key=str(i).encode(), value=line.encode())
    assert producer.flush(60) == 0


def test_streams_word_count_survives_broker_sigkill(cluster: KnodeCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    app, source, sink = "jwc", "jwc-lines", "jwc-counts"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(source, 3, replication_factor=3), NewTopic(sink, 3, replication_factor=3)]
    ).values():
        future.result(30)
    stderr = (tmp_path / "streams.stderr.log").open("wb")
    process = subprocess.Popen(
        [
            *java_command(),
            "trafka.javatests.WordCount",
            bootstrap,
            app,
            source,
            sink,
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    events: list[dict[str, Any]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):
                events.append(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    latest = _Latest(bootstrap, sink)
    try:
        wait_until(
            lambda: any(e.get("state") == "RUNNING" for e in events),
            timeout_s=120,
            what="Kafka Streams to reach RUNNING",
        )
        first = _lines(0, 400)
        _produce(bootstrap, source, first, 0)
        wait_until(
            lambda: latest.poll() == _expected(first),
            timeout_s=120,
            interval_s=0.1,
            what=f"word counts of the first batch (events {events})",
        )
        time.sleep(2)  # several commit intervals: the input offsets are committed

        topics = admin.list_topics(timeout=30).topics
        assert f"{app}-counts-repartition" in topics
        assert f"{app}-counts-changelog" in topics

        # SIGKILL the leader of the input topic's partition 0, then feed the second batch
        leader = topics[source].partitions[0].leader
        cluster.kill(leader)
        survivors = ",".join(cluster.address(n) for n in cluster.nodes if n != leader)
        second = _lines(400, 600)
        _produce(survivors, source, second, 400)
        wait_until(
            lambda: latest.poll() == _expected(first + second),
            timeout_s=180,
            interval_s=0.1,
            what=f"word counts after the SIGKILL of node {leader} (events {events})",
        )
        assert not [e for e in events if "error" in e], events
        # the changelog holds the store: its last value per word is the final count
        changelog = Consumer({"bootstrap.servers": survivors, "group.id": "jwc-changelog-reader"})
        partitions = admin.list_topics(timeout=30).topics[f"{app}-counts-changelog"].partitions
        changelog.assign([TopicPartition(f"{app}-counts-changelog", p, 0) for p in partitions])
        stored: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while stored != _expected(first + second) and time.monotonic() < deadline:
            for message in changelog.consume(num_messages=1000, timeout=0.5):
                if message.error() is None and message.value() is not None:
                    stored[(message.key() or b"").decode()] = int.from_bytes(
                        message.value() or b"", "big", signed=True
                    )
        changelog.close()
        assert stored == _expected(first + second)
    finally:
        latest.consumer.close()
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr.close()
        assert process.stdout is not None
        process.stdout.close()
