"""trafka's own (non-Kafka) messages: TrafkaDescribeZNodes round-trips through trafka.net.codec."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from trafka.net import codec, protocol
from trafka.net.messages import DECLARED_API_NAMES, PRIVATE_API_KEYS
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_KEY,
    DescribeZNodesRequestV0,
    DescribeZNodesResponseV0,
    ZNodeEntryV0,
    ZNodeSessionV0,
)


def test_the_key_is_outside_kafkas_range_and_private() -> None:
    from kio.schema.index import api_key_map

    assert DESCRIBE_ZNODES_API_KEY not in api_key_map
    assert 10 * max(api_key_map) < DESCRIBE_ZNODES_API_KEY
    assert DESCRIBE_ZNODES_API_KEY in PRIVATE_API_KEYS
    assert codec.api_name(DESCRIBE_ZNODES_API_KEY) == "TrafkaDescribeZNodes"
    assert DECLARED_API_NAMES[DESCRIBE_ZNODES_API_KEY] == "TrafkaDescribeZNodes"
    assert codec.known_versions(DESCRIBE_ZNODES_API_KEY) == (0,)
    assert not codec.is_flexible(DESCRIBE_ZNODES_API_KEY, 0)
    assert protocol.request_header_version(DESCRIBE_ZNODES_API_KEY, 0) == 1
    assert protocol.response_header_version(DESCRIBE_ZNODES_API_KEY, 0) == 0


def test_request_round_trip_and_layout() -> None:
    request = DescribeZNodesRequestV0(
        paths=("/brokers", "/controller"),
        include_data=True,
        include_stat=True,
        include_children=False,
        recursive=True,
        max_nodes=i32(500),
        resume_after="/brokers/ids",
        include_sessions=True,
        sync=True,
    )
    body = codec.encode_request(request)
    assert codec.decode_request(DESCRIBE_ZNODES_API_KEY, 0, body) == request
    # int32 count + int16-length strings, then bool flags, int32, nullable string, bools.
    expected = (
        struct.pack(">i", 2)
        + struct.pack(">h", 8)
        + b"/brokers"
        + struct.pack(">h", 11)
        + b"/controller"
        + bytes([1, 1, 0, 1])
        + struct.pack(">i", 500)
        + struct.pack(">h", 12)
        + b"/brokers/ids"
        + bytes([1, 1])
    )
    assert body == expected
    fresh = DescribeZNodesRequestV0(paths=("/",))
    decoded = codec.decode_request(DESCRIBE_ZNODES_API_KEY, 0, codec.encode_request(fresh))
    assert decoded.resume_after is None and decoded.max_nodes == 10000


def test_response_round_trip_with_nulls_binary_and_sessions() -> None:
    response = DescribeZNodesResponseV0(
        error_code=ErrorCode.none,
        last_zxid=i64(118),
        next_path_index=i32(0),
        next_resume_after="/brokers/ids/1",
        entries=(
            ZNodeEntryV0(
                path="/brokers/ids/1",
                data=b'{"version":5}',
                czxid=i64(7),
                mzxid=i64(9),
                pzxid=i64(7),
                ctime_ms=i64(1_700_000_000_000),
                mtime_ms=i64(1_700_000_000_500),
                version=i32(2),
                cversion=i32(0),
                ephemeral_owner=i64(5),
                data_length=i32(13),
                num_children=i32(0),
            ),
            ZNodeEntryV0(path="/bin", data=b"\x00\xff", children=("a", "b")),
            ZNodeEntryV0(path="/gone", error_code=i16(-101), data=None),
        ),
        sessions=(ZNodeSessionV0(session_id=i64(5), owner="node-1", timeout_ms=i32(9000)),),
    )
    body = codec.encode_response(response)
    decoded = codec.decode_response(DESCRIBE_ZNODES_API_KEY, 0, body)
    assert decoded == response
    assert decoded.entries[2].data is None and decoded.entries[2].error_code == -101
    error = DescribeZNodesResponseV0(error_code=ErrorCode.invalid_request, error_message="bad")
    assert codec.decode_response(DESCRIBE_ZNODES_API_KEY, 0, codec.encode_response(error)) == error


@pytest.mark.parametrize("cut", [1, 5, 9, 20])
def test_truncated_request_is_malformed(cut: int) -> None:
    body = codec.encode_request(DescribeZNodesRequestV0(paths=("/brokers/ids",)))
    with pytest.raises(codec.MalformedMessage):
        codec.decode_request(DESCRIBE_ZNODES_API_KEY, 0, body[:cut])


def test_the_v0_error_body_leaves_private_apis_out() -> None:
    supported = protocol.SupportedApis(
        [
            protocol.ApiVersionRange(18, 0, 3),
            protocol.ApiVersionRange(DESCRIBE_ZNODES_API_KEY, 0, 0),
        ]
    )
    assert supported.accepts(DESCRIBE_ZNODES_API_KEY, 0)
    body = protocol.api_versions_v0_error_body(supported)
    assert body == struct.pack(">hihhh", 35, 1, 18, 0, 3)
