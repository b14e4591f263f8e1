"""The node's counters: plain integers in dicts, incremented on the hot path.

Everything here is owned by the node's event loop thread; a scrape copies it there
(`NodeMetrics.snapshot`) and formats the copy elsewhere. Nothing is computed per request
beyond an integer add (and, for the request-time histograms, one `bisect` per timing).
Gauges that describe the node's state (partitions, logs, groups, quorum) are not kept here:
the node's shell reads them at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

TIME_BUCKETS_MS: Final[tuple[float, ...]] = (
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
)
"""Upper bounds (ms) of the request-time histograms; a last bucket is +Inf."""

TIMES: Final[tuple[str, ...]] = (
    "totaltimems",
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsesendtimems",
)
"""Kafka's RequestMetrics time names (TotalTimeMs, RequestQueueTimeMs, ...), lower case."""


class Histogram:
    """Counts per bucket of `TIME_BUCKETS_MS` (not cumulative) plus the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.total = 0.0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect_left(TIME_BUCKETS_MS, value_ms)] += 1
        self.total += value_ms

    def copy(self) -> Histogram:
        other = Histogram()
        other.counts = list(self.counts)
        other.total = self.total
        return other

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (upper bound as text, cumulative count), ending with +Inf."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*TIME_BUCKETS_MS, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


@dataclass(slots=True)
class RequestStats:
    """RequestMetrics of one API: requests, errors by code, the five time histograms."""

    requests: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    times: dict[str, Histogram] = field(default_factory=lambda: {t: Histogram() for t in TIMES})

    def copy(self) -> RequestStats:
        return RequestStats(
            self.requests, dict(self.errors), {k: h.copy() for k, h in self.times.items()}
        )


_GROUP_APIS: Final = frozenset({"JoinGroup", "OffsetCommit", "TxnOffsetCommit"})


def _add(counter: dict[str, int], key: str, amount: int = 1) -> None:
    counter[key] = counter.get(key, 0) + amount


@dataclass(slots=True)
class NodeMetrics:
    """The counters of one node (BrokerTopicMetrics, RequestMetrics, ReplicaManager,
    controller, group coordinator, network). Per-topic counters are keyed by topic; the
    totals (Kafka's series without a topic tag) are the sums, taken at scrape time."""

    messages_in: dict[str, int] = field(default_factory=dict)
    bytes_in: dict[str, int] = field(default_factory=dict)
    bytes_out: dict[str, int] = field(default_factory=dict)
    failed_produce: dict[str, int] = field(default_factory=dict)
    failed_fetch: dict[str, int] = field(default_factory=dict)
    requests: dict[str, RequestStats] = field(default_factory=dict)
    isr_shrinks: int = 0
    isr_expands: int = 0
    leader_elections: int = 0
    leader_election_ms: Histogram = field(default_factory=Histogram)
    quorum_commit_latency_ms: Histogram = field(default_factory=Histogram)
    """Each of this node's metadata-quorum writes, proposal to committed result."""
    unclean_leader_elections: int = 0
    offset_commits: int = 0
    rebalances: int = 0
    connections: dict[str, int] = field(default_factory=dict)
    connections_created: dict[str, int] = field(default_factory=dict)
    connections_closed: dict[str, int] = field(default_factory=dict)

    # ---- BrokerTopicMetrics ---------------------------------------------------------------
    def produced(self, topic: str, messages: int, size: int) -> None:
        _add(self.messages_in, topic, messages)
        _add(self.bytes_in, topic, size)

    def produce_failed(self, topic: str) -> None:
        _add(self.failed_produce, topic)

    def fetched(self, topic: str, size: int) -> None:
        _add(self.bytes_out, topic, size)

    def fetch_failed(self, topic: str) -> None:
        _add(self.failed_fetch, topic)

    # ---- RequestMetrics -------------------------------------------------------------------
    def request_done(
        self,
        api: str,
        error_codes: Iterable[int],
        *,
        queue_ms: float,
        local_ms: float,
        remote_ms: float,
        send_ms: float,
        response: object = None,
    ) -> None:
        stats = self.requests.get(api)
        if stats is None:
            stats = self.requests[api] = RequestStats()
        stats.requests += 1
        errors = stats.errors
        none = 0
        for code in error_codes:
            errors[code] = errors.get(code, 0) + 1
            none += code == 0
        if api in _GROUP_APIS:
            self._group_response(api, response, none)
        times = stats.times
        times["requestqueuetimems"].observe(queue_ms)
        times["localtimems"].observe(local_ms)
        times["remotetimems"].observe(remote_ms)
        times["responsesendtimems"].observe(send_ms)
        times["totaltimems"].observe(queue_ms + local_ms + remote_ms + send_ms)

    def _group_response(self, api: str, response: object, none: int) -> None:
        if api == "JoinGroup":
            # One JoinGroup answer per rebalance names its receiver the leader.
            member = getattr(response, "member_id", None)
            if none and member and member == getattr(response, "leader", None):
                self.rebalances += 1
        else:  # OffsetCommit, TxnOffsetCommit: the partitions committed
            self.offset_commits += none

    # ---- network --------------------------------------------------------------------------
    def connection_opened(self, listener: str) -> None:
        _add(self.connections, listener)
        _add(self.connections_created, listener)

    def connection_closed(self, listener: str) -> None:
        _add(self.connections, listener, -1)
        _add(self.connections_closed, listener)

    # ---- controller -----------------------------------------------------------------------
    def leader_elected(self, *, unclean: bool, took_ms: float = 0.0) -> None:
        self.leader_elections += 1
        self.leader_election_ms.observe(took_ms)
        if unclean:
            self.unclean_leader_elections += 1

    def snapshot(self) -> NodeMetrics:
        """A copy for formatting outside the event loop."""
        return NodeMetrics(
            messages_in=dict(self.messages_in),
            bytes_in=dict(self.bytes_in),
            bytes_out=dict(self.bytes_out),
            failed_produce=dict(self.failed_produce),
            failed_fetch=dict(self.failed_fetch),
            requests={api: stats.copy() for api, stats in self.requests.items()},
            isr_shrinks=self.isr_shrinks,
            isr_expands=self.isr_expands,
            leader_elections=self.leader_elections,
            leader_election_ms=self.leader_election_ms.copy(),
            quorum_commit_latency_ms=self.quorum_commit_latency_ms.copy(),
            unclean_leader_elections=self.unclean_leader_elections,
            offset_commits=self.offset_commits,
            rebalances=self.rebalances,
            connections=dict(self.connections),
            connections_created=dict(self.connections_created),
            connections_closed=dict(self.connections_closed),
        )


def total(counter: Mapping[str, int]) -> int:
    return sum(counter.values())
