"""Creation limits on every path (issue 12, item 4): the partition cap holds for explicit
assignments too, and segment.bytes has Kafka 4's minimum (KIP-1030)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.node.nodes import NodeUnderTest
from trafka.node.config.broker import BrokerConfig, ConfigError
from trafka.node.metadata_store import memory_store
from trafka.node.topics import MAX_PARTITIONS, TopicError


async def test_explicit_assignments_are_capped_before_they_are_walked(tmp_path: Path) -> None:
    async with memory_store() as store:
        node = NodeUnderTest(store, 1, tmp_path / "logs", live_brokers=lambda: [1])
        huge = {p: [1] for p in range(MAX_PARTITIONS + 1)}
        with pytest.raises(TopicError) as raised:
            node.topics.check_create(
                "big", -1, -1, huge, {}, default_partitions=1, default_replication_factor=1
            )
        assert raised.value.error_code == ErrorCode.invalid_partitions
        ok = node.topics.check_create(
            "ok", -1, -1, {0: [1], 1: [1]}, {}, default_partitions=1, default_replication_factor=1
        )
        assert ok == {0: [1], 1: [1]}


async def test_segment_bytes_below_one_mib_is_an_invalid_config(tmp_path: Path) -> None:
    async with memory_store() as store:
        node = NodeUnderTest(store, 1, tmp_path / "logs", live_brokers=lambda: [1])
        with pytest.raises(TopicError) as raised:
            node.configs.validate_topic_configs({"segment.bytes": "1000"})
        assert raised.value.error_code == ErrorCode.invalid_config
        node.configs.validate_topic_configs({"segment.bytes": str(1024 * 1024)})


def test_log_segment_bytes_below_one_mib_is_refused() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.build(1, {"log.segment.bytes": "1000"})
    with pytest.raises(ConfigError):
        BrokerConfig.build(1, {"num.partitions": "5000"})
    assert BrokerConfig.build(1, {"log.segment.bytes": "1048576"}).get_int("log.segment.bytes")
