"""Quota resolution, sensors and throttle decisions (Kafka's `ClientQuotaManager`,
`ClientRequestQuotaManager`, `DefaultQuotaCallback`, `ConnectionQuotas` per IP).

Precedence (Kafka's documented order; each quota key is resolved on its own, so a user's
`producer_byte_rate` and a client-id's `consumer_byte_rate` may both apply)::

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The first entity with the key gives the bound. The *sensor* a request is counted in is
named by the matched level, as Kafka's metric tags are: (user, client-id) for the levels
naming both, (user, "") for user-only levels, ("", client-id) for client-only levels. So
a quota on `/config/clients/c1` is shared by every user of client id c1, and a default is
applied to each user / client separately. No quota found: nothing is recorded, nothing is
throttled.

Controller mutations (KIP-599, `controller_mutation_rate`, partitions per second): the
same precedence and sensor names; the measure is a token bucket (`rate.TokenBucket`), not a
sampled rate. `controller_mutation` hands a request its `ControllerMutationQuota`, which the
CreateTopics / CreatePartitions / DeleteTopics handlers charge per topic:

* *strict* (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+, the versions that
  know THROTTLING_QUOTA_EXCEEDED): a topic is refused while the bucket is below zero, with
  the throttle time (how long until it is back at zero); a topic admitted takes its
  partitions even if that drives the bucket below zero (Kafka's
  `StrictControllerMutationQuota`: check, then record);
* *permissive* (older versions): every topic is admitted and recorded; the request's
  throttle time is the bucket's after the last one (`PermissiveControllerMutationQuota`).

IP connection-creation rate (KIP-612): `/config/ips/<ip>` else `/config/ips/<default>`;
a connection that would put the IP over its rate is refused (not counted) and closed after
the throttle time (at most one window).

Broker-wide and per-listener connection creation rates (KIP-612,
`max.connection.creation.rate`, `listener.name.<l>.max.connection.creation.rate`): every
accepted connection is recorded in the broker's sensor (unless on the protected
inter-broker listener) and its listener's; the throttle time (bounded by one window) is
how long the listener waits before accepting the next one. A connection the per-IP rate
refuses is taken back from both (Kafka's `updateListenerMetrics`).

Byte-rate throttles are bounded by `samples * window` (11 s by default), request-time
throttles by one window (Kafka's `ClientRequestQuotaManager.maxThrottleTimeMs`).
Sensors idle for `SENSOR_EXPIRY_MS` (Kafka: one hour) are dropped, and at most
`MAX_SENSORS` are kept (the least recently used goes first): a client inventing client ids
cannot grow the broker's memory.

Pure: the shell passes `now_ms`; the configs are replaced whole by `set_configs`.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from trafka.node.quota.entities import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    sanitize,
)
from trafka.node.quota.rate import (
    DEFAULT_WINDOW_NUM,
    DEFAULT_WINDOW_SIZE_MS,
    QuotaSensor,
    Rate,
    TokenBucket,
)

MAX_SENSORS: Final = 10_000
SENSOR_EXPIRY_MS: Final = 3_600_000


class QuotaType(enum.Enum):
    """Kafka's QuotaType and the key each one reads."""

    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE
    CONNECTION = CONNECTION_CREATION_RATE
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE

    @property
    def metric_type(self) -> str:
        """Kafka's JMX `type=` (Produce, Fetch, Request, ConnectionCreation)."""
        return {
            QuotaType.PRODUCE: "Produce",
            QuotaType.FETCH: "Fetch",
            QuotaType.REQUEST: "Request",
            QuotaType.CONNECTION: "ConnectionCreation",
            QuotaType.CONTROLLER_MUTATION: "ControllerMutation",
        }[self]


SensorTags = tuple[str, str]
"""(user, client-id) as Kafka tags the quota metrics; "" where the level does not name it.
For ip sensors: (ip, "")."""


@dataclass(frozen=True, slots=True)
class Resolved:
    tags: SensorTags
    bound: float
    entity: QuotaEntity


def resolve(
    configs: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> Resolved | None:
    """The quota on `key` for (user principal name, client id), with Kafka's precedence."""
    sanitized_user, sanitized_client = sanitize(user), sanitize(client_id)
    levels: tuple[tuple[QuotaEntity, SensorTags], ...] = (
        (QuotaEntity(sanitized_user, sanitized_client), (user, client_id)),
        (QuotaEntity(sanitized_user, DEFAULT), (user, client_id)),
        (QuotaEntity(sanitized_user, None), (user, "")),
        (QuotaEntity(DEFAULT, sanitized_client), (user, client_id)),
        (QuotaEntity(DEFAULT, DEFAULT), (user, client_id)),
        (QuotaEntity(DEFAULT, None), (user, "")),
        (QuotaEntity(None, sanitized_client), ("", client_id)),
        (QuotaEntity(None, DEFAULT), ("", client_id)),
    )
    for entity, tags in levels:
        values = configs.get(entity)
        if values is not None and key in values:
            return Resolved(tags, values[key], entity)
    return None


def resolve_ip(configs: Mapping[QuotaEntity, Mapping[str, float]], ip: str) -> Resolved | None:
    for entity in (QuotaEntity(ip=sanitize(ip)), QuotaEntity(ip=DEFAULT)):
        values = configs.get(entity)
        if values is not None and CONNECTION_CREATION_RATE in values:
            return Resolved((ip, ""), values[CONNECTION_CREATION_RATE], entity)
    return None


@dataclass(slots=True)
class _Tracked:
    sensor: QuotaSensor
    last_used_ms: int
    throttle_time_ms_total: int = 0
    throttled_count: int = 0


@dataclass(frozen=True, slots=True)
class SensorSnapshot:
    """One sensor for the metrics endpoint."""

    quota_type: QuotaType
    tags: SensorTags
    bound: float
    rate: float
    """Bytes/s, percent of one thread, or connections/s over the quota window."""
    throttle_time_ms_total: int
    throttled_count: int


@dataclass(slots=True)
class _TrackedBucket:
    bucket: TokenBucket
    last_used_ms: int


@dataclass(slots=True)
class ControllerMutationQuota:
    """One request's controller mutation quota (see the module doc); `bucket` None: no
    quota applies (Kafka's `UnboundedControllerMutationQuota`)."""

    bucket: TokenBucket | None
    strict: bool
    throttle_time_ms: int = 0
    """The request's throttle time so far (its response's throttle_time_ms)."""

    def record(self, partitions: int, now_ms: int) -> bool:
        """Charge one topic's partitions; False: refused (strict mode, over the quota)."""
        bucket = self.bucket
        if bucket is None:
            return True
        if self.strict:
            throttle = bucket.throttle_time_ms(now_ms)
            if throttle > 0:
                self.throttle_time_ms = max(self.throttle_time_ms, throttle)
                return False
            bucket.record(partitions, now_ms)
            return True
        bucket.record(partitions, now_ms)
        throttle = bucket.throttle_time_ms(now_ms)
        if throttle > 0:
            self.throttle_time_ms = max(self.throttle_time_ms, throttle)
        return True


@dataclass(slots=True)
class QuotaManager:
    window_num: int = DEFAULT_WINDOW_NUM
    window_size_ms: int = DEFAULT_WINDOW_SIZE_MS
    max_sensors: int = MAX_SENSORS
    _configs: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    _sensors: OrderedDict[tuple[QuotaType, SensorTags], _Tracked] = field(
        default_factory=OrderedDict
    )
    _buckets: OrderedDict[SensorTags, _TrackedBucket] = field(default_factory=OrderedDict)
    """Controller mutation token buckets by sensor tags."""
    throttle_time_ms_totals: dict[QuotaType, int] = field(default_factory=dict)
    """Every throttle handed out per quota type (also those of expired sensors)."""
    any_client_quota: bool = False
    """Some user / client-id entity has a quota (else requests skip the quota code)."""
    any_ip_quota: bool = False
    _accept_rate_broker: QuotaSensor | None = None
    _accept_rate_listeners: dict[str, QuotaSensor] = field(default_factory=dict)

    # ---- configs ----------------------------------------------------------------------------
    @property
    def configs(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._configs

    def set_configs(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> bool:
        """Replace every entity's quotas; sensors whose bound changed take the new one at
        their next record. True when anything changed."""
        new = {entity: dict(values) for entity, values in configs.items() if values}
        if new == self._configs:
            return False
        self._configs = new
        self._update_flags()
        return True

    def set_entity(self, entity: QuotaEntity, values: Mapping[str, float]) -> bool:
        current = self._configs.get(entity, {})
        if dict(values) == current:
            return False
        if values:
            self._configs[entity] = dict(values)
        else:
            self._configs.pop(entity, None)
        self._update_flags()
        return True

    def _update_flags(self) -> None:
        self.any_client_quota = any(not entity.is_ip for entity in self._configs)
        self.any_ip_quota = any(entity.is_ip for entity in self._configs)

    # ---- recording --------------------------------------------------------------------------
    def _sensor(self, quota_type: QuotaType, resolved: Resolved, now_ms: int) -> _Tracked:
        key = (quota_type, resolved.tags)
        tracked = self._sensors.get(key)
        if tracked is None:
            self._expire(now_ms)
            tracked = _Tracked(
                QuotaSensor(resolved.bound, Rate(self.window_num, self.window_size_ms)), now_ms
            )
            self._sensors[key] = tracked
        else:
            self._sensors.move_to_end(key)
            tracked.sensor.bound = resolved.bound
            tracked.last_used_ms = now_ms
        return tracked

    def _expire(self, now_ms: int) -> None:
        while self._sensors:
            key, oldest = next(iter(self._sensors.items()))
            if len(self._sensors) < self.max_sensors and (
                now_ms - oldest.last_used_ms < SENSOR_EXPIRY_MS
            ):
                return
            del self._sensors[key]

    def _throttled(self, quota_type: QuotaType, tracked: _Tracked, throttle_ms: int) -> int:
        if throttle_ms > 0:
            tracked.throttle_time_ms_total += throttle_ms
            tracked.throttled_count += 1
            self.throttle_time_ms_totals[quota_type] = (
                self.throttle_time_ms_totals.get(quota_type, 0) + throttle_ms
            )
        return throttle_ms

    def record(
        self, quota_type: QuotaType, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Count `value` (bytes, or percent-seconds of request time) for the client and
        return its throttle time in ms (0: within its quota, or no quota applies)."""
        if not self._configs:
            return 0
        resolved = resolve(self._configs, quota_type.value, user, client_id)
        if resolved is None:
            return 0
        tracked = self._sensor(quota_type, resolved, now_ms)
        maximum = self.window_size_ms * (1 if quota_type is QuotaType.REQUEST else self.window_num)
        throttle = tracked.sensor.record(value, now_ms, max_throttle_ms=maximum)
        return self._throttled(quota_type, tracked, throttle)

    def record_request_time(self, user: str, client_id: str, elapsed_ms: float, now_ms: int) -> int:
        """Request time as Kafka's `nanosToPercentage`: percent of one thread per second."""
        return self.record(QuotaType.REQUEST, user, client_id, elapsed_ms / 10.0, now_ms)

    def record_connection(
        self, ip: str, now_ms: int, *, listener: str = "", protected: bool = False
    ) -> int:
        """A new connection from `ip`: 0 to accept it, else the ms to wait before closing
        it (it was not counted, nor is it in the broker and listener creation rates)."""
        if not self._configs:
            return 0
        resolved = resolve_ip(self._configs, ip)
        if resolved is None:
            return 0
        tracked = self._sensor(QuotaType.CONNECTION, resolved, now_ms)
        throttle = tracked.sensor.check_and_record(1.0, now_ms, max_throttle_ms=self.window_size_ms)
        if throttle > 0:
            for sensor in self._accept_sensors(listener, protected):
                sensor.rate.record(-1.0, now_ms)
        return self._throttled(QuotaType.CONNECTION, tracked, throttle)

    # ---- broker-wide and per-listener connection creation rates (KIP-612) -------------------
    def set_connection_creation_rates(
        self, broker_rate: int | None, listener_rates: Mapping[str, int]
    ) -> None:
        """`max.connection.creation.rate` (None: unlimited) and the per-listener ones; a
        sensor keeps its samples when only its bound changes."""
        if broker_rate is None:
            self._accept_rate_broker = None
        elif self._accept_rate_broker is None:
            self._accept_rate_broker = QuotaSensor(
                broker_rate, Rate(self.window_num, self.window_size_ms)
            )
        else:
            self._accept_rate_broker.bound = broker_rate
        current = self._accept_rate_listeners
        self._accept_rate_listeners = {
            listener: (
                QuotaSensor(rate, current[listener].rate)
                if listener in current
                else QuotaSensor(rate, Rate(self.window_num, self.window_size_ms))
            )
            for listener, rate in listener_rates.items()
        }

    def _accept_sensors(self, listener: str, protected: bool) -> list[QuotaSensor]:
        sensors = []
        if self._accept_rate_broker is not None and not protected:
            sensors.append(self._accept_rate_broker)
        sensor = self._accept_rate_listeners.get(listener)
        if sensor is not None:
            sensors.append(sensor)
        return sensors

    def record_accept(self, listener: str, protected: bool, now_ms: int) -> int:
        """An accepted connection: the ms its listener waits before accepting the next one
        (the larger of the broker-wide and listener throttles, at most one window)."""
        throttle = 0
        for sensor in self._accept_sensors(listener, protected):
            throttle = max(
                throttle, sensor.record(1.0, now_ms, max_throttle_ms=self.window_size_ms)
            )
        return throttle

    def controller_mutation(
        self, user: str, client_id: str, now_ms: int, *, strict: bool
    ) -> ControllerMutationQuota:
        """The request's controller mutation quota (unbounded when none applies)."""
        if not self._configs:
            return ControllerMutationQuota(None, strict)
        resolved = resolve(self._configs, CONTROLLER_MUTATION_RATE, user, client_id)
        if resolved is None:
            return ControllerMutationQuota(None, strict)
        tracked = self._buckets.get(resolved.tags)
        if tracked is None:
            while self._buckets:
                tags, oldest = next(iter(self._buckets.items()))
                if len(self._buckets) < self.max_sensors and (
                    now_ms - oldest.last_used_ms < SENSOR_EXPIRY_MS
                ):
                    break
                del self._buckets[tags]
            tracked = _TrackedBucket(
                TokenBucket(resolved.bound, self.window_num, self.window_size_ms), now_ms
            )
            self._buckets[resolved.tags] = tracked
        else:
            self._buckets.move_to_end(resolved.tags)
            tracked.bucket.rate = resolved.bound
            tracked.last_used_ms = now_ms
        return ControllerMutationQuota(tracked.bucket, strict)

    def count_mutation_throttle(self, quota: ControllerMutationQuota) -> None:
        """Add a finished request's controller mutation throttle to the totals."""
        if quota.throttle_time_ms > 0:
            kind = QuotaType.CONTROLLER_MUTATION
            self.throttle_time_ms_totals[kind] = (
                self.throttle_time_ms_totals.get(kind, 0) + quota.throttle_time_ms
            )

    # ---- metrics ----------------------------------------------------------------------------
    def snapshot(self, now_ms: int) -> list[SensorSnapshot]:
        return [
            SensorSnapshot(
                quota_type,
                tags,
                tracked.sensor.bound,
                tracked.sensor.rate.per_second(now_ms),
                tracked.throttle_time_ms_total,
                tracked.throttled_count,
            )
            for (quota_type, tags), tracked in self._sensors.items()
        ]
