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


def test_a_field_of_another_struct_of_the_api_is_dropped() -> None:
    """The check is per API, not per struct: FindCoordinator's handler answers v0-3 with the
    mapping of v4's `Coordinator` entry, whose `key` the v0-3 response lacks (dropped)."""
    from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse

    answer = {"key": "g", "error_code": 0, "node_id": 1, "host": "h", "port": 9092}
    built = build(FindCoordinatorResponse, {"throttle_time": 0, **answer})
    assert (built.node_id, built.host, built.port) == (1, "h", 9092)
    with pytest.raises(UnknownField, match="kye"):
        build(FindCoordinatorResponse, {**answer, "kye": "g"})


def test_trafka_declared_versions_share_their_structs_fields_with_kio() -> None:
    """Produce v0-2 are declared by trafka (`ProduceResponseV0`, ...): the same data as for
    kio's versions builds them (v2's `log_append_time`, v8's `record_errors` dropped)."""
    from trafka.net.messages.produce_v0_v2 import ProduceResponseV0

    data = {
        "throttle_time": 0,
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "base_offset": 7, "log_append_time": -1, "record_errors": []}
                ],
            }
        ],
    }
    built = build(ProduceResponseV0, data)
    assert built.responses[0].partition_responses[0].base_offset == 7
    with pytest.raises(UnknownField, match="base_ofset"):
        build(
            ProduceResponseV0,
            {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_ofset": 7}]}]},
        )
