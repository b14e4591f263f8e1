"""Replication throttles (KIP-73) on real processes: `ktool reassign execute --throttle`
moves a partition at about the set rate, an unthrottled move is much faster, and
`ktool reassign verify` removes every throttle it set (issue 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTINGS = [
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "auto.leader.rebalance.enable=false",
]
RATE_BYTES_PER_SECOND = 1_000_000
PAYLOAD_BYTES = 4 * 1024 * 1024
MESSAGE_BYTES = 1024
FETCH_BURST_BYTES = 5 * 512 * 1024
"""Allowance over rate * time: a fetch is served whenever the rate is at or under the bound,
so two fetches of up to `replica.fetch.max.bytes` (1 MiB; the producer's batches are just
under 1 MB) pass at once before the rate exceeds 1 MB/s. An unthrottled move shows all
4 MiB within a tenth of a second."""
LONG_MAX = str(2**63 - 1)


def _ktool(cluster: KnodeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    address = ",".join(cluster.address(n) for n, node in cluster.nodes.items() if node.running)
    return subprocess.run(
        [sys.executable, "-m", "trafka.tools.ktool", *args, "--bootstrap-server", address],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _replicas(admin: AdminClient, topic: str) -> list[int]:
    return list(admin.list_topics(topic, timeout=5).topics[topic].partitions[0].replicas)


def _log_bytes(cluster: KnodeCluster, node_id: int, topic: str) -> int:
    directory = cluster.nodes[node_id].data_dir / f"{topic}-0"
    if not directory.exists():
        return 0
    return sum(path.stat().st_size for path in directory.glob("*.log"))


def _configs(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, object]:
    futures = admin.describe_configs([ConfigResource(kind, name)])
    (future,) = futures.values()
    return dict(future.result(timeout=10))


def _plan(path: Path, topic: str, replicas: list[int]) -> Path:
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}
        )
    )
    return path


def _move(
    cluster: KnodeCluster, admin: AdminClient, plan: Path, topic: str, *extra: str
) -> tuple[str, list[tuple[float, int]]]:
    """Execute the plan and sample the partition's log size on node 2 every 0.1 s from
    before ktool starts until node 2 alone holds it: (ktool's stdout, [(seconds, bytes)])."""
    address = ",".join(cluster.address(n) for n in cluster.nodes)
    started = time.monotonic()
    samples: list[tuple[float, int]] = []
    command = [sys.executable, "-m", "trafka.tools.ktool", "reassign", "execute"]
    command += ["--reassignment-json-file", str(plan), *extra, "--bootstrap-server", address]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:

            def moved() -> bool:
                samples.append((time.monotonic() - started, _log_bytes(cluster, 2, topic)))
                return process.poll() is not None and _replicas(admin, topic) == [2]

            wait_until(moved, timeout_s=40, interval_s=0.1, what=f"{topic} to move to node 2")
            stdout, stderr = process.communicate(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, stdout + stderr
    return stdout, samples


def _transfer(samples: list[tuple[float, int]]) -> tuple[float, float]:
    """(last time with no data on node 2, first time with all of it)."""
    assert samples[0][1] == 0, samples[:3]
    last_empty = max(seconds for seconds, size in samples if size == 0)
    complete = min(seconds for seconds, size in samples if size >= PAYLOAD_BYTES)
    return last_empty, complete


def test_throttled_reassignment_moves_at_the_rate_and_verify_clears_it(tmp_path: Path) -> None:
    cluster = KnodeCluster(tmp_path, node_count=2, settings=SETTINGS, start=False)
    with cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=90)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=1, replica_assignment=[[1]]) for t in ("fast", "slow")]
        )
        for future in futures.values():
            future.result(timeout=30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for _ in range(PAYLOAD_BYTES // MESSAGE_BYTES):
            for topic in ("fast", "slow"):
                producer.produce(topic, os.urandom(MESSAGE_BYTES), partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0

        # Unthrottled: the whole log moves in one go.
        _, samples = _move(cluster, admin, _plan(tmp_path / "fast.json", "fast", [2]), "fast")
        fast_start, fast_end = _transfer(samples)

        # Throttled at 1 MB/s on both sides.
        plan = _plan(tmp_path / "slow.json", "slow", [2])
        stdout, samples = _move(
            cluster, admin, plan, "slow", "--throttle", str(RATE_BYTES_PER_SECOND)
        )
        assert (
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed." in stdout
        )
        assert f"The inter-broker throttle limit was set to {RATE_BYTES_PER_SECOND} B/s" in stdout
        slow_start, slow_end = _transfer(samples)
        for seconds, size in samples:
            allowed = RATE_BYTES_PER_SECOND * max(0.0, seconds - slow_start) + FETCH_BURST_BYTES
            assert size <= allowed, (seconds - slow_start, size, samples)
        # 4 MiB at 1 MB/s: about 3 s after the first 1 MiB burst; unthrottled is far faster.
        assert slow_end - slow_start >= 2.0, samples
        assert fast_end - fast_start < (slow_end - slow_start) / 2, (fast_end - fast_start, samples)

        # The throttles are visible while the reassignment is done but not verified.
        for broker in ("1", "2"):
            configs = _configs(admin, ResourceType.BROKER, broker)
            assert configs["leader.replication.throttled.rate"].value == "1000000"  # type: ignore[attr-defined]
            assert configs["follower.replication.throttled.rate"].value == "1000000"  # type: ignore[attr-defined]
        topic_configs = _configs(admin, ResourceType.TOPIC, "slow")
        assert topic_configs["leader.replication.throttled.replicas"].value == "0:1"  # type: ignore[attr-defined]
        assert topic_configs["follower.replication.throttled.replicas"].value == "0:2"  # type: ignore[attr-defined]

        verified = _ktool(cluster, "reassign", "verify", "--reassignment-json-file", str(plan))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "Reassignment of partition slow-0 is completed." in verified.stdout
        assert "Clearing broker-level throttles on brokers 1,2" in verified.stdout
        assert "Clearing topic-level throttles on topic slow" in verified.stdout
        for broker in ("1", "2"):
            configs = _configs(admin, ResourceType.BROKER, broker)
            for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
                entry = configs[key]
                assert entry.value == LONG_MAX, (broker, key, entry)  # type: ignore[attr-defined]
                assert entry.source == ConfigSource.DEFAULT_CONFIG.value  # type: ignore[attr-defined]
        topic_configs = _configs(admin, ResourceType.TOPIC, "slow")
        for key in (
            "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas",
        ):
            entry = topic_configs[key]
            assert entry.value in ("", None), (key, entry)  # type: ignore[attr-defined]
            assert entry.source == ConfigSource.DEFAULT_CONFIG.value  # type: ignore[attr-defined]
