"""LogConfig: Kafka's names and defaults, parsing and validation."""

from __future__ import annotations

import pytest

from trafka.log.config import LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.cleanup_policy == frozenset({"delete"})
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.flush_messages == config.flush_ms == (1 << 63) - 1
    assert config.delete_retention_ms == 86400000
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.min_compaction_lag_ms == 0
    assert config.file_delete_delay_ms == 60000


def test_from_properties_parses_kafka_names() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1024",
            "cleanup.policy": "compact,delete",
            "retention.ms": "-1",
            "min.cleanable.dirty.ratio": "0.1",
            "message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "true",
        }
    )
    assert config.segment_bytes == 1024
    assert config.compact and config.delete
    assert config.retention_ms == -1
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.log_append_time


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("segment.bytes", "abc", "segment.bytes"),
        ("segment.bytes", "1", "segment.bytes"),
        ("cleanup.policy", "shred", "cleanup.policy"),
        ("message.timestamp.type", "Whenever", "message.timestamp.type"),
        ("min.cleanable.dirty.ratio", "2", "min.cleanable.dirty.ratio"),
        ("no.such.config", "1", "unknown topic config"),
    ],
)
def test_invalid_properties_raise_clear_errors(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_properties({key: value})


def test_broker_properties_precedence_ms_minutes_hours() -> None:
    config = LogConfig.from_broker_properties(
        {"log.retention.hours": "1", "log.retention.minutes": "2", "log.segment.bytes": "4096"}
    )
    assert config.retention_ms == 120_000
    assert config.segment_bytes == 4096
    assert LogConfig.from_broker_properties({"log.retention.hours": "-1"}).retention_ms == -1
