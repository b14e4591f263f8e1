"""The node's Prometheus endpoint (`metrics.listener=http://127.0.0.1:9404`, docs/metrics.md):
a thin shell around `trafka.metrics`.

prometheus-client's own HTTP server runs in its threads; a scrape asks the event loop, through
`trio.from_thread.run_sync`, for a copy of the counters and the node's state gauges (a short
synchronous read: nothing on the event loop waits for the scrape's socket or its formatting),
then builds the families in the scrape's thread. The process collectors of prometheus-client
(process_*, python_gc_*, python_info) are registered too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import trio
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from trafka.metrics.families import (
    NodeState,
    PartitionState,
    QuotaSensorState,
    ReplicationThrottleState,
    families,
)
from trafka.metrics.registry import NodeMetrics
from trafka.node.clock import SYSTEM_CLOCK
from trafka.node.replication.ids import TopicPartition
from trafka.node.replication.throttle import LONG_MAX
from trafka.node.startup import StartupError

if TYPE_CHECKING:
    from trafka.net.server import KafkaServer
    from trafka.node.handlers.context import NodeServices

log = logging.getLogger("trafka.node.metrics_service")

DEFAULT_HOST = "127.0.0.1"


def parse_metrics_listener(url: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); a missing host is loopback. ValueError if bad."""
    parts = urlsplit(url.strip())
    if parts.scheme != "http" or parts.port is None or parts.path not in ("", "/"):
        raise ValueError(f"metrics.listener: expected http://host:port, got {url!r}")
    return parts.hostname or DEFAULT_HOST, parts.port


def read_node_state(services: NodeServices) -> NodeState:
    """The state gauges of the node, read on the event loop at scrape time."""
    replicas, topics = services.replicas, services.topics
    partitions: list[PartitionState] = []
    for (topic, partition), plog in sorted(services.logs.manager.logs().items()):
        leader = replicas.leaders.get(TopicPartition(topic, partition))
        partitions.append(
            PartitionState(
                topic=topic,
                partition=partition,
                size=plog.size_bytes,
                segments=len(plog.segments()),
                log_start_offset=plog.log_start_offset,
                log_end_offset=plog.log_end_offset,
                leader=leader is not None,
                under_replicated=leader is not None and len(leader.isr) < len(leader.replicas),
                under_min_isr=leader is not None and len(leader.isr) < leader.min_insync_replicas,
            )
        )
    live = set(services.metadata.live_broker_ids())
    all_parts = [p for t in topics.topics.values() for p in t.partitions.values()]
    controller = services.controller
    groups: dict[str, int] = {}
    for state in services.groups.group_states():
        groups[state] = groups.get(state, 0) + 1
    quorum = services.store.status()
    uncommitted = (
        max(0, quorum.leader_log_end_offset - quorum.high_watermark) if quorum.is_leader else 0
    )
    quota_sensors: tuple[QuotaSensorState, ...] = ()
    quota_totals: dict[str, int] = {}
    quotas = services.quotas
    if quotas is not None:
        now_ms = quotas.now_ms()
        quota_sensors = tuple(
            QuotaSensorState(
                sensor.quota_type.metric_type,
                sensor.tags[0],
                sensor.tags[1],
                sensor.rate,
                sensor.bound,
                sensor.throttle_time_ms_total,
                sensor.throttled_count,
            )
            for sensor in quotas.manager.snapshot(now_ms)
        )
        quota_totals = {
            quota_type.metric_type: value
            for quota_type, value in quotas.manager.throttle_time_ms_totals.items()
        }
    sessions = services.fetch_sessions
    stats = sessions.stats
    return NodeState(
        fetch_sessions=len(sessions),
        fetch_session_partitions=sessions.total_partitions,
        fetch_session_evictions=stats.evictions,
        fetch_requests=dict(stats.requests),
        fetch_request_partitions=dict(stats.request_partitions),
        fetch_response_partitions=dict(stats.response_partitions),
        quota_sensors=quota_sensors,
        quota_throttle_time_ms_totals=quota_totals,
        replication_throttles=_replication_throttles(services),
        partitions=tuple(partitions),
        active_controller=controller is not None and controller.is_active,
        offline_partitions=sum(1 for p in all_parts if p.leader not in live),
        global_topics=len(topics.topics),
        global_partitions=len(all_parts),
        groups_by_state=groups,
        quorum_leader=quorum.leader_id,
        quorum_term=quorum.leader_epoch,
        quorum_high_watermark=quorum.high_watermark,
        quorum_uncommitted=uncommitted,
    )


def _replication_throttles(services: NodeServices) -> tuple[ReplicationThrottleState, ...]:
    replicas = services.replicas
    now_ms = services.quotas.now_ms() if services.quotas is not None else SYSTEM_CLOCK.now_ms()
    sides = []
    for side, quota in (("leader", replicas.leader_quota), ("follower", replicas.follower_quota)):
        bound = quota.bound_bytes_per_second
        sides.append(
            ReplicationThrottleState(
                side,
                quota.rate.per_second(now_ms),
                -1 if bound >= LONG_MAX else bound,
            )
        )
    return tuple(sides)


class _NodeCollector:
    def __init__(self, snapshot: Callable[[], tuple[NodeMetrics, NodeState]]) -> None:
        self._snapshot = snapshot
        self._token = trio.lowlevel.current_trio_token()

    def collect(self) -> Iterable[Metric]:
        try:
            counters, state = trio.from_thread.run_sync(self._snapshot, trio_token=self._token)
        except (trio.RunFinishedError, trio.Cancelled):
            return []
        return families(counters, state)


class MetricsService:
    """Serves `/metrics` on `metrics.listener` until cancelled."""

    def __init__(self, url: str, metrics: NodeMetrics, state: Callable[[], NodeState]) -> None:
        self.host, self.port = parse_metrics_listener(url)
        self.metrics = metrics
        self._state = state
        self.bound_port: int | None = None

    def _snapshot(self) -> tuple[NodeMetrics, NodeState]:
        return self.metrics.snapshot(), self._state()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        registry.register(_NodeCollector(self._snapshot))
        server, _thread = await trio.to_thread.run_sync(
            lambda: start_http_server(self.port, addr=self.host, registry=registry)
        )
        self.bound_port = int(server.server_port)
        log.info("metrics on http://%s:%d/metrics", self.host, self.bound_port)
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.shutdown)
                server.server_close()


async def start_metrics(
    nursery: trio.Nursery, url: str, services: NodeServices, server: KafkaServer
) -> MetricsService | None:
    """When `metrics.listener` is set: serve the node's registry (the replica manager's) and
    count the server's requests and connections into it (off: no request timing at all)."""
    if not url:
        return None
    server.metrics = services.replicas.metrics
    services.store.observe_commits(services.replicas.metrics.quorum_commit_latency_ms.observe)
    if services.controller is not None:
        services.controller.metrics = services.replicas.metrics
    try:
        service = MetricsService(url, services.replicas.metrics, lambda: read_node_state(services))
        await nursery.start(service.run)
    except (ValueError, OSError) as error:
        raise StartupError(f"metrics.listener={url}: {error}") from None
    return service
