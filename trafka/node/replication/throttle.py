"""Replication quotas (KIP-73): the byte-rate arithmetic and the throttled-replica lists.

Pure and synchronous (STYLE 1, 5): every method that needs the time takes `now_ms`; the
replica manager and the replica fetchers (the shells) own one `ReplicationQuota` each for
the leader and the follower side and feed it settings read from the metadata tree.

Configs (Kafka's names, values as Kafka stores them):

* broker, dynamic only: `leader.replication.throttled.rate`,
  `follower.replication.throttled.rate`, bytes/s, from `/config/brokers/<id>`, else the
  cluster default `/config/brokers/<default>`, else Long.MAX_VALUE = unthrottled (Kafka's
  BrokerConfigHandler; a value in server.properties is not used).
* topic (`/config/topics/<t>`): `leader.replication.throttled.replicas` and
  `follower.replication.throttled.replicas`, each `*` (every replica of the topic) or a list
  `partition:broker,partition:broker,...`. A broker keeps the partitions whose entry names
  *itself* (Kafka's `parseThrottledPartitions`): in the leader list, the brokers that
  serve the moving partitions (the current replicas); in the follower list, the brokers
  that fetch them (the replicas being added).

The rate (Kafka's `SimpleRate` over `replication.quota.window.num` = 11 samples of
`replication.quota.window.size.seconds` = 1 s): the bytes recorded in the live samples
divided by max(time since the oldest sample started, one window). The quota is exceeded
when that rate is above the bound (Kafka's `Quota.upperBound`: a rate equal to the bound is
acceptable).

Who is throttled, exactly as Kafka decides it:

* leader (`ReplicaManager.shouldLeaderThrottle`): a follower's Fetch gets no data for a
  partition when the follower is NOT in the partition's ISR, the partition is in this
  broker's leader list, and the leader quota is exceeded. After the response, the bytes of
  every partition of the leader list are recorded (in-sync replicas' traffic counts too,
  so the total stays under the rate; `KafkaApis.sizeOfThrottledPartitions`).
* follower (`ReplicaFetcherThread.shouldFollowerThrottle`): a partition is left out of the
  next Fetch when its replica is not in sync (its lag behind the leader's high watermark
  after the last fetch is unknown or > 0), the partition is in this broker's follower list,
  and the follower quota is exceeded. The bytes fetched for every partition of the
  follower list are recorded.

Unthrottled partitions are never delayed; in-sync replicas are never delayed.

Not implemented: `replica.alter.log.dirs.io.max.bytes.per.second` (intra-broker log-dir
moves do not exist here), the quota metrics (`LeaderReplication`/`FollowerReplication`
byte-rate), configurable window count and size (Kafka's defaults are constants here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from trafka.log.config import validate_throttled_replicas
from trafka.node.quota.rate import Rate

LONG_MAX: Final = (1 << 63) - 1
"""Kafka's `QuotaBytesPerSecondDefault`: no throttle."""

LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"

REPLICATION_QUOTA_WINDOW_NUM: Final = 11
"""`replication.quota.window.num`: 10 whole windows + the current one."""
REPLICATION_QUOTA_WINDOW_SIZE_MS: Final = 1000
"""`replication.quota.window.size.seconds` = 1."""

ALL_REPLICAS: Final = "*"
"""The literal that throttles every replica of a topic."""

MIN_DELAY_MS: Final = 10
"""Shortest wait the follower takes when every partition it follows is throttled."""


@dataclass(frozen=True, slots=True)
class ThrottledPartitions:
    """The partitions of one topic a broker throttles: all of them or a set."""

    all_partitions: bool = False
    partitions: frozenset[int] = frozenset()

    def __contains__(self, partition: object) -> bool:
        return self.all_partitions or partition in self.partitions


def parse_throttled_replicas(key: str, raw: str, broker_id: int) -> ThrottledPartitions:
    """Kafka's `parseThrottledPartitions`: the partitions `broker_id` throttles (none when
    the list does not name it). ValueError on a malformed value."""
    validate_throttled_replicas(key, raw)
    text = raw.strip()
    if text == ALL_REPLICAS:
        return ThrottledPartitions(all_partitions=True)
    partitions = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return ThrottledPartitions(partitions=frozenset(partitions))


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """One broker's view of the throttle configs: rates and throttled partitions per topic."""

    leader_rate_bytes_per_second: int = LONG_MAX
    follower_rate_bytes_per_second: int = LONG_MAX
    leader_partitions: Mapping[str, ThrottledPartitions] = field(default_factory=dict)
    follower_partitions: Mapping[str, ThrottledPartitions] = field(default_factory=dict)


def _rate(layers: tuple[Mapping[str, str], ...], key: str) -> int:
    """The first layer's valid value for `key` (Kafka's getOrDefault), else LONG_MAX."""
    for layer in layers:
        raw = layer.get(key)
        if raw is None or not raw.strip():
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            continue
        if value >= 0:
            return value
    return LONG_MAX


def settings_from_configs(
    broker_id: int,
    broker_config: Mapping[str, str],
    topic_configs: Mapping[str, Mapping[str, str]],
    default_broker_config: Mapping[str, str] | None = None,
) -> ThrottleSettings:
    """Settings from `/config/brokers/<broker_id>` (then `/config/brokers/<default>`) and
    each topic's `/config/topics/<t>` (string values, as stored). Malformed values are
    ignored (the writers validate them; a bad one in the tree must not stop replication)."""
    rate_layers = (broker_config, default_broker_config or {})
    leader: dict[str, ThrottledPartitions] = {}
    follower: dict[str, ThrottledPartitions] = {}
    for topic, configs in topic_configs.items():
        for key, target in (
            (LEADER_THROTTLED_REPLICAS, leader),
            (FOLLOWER_THROTTLED_REPLICAS, follower),
        ):
            raw = configs.get(key)
            if raw is None or not raw.strip():
                continue
            try:
                parsed = parse_throttled_replicas(key, raw, broker_id)
            except ValueError:
                continue
            if parsed.all_partitions or parsed.partitions:
                target[topic] = parsed
    return ThrottleSettings(
        leader_rate_bytes_per_second=_rate(rate_layers, LEADER_THROTTLED_RATE),
        follower_rate_bytes_per_second=_rate(rate_layers, FOLLOWER_THROTTLED_RATE),
        leader_partitions=leader,
        follower_partitions=follower,
    )


@dataclass(slots=True)
class ReplicationQuota:
    """One side's quota (Kafka's `ReplicationQuotaManager`): a bound, a rate, and the
    partitions it applies to."""

    bound_bytes_per_second: int = LONG_MAX
    throttled: Mapping[str, ThrottledPartitions] = field(default_factory=dict)
    rate: Rate = field(
        default_factory=lambda: Rate(REPLICATION_QUOTA_WINDOW_NUM, REPLICATION_QUOTA_WINDOW_SIZE_MS)
    )
    """Kafka's `SimpleRate` over the replication quota's samples (the client quotas' too)."""

    def update(
        self, bound_bytes_per_second: int, throttled: Mapping[str, ThrottledPartitions]
    ) -> None:
        """New settings; the measured rate is kept (Kafka's `updateQuota`/`markThrottled`)."""
        self.bound_bytes_per_second = bound_bytes_per_second
        self.throttled = throttled

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self.throttled.get(topic)
        return partitions is not None and partition in partitions

    def is_quota_exceeded(self, now_ms: int) -> bool:
        if self.bound_bytes_per_second >= LONG_MAX:
            return False
        return self.rate.per_second(now_ms) > self.bound_bytes_per_second

    def record(self, value: int, now_ms: int) -> None:
        """Count `value` bytes even if the quota is exceeded (Kafka's `record`)."""
        if value > 0:
            self.rate.record(value, now_ms)

    def should_throttle(self, topic: str, partition: int, *, in_sync: bool, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: not in sync, listed, and
        over the quota."""
        return (
            not in_sync and self.is_throttled(topic, partition) and self.is_quota_exceeded(now_ms)
        )

    def delay_ms(self, now_ms: int, *, maximum_ms: int) -> int:
        """How long until the rate falls to the bound if nothing more is recorded, clamped
        to [MIN_DELAY_MS, maximum_ms] (the follower's wait when all it follows is
        throttled; Kafka waits `replica.fetch.backoff.ms`)."""
        if not self.is_quota_exceeded(now_ms):
            return MIN_DELAY_MS
        total = self.rate.total(now_ms)
        elapsed_ms = self.rate.window_ms(now_ms)
        needed_ms = int(-(-total * 1000 // max(1, self.bound_bytes_per_second)))
        return max(MIN_DELAY_MS, min(maximum_ms, needed_ms - elapsed_ms))
