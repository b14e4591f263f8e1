"""`kio_shape.build`: a key of another version is dropped, a misspelt key raises at once
(it used to be dropped silently, its field sent as zero)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatResponseV0
from kio.schema.heartbeat.v4.response import HeartbeatResponse as HeartbeatResponseV4

from trafka.net.kio_shape import UnknownField, build


def test_a_field_of_other_versions_is_dropped_and_a_misspelt_one_raises() -> None:
    v0 = build(HeartbeatResponseV0, {"throttle_time": 5, "error_code": 27})
    assert v0.error_code == ErrorCode.rebalance_in_progress
    v4 = build(HeartbeatResponseV4, {"throttle_time": 5, "error_code": 27})
    assert v4.throttle_time.total_seconds() == 0.005
    with pytest.raises(UnknownField, match="error_cod"):
        build(HeartbeatResponseV4, {"throttle_time": 5, "error_cod": 27})


def test_nested_entities_are_checked_too() -> None:
    from kio.schema.describe_cluster.v1.response import DescribeClusterResponse

    with pytest.raises(UnknownField, match="hots"):
        build(DescribeClusterResponse, {"brokers": [{"broker_id": 1, "hots": "x", "port": 1}]})
