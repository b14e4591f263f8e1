"""Broker keys that Kafka's own tools write: they must be known, dynamic and typed.

`kafka-reassign-partitions --verify` (Kafka 4.4, `clearBrokerLevelThrottles`) deletes three
dynamic broker keys on every broker in one IncrementalAlterConfigs; one unknown key fails the
whole resource with INVALID_CONFIG and the tool exits 1 after a completed reassignment.
tests/cluster/test_java_tools.py runs the tool itself.
"""

from __future__ import annotations

import pytest

from trafka.node.config.broker import ConfigError, definition

REASSIGN_THROTTLE_KEYS = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
]


@pytest.mark.parametrize("key", REASSIGN_THROTTLE_KEYS)
def test_reassign_throttle_keys_are_dynamic_longs(key: str) -> None:
    config_def = definition(key)
    assert config_def.dynamic
    assert config_def.parse("1000000") == 1_000_000
    assert config_def.default == 2**63 - 1  # Long.MAX_VALUE: no limit
    with pytest.raises(ConfigError):
        config_def.parse("-1")
