"""The pure registry (trafka.metrics): counters, histograms, error codes, family names."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trafka.metrics.errors import error_codes
from trafka.metrics.families import NodeState, PartitionState, error_name, families
from trafka.metrics.registry import TIME_BUCKETS_MS, Histogram, NodeMetrics
from trafka.net.kio_shape import build
from trafka.node.metrics_service import parse_metrics_listener


def _exposition(counters: NodeMetrics, state: NodeState) -> dict[str, float]:
    class Collector:
        def collect(self) -> object:
            return families(counters, state)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    hist = Histogram()
    for value in (0.1, 0.5, 3.0, 99999.0):
        hist.observe(value)
    buckets = hist.cumulative()
    assert buckets[0] == ("0.5", 2)  # le=0.5 holds 0.1 and 0.5
    assert dict(buckets)["5.0"] == 3
    assert buckets[-1] == ("+Inf", 4)
    assert len(buckets) == len(TIME_BUCKETS_MS) + 1
    assert hist.count == 4 and hist.total == pytest.approx(100002.6)


def test_topic_counters_and_totals() -> None:
    metrics = NodeMetrics()
    metrics.produced("a", 3, 300)
    metrics.produced("a", 2, 100)
    metrics.produced("b", 1, 50)
    metrics.fetched("a", 400)
    metrics.produce_failed("b")
    out = _exposition(metrics, NodeState())
    assert out["kafka_server_brokertopicmetrics_messagesin_total{topic=a}"] == 5
    assert out["kafka_server_brokertopicmetrics_messagesin_total{}"] == 6
    assert out["kafka_server_brokertopicmetrics_bytesin_total{topic=a}"] == 400
    assert out["kafka_server_brokertopicmetrics_bytesout_total{topic=a}"] == 400
    assert out["kafka_server_brokertopicmetrics_failedproducerequests_total{topic=b}"] == 1
    assert out["kafka_server_brokertopicmetrics_failedfetchrequests_total{}"] == 0


def test_request_metrics_errors_and_times() -> None:
    metrics = NodeMetrics()
    times = {"queue_ms": 1.0, "local_ms": 2.0, "remote_ms": 3.0, "send_ms": 4.0}
    metrics.request_done("Produce", [0, 0, 6], **times)
    metrics.request_done("Produce", [0], **times)
    out = _exposition(metrics, NodeState())
    assert out["kafka_network_requestmetrics_requests_total{request=Produce}"] == 2
    assert out["kafka_network_requestmetrics_errors_total{error=NONE,request=Produce}"] == 3
    key = "kafka_network_requestmetrics_errors_total{error=NOT_LEADER_OR_FOLLOWER,request=Produce}"
    assert out[key] == 1
    assert out["kafka_network_requestmetrics_totaltimems_sum{request=Produce}"] == 20.0
    assert out["kafka_network_requestmetrics_totaltimems_bucket{le=10.0,request=Produce}"] == 2
    assert out["kafka_network_requestmetrics_totaltimems_bucket{le=5.0,request=Produce}"] == 0
    assert out["kafka_network_requestmetrics_remotetimems_count{request=Produce}"] == 2


def test_group_responses_count_rebalances_and_commits() -> None:
    metrics = NodeMetrics()
    zero = {"queue_ms": 0.0, "local_ms": 0.0, "remote_ms": 0.0, "send_ms": 0.0}

    class Join:
        member_id = "m-1"
        leader = "m-1"

    class Follower:
        member_id = "m-2"
        leader = "m-1"

    metrics.request_done("JoinGroup", [0], response=Join(), **zero)
    metrics.request_done("JoinGroup", [0], response=Follower(), **zero)
    metrics.request_done("JoinGroup", [27], response=Join(), **zero)
    metrics.request_done("OffsetCommit", [0, 0, 25], **zero)
    assert metrics.rebalances == 1
    assert metrics.offset_commits == 2


def test_snapshot_is_a_copy() -> None:
    metrics = NodeMetrics()
    metrics.produced("a", 1, 10)
    metrics.request_done("Fetch", [], queue_ms=0, local_ms=0, remote_ms=0, send_ms=0)
    snap = metrics.snapshot()
    metrics.produced("a", 1, 10)
    metrics.request_done("Fetch", [], queue_ms=0, local_ms=0, remote_ms=0, send_ms=0)
    assert snap.messages_in == {"a": 1}
    assert snap.requests["Fetch"].requests == 1
    assert snap.requests["Fetch"].times["totaltimems"].count == 1


def test_connections_per_listener() -> None:
    metrics = NodeMetrics()
    metrics.connection_opened("PLAINTEXT")
    metrics.connection_opened("PLAINTEXT")
    metrics.connection_closed("PLAINTEXT")
    out = _exposition(metrics, NodeState())
    assert out["kafka_server_socket_server_metrics_connection_count{listener=PLAINTEXT}"] == 1
    assert (
        out["kafka_server_socket_server_metrics_connection_creation_total{listener=PLAINTEXT}"] == 2
    )
    assert out["kafka_server_socket_server_metrics_connection_close_total{listener=PLAINTEXT}"] == 1


def test_state_gauges() -> None:
    state = NodeState(
        partitions=(
            PartitionState("t", 0, 100, 1, 0, 10, leader=True, under_replicated=True),
            PartitionState("t", 1, 50, 2, 5, 7, leader=False),
        ),
        active_controller=True,
        global_topics=1,
        global_partitions=2,
        groups_by_state={"Stable": 2, "Empty": 1},
        quorum_leader=3,
        quorum_term=7,
    )
    out = _exposition(NodeMetrics(), state)
    assert out["kafka_server_replicamanager_partitioncount{}"] == 2
    assert out["kafka_server_replicamanager_leadercount{}"] == 1
    assert out["kafka_server_replicamanager_underreplicatedpartitions{}"] == 1
    assert out["kafka_log_log_logendoffset{partition=0,topic=t}"] == 10
    assert out["kafka_log_log_logstartoffset{partition=1,topic=t}"] == 5
    assert out["kafka_log_log_numlogsegments{partition=1,topic=t}"] == 2
    assert out["kafka_log_log_size{partition=0,topic=t}"] == 100
    assert out["kafka_controller_kafkacontroller_activecontrollercount{}"] == 1
    assert out["kafka_coordinator_group_groupmetadatamanager_numgroupsstable{}"] == 2
    assert out["kafka_coordinator_group_groupmetadatamanager_numgroups{}"] == 3
    assert out["kafka_server_raft_metrics_current_epoch{}"] == 7


def test_error_codes_of_a_kio_response() -> None:
    from kio.schema.produce.v9.response import ProduceResponse

    response = build(
        ProduceResponse,
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {"index": 0, "error_code": 0},
                        {"index": 1, "error_code": int(ErrorCode.not_leader_or_follower)},
                    ],
                }
            ],
        },
    )
    assert sorted(error_codes(response)) == [0, 6]
    assert error_codes(object()) == []
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER" and error_name(0) == "NONE"
    assert error_name(31999) == "31999"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
        ("http://:9404", ("127.0.0.1", 9404)),
        ("http://0.0.0.0:9404/", ("0.0.0.0", 9404)),
    ],
)
def test_metrics_listener_parses(url: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_listener(url) == expected


@pytest.mark.parametrize("url", ["9404", "https://h:1", "http://h", "http://h:1/x"])
def test_bad_metrics_listener(url: str) -> None:
    with pytest.raises(ValueError, match=r"metrics\.listener"):
        parse_metrics_listener(url)


def test_quota_and_replication_throttle_families() -> None:
    from trafka.metrics.families import QuotaSensorState, ReplicationThrottleState

    state = NodeState(
        quota_sensors=(
            QuotaSensorState("Produce", "", "slow", 1048000.0, 1048576.0, 2500, 3),
            QuotaSensorState("Request", "alice", "", 12.5, 10.0, 100, 1),
            QuotaSensorState("ConnectionCreation", "10.0.0.1", "", 2.0, 3.0, 0, 4),
        ),
        quota_throttle_time_ms_totals={"Produce": 2500, "Request": 100},
        replication_throttles=(
            ReplicationThrottleState("leader", 5000.0, 10_000),
            ReplicationThrottleState("follower", 0.0, -1),
        ),
    )
    out = _exposition(NodeMetrics(), state)
    assert out["kafka_server_produce_byte_rate{client_id=slow,user=}"] == 1048000.0
    assert out["kafka_server_produce_quota{client_id=slow,user=}"] == 1048576.0
    assert out["kafka_server_produce_throttle_time_ms_total{client_id=slow,user=}"] == 2500
    assert out["kafka_server_produce_throttled_total{client_id=slow,user=}"] == 3
    assert out["kafka_server_request_request_time{client_id=,user=alice}"] == 12.5
    assert out["kafka_server_connectioncreation_throttled_total{ip=10.0.0.1}"] == 4
    assert out["kafka_server_quota_throttle_time_ms_total{quota_type=Produce}"] == 2500
    assert out["kafka_server_leaderreplication_byte_rate{}"] == 5000.0
    assert out["kafka_server_leaderreplication_throttled_rate{}"] == 10_000
    assert out["kafka_server_followerreplication_throttled_rate{}"] == -1


def test_snapshot_carries_every_field() -> None:
    """A field added to NodeMetrics but not to `snapshot` would scrape as its default."""
    import dataclasses

    metrics = NodeMetrics()
    metrics.produced("a", 1, 10)
    metrics.request_done("Fetch", [], queue_ms=0, local_ms=0, remote_ms=0, send_ms=0)
    metrics.leader_election_ms.observe(3)
    metrics.quorum_commit_latency_ms.observe(2)
    for name in ("isr_shrinks", "isr_expands", "leader_elections", "unclean_leader_elections"):
        setattr(metrics, name, 5)
    metrics.connection_opened("PLAINTEXT")
    snap = metrics.snapshot()
    for spec in dataclasses.fields(NodeMetrics):
        mine, theirs = getattr(metrics, spec.name), getattr(snap, spec.name)
        if hasattr(mine, "counts"):  # Histogram: no __eq__
            assert (mine.counts, mine.total) == (theirs.counts, theirs.total), spec.name
        elif isinstance(mine, dict) and mine and hasattr(next(iter(mine.values())), "times"):
            assert mine.keys() == theirs.keys(), spec.name
        else:
            assert mine == theirs, spec.name
