"""Per-log configuration: Kafka's topic-level settings, with Kafka's names and defaults.

`LogConfig` holds what the storage engine obeys. `from_properties` takes the topic-level
names (`segment.bytes`, `retention.ms`, ...) as strings, the way a CreateTopics request or
`/config/topics/<topic>` carries them; `from_broker_properties` takes the broker-level
defaults (`log.segment.bytes`, `log.retention.hours`, ...), with Kafka's precedence
`ms > minutes > hours` (SEEDS LOG-20).

Accepted but not acted on by `log/` (they belong to other layers or are not implemented):
`min.insync.replicas` (replica manager), `unclean.leader.election.enable` (controller),
`compression.type` (we keep the producer's codec: the `producer` behaviour),
`preallocate` (segment files are not preallocated; index files always are),
`message.downconversion.enable`, `message.timestamp.*.max.ms`,
`follower.replication.throttled.replicas`, `leader.replication.throttled.replicas` (the
replica manager's replication quotas, KIP-73; their format is checked here:
`validate_throttled_replicas`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
TIMESTAMP_TYPE_CREATE_TIME = "CreateTime"
TIMESTAMP_TYPE_LOG_APPEND_TIME = "LogAppendTime"

_COMPRESSION_TYPES = frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"})

_IGNORED_TOPIC_KEYS = frozenset(
    {
        "unclean.leader.election.enable",
        "preallocate",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.ms",
        "local.retention.bytes",
        "remote.storage.enable",
    }
)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log settings. Field = Kafka key with dots as underscores (units last)."""

    segment_bytes: int = 1 << 30
    """`segment.bytes`: roll when the active segment would grow past this."""
    segment_ms: int = 7 * 24 * 3600 * 1000
    """`segment.ms`: roll when the first batch of the active segment is this old."""
    segment_jitter_ms: int = 0
    """`segment.jitter.ms`: Kafka subtracts a random jitter up to this; we keep it 0."""
    segment_index_bytes: int = 10 * 1024 * 1024
    """`segment.index.bytes`: index files are preallocated to this and trimmed on roll."""
    index_interval_bytes: int = 4096
    """`index.interval.bytes`: an offset-index entry after this many bytes of batches."""
    retention_ms: int = 7 * 24 * 3600 * 1000
    """`retention.ms`: -1 keeps forever."""
    retention_bytes: int = -1
    """`retention.bytes`: -1 means no size limit."""
    cleanup_policy: frozenset[str] = frozenset({CLEANUP_POLICY_DELETE})
    """`cleanup.policy`: a set of `delete` and/or `compact`."""
    max_message_bytes: int = 1048588
    """`max.message.bytes`: the largest batch accepted (MESSAGE_TOO_LARGE above)."""
    message_timestamp_type: str = TIMESTAMP_TYPE_CREATE_TIME
    """`message.timestamp.type`: CreateTime or LogAppendTime."""
    flush_messages: int = LONG_MAX
    """`flush.messages`: fsync after this many appended messages."""
    flush_ms: int = LONG_MAX
    """`flush.ms`: fsync when the last flush is this old (checked by `maintenance`)."""
    delete_retention_ms: int = 24 * 3600 * 1000
    """`delete.retention.ms`: how long compaction keeps tombstones."""
    min_cleanable_dirty_ratio: float = 0.5
    """`min.cleanable.dirty.ratio`: dirty bytes / (clean + dirty) needed to compact."""
    min_compaction_lag_ms: int = 0
    """`min.compaction.lag.ms`: records younger than this are never compacted."""
    max_compaction_lag_ms: int = LONG_MAX
    """`max.compaction.lag.ms`: a dirty record older than this forces a cleaning."""
    file_delete_delay_ms: int = 60_000
    """`file.delete.delay.ms`: deleted segments linger as `.deleted` this long."""
    min_insync_replicas: int = 1
    """`min.insync.replicas`: carried for the replica manager; unused by `log/`."""
    compression_type: str = "producer"
    """`compression.type`: only `producer` (keep the producer's codec) is implemented."""

    def __post_init__(self) -> None:
        _check(self.segment_bytes >= 14, "segment.bytes must be at least 14")
        _check(self.segment_bytes <= INT_MAX, "segment.bytes must fit in an int32")
        _check(self.segment_ms >= 1, "segment.ms must be at least 1")
        _check(self.segment_jitter_ms >= 0, "segment.jitter.ms must be >= 0")
        _check(self.segment_index_bytes >= 12, "segment.index.bytes must be at least 12")
        _check(self.segment_index_bytes <= INT_MAX, "segment.index.bytes must fit in an int32")
        _check(self.index_interval_bytes >= 0, "index.interval.bytes must be >= 0")
        _check(self.retention_ms >= -1, "retention.ms must be >= -1")
        _check(self.retention_bytes >= -1, "retention.bytes must be >= -1")
        _check(bool(self.cleanup_policy), "cleanup.policy must name delete and/or compact")
        unknown = self.cleanup_policy - {CLEANUP_POLICY_DELETE, CLEANUP_POLICY_COMPACT}
        _check(not unknown, f"cleanup.policy: unknown value(s) {sorted(unknown)}")
        _check(self.max_message_bytes >= 0, "max.message.bytes must be >= 0")
        _check(
            self.message_timestamp_type
            in (TIMESTAMP_TYPE_CREATE_TIME, TIMESTAMP_TYPE_LOG_APPEND_TIME),
            "message.timestamp.type must be CreateTime or LogAppendTime",
        )
        _check(self.flush_messages >= 1, "flush.messages must be at least 1")
        _check(self.flush_ms >= 0, "flush.ms must be >= 0")
        _check(self.delete_retention_ms >= 0, "delete.retention.ms must be >= 0")
        _check(
            0.0 <= self.min_cleanable_dirty_ratio <= 1.0,
            "min.cleanable.dirty.ratio must be between 0 and 1",
        )
        _check(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms must be >= 0")
        _check(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms must be at least 1")
        _check(self.file_delete_delay_ms >= 0, "file.delete.delay.ms must be >= 0")
        _check(self.min_insync_replicas >= 1, "min.insync.replicas must be at least 1")
        _check(
            self.compression_type in _COMPRESSION_TYPES,
            f"compression.type must be one of {sorted(_COMPRESSION_TYPES)}",
        )

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME

    @property
    def max_offset_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    @property
    def max_time_index_entries(self) -> int:
        return self.segment_index_bytes // 12

    def with_overrides(self, properties: Mapping[str, str]) -> LogConfig:
        """This config with topic-level `properties` (Kafka names) applied on top."""
        changes: dict[str, object] = {}
        for key, raw in properties.items():
            if key in THROTTLED_REPLICAS_KEYS:
                validate_throttled_replicas(key, raw)
                continue
            if key in _IGNORED_TOPIC_KEYS:
                continue
            if key not in _TOPIC_KEYS:
                raise ValueError(f"unknown topic config {key!r}")
            field, parse = _TOPIC_KEYS[key]
            try:
                changes[field] = parse(raw.strip())
            except ValueError as error:
                raise ValueError(f"invalid value {raw!r} for {key}: {error}") from None
        try:
            return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        except ValueError as error:
            raise ValueError(f"invalid topic config: {error}") from None

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], *, defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build from topic-level properties (`segment.bytes`=...); ValueError if invalid."""
        return (defaults or cls()).with_overrides(properties)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, str]) -> LogConfig:
        """The broker-wide defaults from `log.*` keys (`log.segment.bytes`, ...).

        Unknown keys are ignored: a broker config holds many settings that are not ours.
        """
        topic: dict[str, str] = {}
        for broker_key, topic_key in _BROKER_KEYS.items():
            if broker_key in properties:
                topic[topic_key] = properties[broker_key]
        for unit, factor in (("ms", 1), ("minutes", 60_000), ("hours", 3_600_000)):
            if "retention.ms" not in topic and f"log.retention.{unit}" in properties:
                value = _parse_long(properties[f"log.retention.{unit}"])
                topic["retention.ms"] = str(value * factor if value >= 0 else -1)
            if "segment.ms" not in topic and f"log.roll.{unit}" in properties:
                topic["segment.ms"] = str(_parse_long(properties[f"log.roll.{unit}"]) * factor)
        return cls.from_properties(topic)


THROTTLED_REPLICAS_KEYS = frozenset(
    {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
)
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def validate_throttled_replicas(key: str, raw: str) -> None:
    """Kafka's ThrottledReplicaListValidator: `*` or `partition:broker,...` (may be empty).

    ValueError with Kafka's message otherwise."""
    items = [item.strip() for item in raw.split(",")]
    if raw.strip() == "*" or all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        return
    raise ValueError(
        f"Invalid value {raw} for configuration {key}: {key} must be the literal '*' or a "
        "list of replicas in the following format: [partitionId]:[brokerId],"
        "[partitionId]:[brokerId],..."
    )


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _parse_long(raw: str) -> int:
    value = int(raw)
    if not -(1 << 63) <= value <= LONG_MAX:
        raise ValueError("out of the int64 range")
    return value


def _parse_ratio(raw: str) -> float:
    return float(raw)


def _parse_policy(raw: str) -> frozenset[str]:
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _parse_timestamp_type(raw: str) -> str:
    return raw


def _parse_string(raw: str) -> str:
    return raw


_TOPIC_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "segment.bytes": ("segment_bytes", _parse_long),
    "segment.ms": ("segment_ms", _parse_long),
    "segment.jitter.ms": ("segment_jitter_ms", _parse_long),
    "segment.index.bytes": ("segment_index_bytes", _parse_long),
    "index.interval.bytes": ("index_interval_bytes", _parse_long),
    "retention.ms": ("retention_ms", _parse_long),
    "retention.bytes": ("retention_bytes", _parse_long),
    "cleanup.policy": ("cleanup_policy", _parse_policy),
    "max.message.bytes": ("max_message_bytes", _parse_long),
    "message.timestamp.type": ("message_timestamp_type", _parse_timestamp_type),
    "flush.messages": ("flush_messages", _parse_long),
    "flush.ms": ("flush_ms", _parse_long),
    "delete.retention.ms": ("delete_retention_ms", _parse_long),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_long),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _parse_long),
    "file.delete.delay.ms": ("file_delete_delay_ms", _parse_long),
    "min.insync.replicas": ("min_insync_replicas", _parse_long),
    "compression.type": ("compression_type", _parse_string),
}

_BROKER_KEYS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
}
