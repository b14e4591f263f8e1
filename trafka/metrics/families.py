"""Prometheus families from a counter snapshot and the node's state, with Kafka's metric
names as the Prometheus JMX exporter's Kafka rules write them (docs/metrics.md):

* ``kafka.<domain><type=T, name=NPerSec, k=v><>Count`` -> ``kafka_<domain>_<t>_<n>_total{k="v"}``
  (a counter; e.g. ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``);
* ``kafka.<domain><type=T, name=N, k=v><>Value`` -> ``kafka_<domain>_<t>_<n>{k="v"}`` (a gauge);
* the ``...TimeMs`` timers -> a Prometheus histogram of that name (``_bucket``, ``_sum``,
  ``_count``; the JMX exporter writes ``_count`` and quantiles);
* ``kafka.server<type=socket-server-metrics, listener=L>`` attributes ->
  ``kafka_server_socket_server_metrics_<attribute>{listener="L"}``, likewise
  ``group-coordinator-metrics`` and ``raft-metrics``.

Names are lower case (the exporter's ``lowercaseOutputName: true``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from .registry import TIMES, Histogram, NodeMetrics, total

BTM = "kafka_server_brokertopicmetrics_"
REQ = "kafka_network_requestmetrics_"
RM = "kafka_server_replicamanager_"
CTRL = "kafka_controller_kafkacontroller_"
CSTATS = "kafka_controller_controllerstats_"
GMM = "kafka_coordinator_group_groupmetadatamanager_"
GCM = "kafka_server_group_coordinator_metrics_"
LOG = "kafka_log_log_"
SOCK = "kafka_server_socket_server_metrics_"
RAFT = "kafka_server_raft_metrics_"
FSC = "kafka_server_fetchsessioncache_"

GROUP_STATES: tuple[tuple[str, str], ...] = (
    ("PreparingRebalance", "numgroupspreparingrebalance"),
    ("CompletingRebalance", "numgroupscompletingrebalance"),
    ("Stable", "numgroupsstable"),
    ("Dead", "numgroupsdead"),
    ("Empty", "numgroupsempty"),
)
"""Kafka's GroupMetadataManager gauges NumGroups<State> (plus NumGroups, the total)."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition with a replica on this node, read at scrape time."""

    topic: str
    partition: int
    size: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    leader: bool
    under_replicated: bool = False
    under_min_isr: bool = False


@dataclass(frozen=True, slots=True)
class QuotaSensorState:
    """One client quota sensor (Kafka's `type=Produce|Fetch|Request, user=, client-id=`
    MBeans; `ConnectionCreation` for the per-IP connection rate, `user` holding the ip)."""

    quota_type: str
    user: str
    client_id: str
    rate: float
    bound: float
    throttle_time_ms_total: int
    throttled_total: int


@dataclass(frozen=True, slots=True)
class ReplicationThrottleState:
    """One side of the KIP-73 replication quota (Kafka's LeaderReplication /
    FollowerReplication `byte-rate`)."""

    side: str
    """"leader" or "follower"."""
    rate_bytes_per_second: float
    bound_bytes_per_second: int
    """-1: unthrottled (Long.MAX_VALUE in Kafka's config)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """The node's state gauges, read at scrape time (not kept per request)."""

    partitions: tuple[PartitionState, ...] = ()
    active_controller: bool = False
    offline_partitions: int = 0
    global_topics: int = 0
    global_partitions: int = 0
    groups_by_state: Mapping[str, int] = field(default_factory=dict)
    quorum_leader: int = -1
    quorum_term: int = -1
    quorum_high_watermark: int = -1
    quorum_uncommitted: int = 0
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_evictions: int = 0
    fetch_requests: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """Fetch requests by (fetcher, kind): consumer|follower, sessionless|full|incremental|error."""
    fetch_request_partitions: Mapping[tuple[str, str], int] = field(default_factory=dict)
    fetch_response_partitions: Mapping[tuple[str, str], int] = field(default_factory=dict)
    quota_sensors: tuple[QuotaSensorState, ...] = ()
    quota_throttle_time_ms_totals: Mapping[str, int] = field(default_factory=dict)
    """Per quota type (Produce, Fetch, Request, ConnectionCreation), every sensor ever."""
    replication_throttles: tuple[ReplicationThrottleState, ...] = ()


def _histogram(
    name: str, doc: str, labels: list[str], items: list[tuple[list[str], Histogram]]
) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, hist in items:
        family.add_metric(values, hist.cumulative(), hist.total)
    return family


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(name, doc, value=value)


def families(counters: NodeMetrics, state: NodeState) -> list[Metric]:
    """Every family of docs/metrics.md, from a counter snapshot and the node's state."""
    out: list[Metric] = []
    # --- BrokerTopicMetrics --------------------------------------------------------------
    for suffix, doc, counter in (
        ("messagesin", "Messages appended (MessagesInPerSec)", counters.messages_in),
        ("bytesin", "Bytes appended by producers (BytesInPerSec)", counters.bytes_in),
        ("bytesout", "Bytes sent to consumers (BytesOutPerSec)", counters.bytes_out),
        ("failedproducerequests", "Failed produce requests", counters.failed_produce),
        ("failedfetchrequests", "Failed fetch requests", counters.failed_fetch),
    ):
        out.extend(_merge_total(BTM + suffix + "_total", doc, counter))
    # --- RequestMetrics ------------------------------------------------------------------
    requests = CounterMetricFamily(
        REQ + "requests_total", "Requests (RequestsPerSec)", labels=["request"]
    )
    errors = CounterMetricFamily(
        REQ + "errors_total", "Error codes in responses (ErrorsPerSec)", labels=["request", "error"]
    )
    for api, stats in sorted(counters.requests.items()):
        requests.add_metric([api], stats.requests)
        for code, count in sorted(stats.errors.items()):
            errors.add_metric([api, error_name(code)], count)
    out += [requests, errors]
    for time_name in TIMES:
        out.append(
            _histogram(
                REQ + time_name,
                f"Request {time_name} (Kafka's RequestMetrics {time_name})",
                ["request"],
                [
                    ([api], stats.times[time_name])
                    for api, stats in sorted(counters.requests.items())
                ],
            )
        )
    # --- ReplicaManager ------------------------------------------------------------------
    parts = state.partitions
    out += [
        _gauge(RM + "partitioncount", "Partitions with a replica here", len(parts)),
        _gauge(RM + "leadercount", "Partitions led here", sum(1 for p in parts if p.leader)),
        _gauge(
            RM + "underreplicatedpartitions",
            "Led partitions whose ISR is smaller than the replica set",
            sum(1 for p in parts if p.under_replicated),
        ),
        _gauge(
            RM + "underminisrpartitioncount",
            "Led partitions whose ISR is below min.insync.replicas",
            sum(1 for p in parts if p.under_min_isr),
        ),
        CounterMetricFamily(RM + "isrshrinks_total", "ISR shrinks", value=counters.isr_shrinks),
        CounterMetricFamily(RM + "isrexpands_total", "ISR expands", value=counters.isr_expands),
    ]
    # --- controller ----------------------------------------------------------------------
    out += [
        _gauge(
            CTRL + "activecontrollercount",
            "1 on the active controller",
            int(state.active_controller),
        ),
        _gauge(
            CTRL + "offlinepartitionscount",
            "Partitions without a live leader",
            state.offline_partitions,
        ),
        _gauge(CTRL + "globaltopiccount", "Topics in the cluster", state.global_topics),
        _gauge(CTRL + "globalpartitioncount", "Partitions in the cluster", state.global_partitions),
        _histogram(
            CSTATS + "leaderelectionrateandtimems",
            "Leader elections made by this controller and their time",
            [],
            [([], counters.leader_election_ms)],
        ),
        CounterMetricFamily(
            CSTATS + "uncleanleaderelections_total",
            "Unclean leader elections",
            value=counters.unclean_leader_elections,
        ),
    ]
    # --- group coordinator ---------------------------------------------------------------
    for state_name, metric in GROUP_STATES:
        out.append(
            _gauge(
                GMM + metric,
                f"Groups in state {state_name}",
                state.groups_by_state.get(state_name, 0),
            )
        )
    out.append(
        _gauge(
            GMM + "numgroups", "Groups this coordinator owns", sum(state.groups_by_state.values())
        )
    )
    out.append(
        CounterMetricFamily(
            GCM + "offset_commit_count", "Offsets committed", value=counters.offset_commits
        )
    )
    out.append(
        CounterMetricFamily(
            GCM + "group_completed_rebalance_count",
            "Rebalances completed",
            value=counters.rebalances,
        )
    )
    # --- Log -----------------------------------------------------------------------------
    for suffix, doc, read in _LOG_GAUGES:
        family = GaugeMetricFamily(LOG + suffix, doc, labels=["topic", "partition"])
        for p in parts:
            family.add_metric([p.topic, str(p.partition)], read(p))
        out.append(family)
    # --- network -------------------------------------------------------------------------
    for suffix, doc, counter, kind in (
        ("connection_count", "Open connections", counters.connections, GaugeMetricFamily),
        (
            "connection_creation_total",
            "Connections accepted",
            counters.connections_created,
            CounterMetricFamily,
        ),
        (
            "connection_close_total",
            "Connections closed",
            counters.connections_closed,
            CounterMetricFamily,
        ),
    ):
        net = kind(SOCK + suffix, doc, labels=["listener"])
        for listener, value in sorted(counter.items()):
            net.add_metric([listener], value)
        out.append(net)
    out += _quota_families(state)
    # --- quorum --------------------------------------------------------------------------
    out += [
        _gauge(
            RAFT + "current_leader",
            "The metadata quorum's leader (-1: unknown)",
            state.quorum_leader,
        ),
        _gauge(RAFT + "current_epoch", "The metadata quorum's term", state.quorum_term),
        _gauge(RAFT + "high_watermark", "The quorum's commit index", state.quorum_high_watermark),
        _gauge(
            RAFT + "uncommitted_entries",
            "Leader's log entries not yet committed",
            state.quorum_uncommitted,
        ),
        _histogram(
            RAFT + "commit_latency_ms",
            "This node's metadata-quorum writes, from proposal to committed result "
            "(Kafka's commit-latency-avg/max as a histogram)",
            [],
            [([], counters.quorum_commit_latency_ms)],
        ),
    ]
    out += list(_fetch_session_families(state))
    return out


def _fetch_session_families(state: NodeState) -> Iterator[Metric]:
    """Kafka's FetchSessionCache metrics, and how many partitions Fetch requests name
    (trafka's own: what incremental sessions save, KIP-227)."""
    yield _gauge(
        FSC + "numincrementalfetchsessions", "Incremental fetch sessions", state.fetch_sessions
    )
    yield _gauge(
        FSC + "numincrementalfetchpartitionscached",
        "Partitions cached by the fetch sessions",
        state.fetch_session_partitions,
    )
    evictions = CounterMetricFamily(
        FSC + "incrementalfetchsessionevictions", "Fetch sessions evicted"
    )
    evictions.add_metric([], state.fetch_session_evictions)
    yield evictions
    for name, doc, counter in (
        ("trafka_fetch_requests", "Fetch requests by fetcher and kind", state.fetch_requests),
        (
            "trafka_fetch_request_partitions",
            "Partitions named in Fetch requests",
            state.fetch_request_partitions,
        ),
        (
            "trafka_fetch_response_partitions",
            "Partitions named in Fetch responses",
            state.fetch_response_partitions,
        ),
    ):
        family = CounterMetricFamily(name, doc, labels=["fetcher", "kind"])
        for (fetcher, kind), value in sorted(counter.items()):
            family.add_metric([fetcher, kind], value)
        yield family


def _quota_families(state: NodeState) -> list[Metric]:
    """Client quota sensors (`kafka_server_<type>_...{user, client_id}`), throttle totals
    and the KIP-73 replication byte rates."""
    out: list[Metric] = []
    for quota_type, rate_name, rate_doc in (
        ("Produce", "byte_rate", "Bytes/s produced, over the quota window"),
        ("Fetch", "byte_rate", "Bytes/s fetched, over the quota window"),
        ("Request", "request_time", "Handler time, percent of one thread, over the window"),
    ):
        prefix = f"kafka_server_{quota_type.lower()}_"
        sensors = [q for q in state.quota_sensors if q.quota_type == quota_type]
        labels = ["user", "client_id"]
        rate = GaugeMetricFamily(prefix + rate_name, rate_doc, labels=labels)
        bound = GaugeMetricFamily(prefix + "quota", "The quota that applies", labels=labels)
        throttle = CounterMetricFamily(
            prefix + "throttle_time_ms", "Throttle time handed out (ms)", labels=labels
        )
        throttled = CounterMetricFamily(
            prefix + "throttled", "Responses with a throttle time", labels=labels
        )
        for q in sensors:
            values = [q.user, q.client_id]
            rate.add_metric(values, q.rate)
            bound.add_metric(values, q.bound)
            throttle.add_metric(values, q.throttle_time_ms_total)
            throttled.add_metric(values, q.throttled_total)
        out += [rate, bound, throttle, throttled]
    connections = GaugeMetricFamily(
        "kafka_server_connectioncreation_connection_creation_rate",
        "Connections/s accepted per IP under a connection_creation_rate quota",
        labels=["ip"],
    )
    refused = CounterMetricFamily(
        "kafka_server_connectioncreation_throttled",
        "Connections closed for their IP's connection_creation_rate",
        labels=["ip"],
    )
    for q in state.quota_sensors:
        if q.quota_type == "ConnectionCreation":
            connections.add_metric([q.user], q.rate)
            refused.add_metric([q.user], q.throttled_total)
    out += [connections, refused]
    totals = CounterMetricFamily(
        "kafka_server_quota_throttle_time_ms",
        "Throttle time handed out by all sensors of a quota type (ms)",
        labels=["quota_type"],
    )
    for quota_type, value in sorted(state.quota_throttle_time_ms_totals.items()):
        totals.add_metric([quota_type], value)
    out.append(totals)
    for side in state.replication_throttles:
        name = f"kafka_server_{side.side}replication_"
        out.append(
            _gauge(
                name + "byte_rate",
                f"Bytes/s of {side.side}-side throttled replication (KIP-73)",
                side.rate_bytes_per_second,
            )
        )
        out.append(
            _gauge(
                name + "throttled_rate",
                f"{side.side}.replication.throttled.rate in force (-1: unthrottled)",
                side.bound_bytes_per_second,
            )
        )
    return out


_LOG_GAUGES: tuple[tuple[str, str, Callable[[PartitionState], int]], ...] = (
    ("size", "Bytes of the partition's log", lambda p: p.size),
    ("numlogsegments", "Segments of the partition's log", lambda p: p.segments),
    ("logendoffset", "The log end offset", lambda p: p.log_end_offset),
    ("logstartoffset", "The log start offset", lambda p: p.log_start_offset),
)


def _merge_total(name: str, doc: str, counter: Mapping[str, int]) -> Iterator[Metric]:
    """Per-topic series and the broker-wide one (no topic tag) in one family, as the JMX
    exporter writes Kafka's two MBeans (with and without ``topic=``) under one name."""
    family = CounterMetricFamily(name, doc, labels=["topic"])
    for topic, value in sorted(counter.items()):
        family.add_metric([topic], value)
    family.samples.append(Sample(family.name + "_total", {}, float(total(counter)), None, None))
    yield family


def error_name(code: int) -> str:
    """Kafka's error name (Errors.name(): NONE, NOT_LEADER_OR_FOLLOWER, ...) of a code."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)
