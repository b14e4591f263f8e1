"""Request/response headers: golden bytes of each client's first ApiVersions, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafka.net import codec, headers, protocol


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return bytes([len(raw) + 1]) + raw


# librdkafka 2.x opens with ApiVersions v3 (flexible body, request header v2); kafka-python
# 3.x with v4 (same layout). Header: api_key 18, api_version, correlation_id, client_id as a
# classic int16 string, empty tag section; body: two compact strings + empty tag section.
LIBRDKAFKA_V3 = (
    struct.pack(">hhi", 18, 3, 1)
    + struct.pack(">h", 7)
    + b"rdkafka"
    + b"\x00"
    + _compact_string("confluent-kafka-python")
    + _compact_string("2.16.1-rdkafka-2.16.1")
    + b"\x00"
)
KAFKA_PYTHON_V4 = (
    struct.pack(">hhi", 18, 4, 1)
    + struct.pack(">h", 18)
    + b"kafka-python-3.0.12"[:18]
    + b"\x00"
    + _compact_string("kafka-python")
    + _compact_string("3.0.12")
    + b"\x00"
)
# kafkajs opens with v2, aiokafka with v0: request header v1, empty body.
KAFKAJS_V2 = struct.pack(">hhi", 18, 2, 0) + struct.pack(">h", 7) + b"kafkajs"
AIOKAFKA_V0 = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 8) + b"aiokafka"


@pytest.mark.parametrize(
    ("frame", "version", "client_id", "software"),
    [
        (LIBRDKAFKA_V3, 3, "rdkafka", ("confluent-kafka-python", "2.16.1-rdkafka-2.16.1")),
        (KAFKA_PYTHON_V4, 4, "kafka-python-3.0.1", ("kafka-python", "3.0.12")),
        (KAFKAJS_V2, 2, "kafkajs", None),
        (AIOKAFKA_V0, 0, "aiokafka", None),
    ],
)
def test_first_api_versions_request_of_each_client(
    frame: bytes, version: int, client_id: str, software: tuple[str, str] | None
) -> None:
    api_key, api_version, _ = headers.peek_request_prefix(frame)
    assert (api_key, api_version) == (18, version)
    header_version = protocol.request_header_version(api_key, api_version)
    assert header_version == (2 if version >= 3 else 1)
    header, offset = headers.parse_request_header(frame, header_version)
    assert header.client_id == client_id
    request = codec.decode_request(api_key, api_version, frame, offset)
    if software is not None:
        assert (request.client_software_name, request.client_software_version) == software
    # The request re-encodes to the same bytes.
    again = headers.encode_request_header(
        api_key, api_version, header.correlation_id, header.client_id, header_version
    ) + codec.encode_request(request)
    assert again == frame


def test_api_versions_response_always_uses_header_v0() -> None:
    for version in codec.known_versions(18):
        assert protocol.response_header_version(18, version) == 0
    assert protocol.response_header_version(3, 9) == 1  # Metadata v9 is flexible
    assert protocol.response_header_version(3, 8) == 0
    assert protocol.request_header_version(0, 9) == 2  # Produce v9 flexible
    assert protocol.request_header_version(1, 11) == 1  # Fetch v11 not
    assert protocol.request_header_version(1, 12) == 2
    assert protocol.request_header_version(7, 0) == 0  # ControlledShutdown v0


def test_header_v0_has_no_client_id() -> None:
    frame = struct.pack(">hhi", 7, 0, 9) + b"\x00\x00\x00\x01"
    header, offset = headers.parse_request_header(frame, 0)
    assert header.client_id is None and offset == 8


def test_header_v2_skips_unknown_tagged_fields() -> None:
    frame = (
        struct.pack(">hhih", 3, 12, 5, 1)
        + b"c"
        + b"\x02"  # two tagged fields
        + b"\x07\x02ab"  # tag 7, 2 bytes
        + b"\x09\x00"  # tag 9, 0 bytes
        + b"BODY"
    )
    header, offset = headers.parse_request_header(frame, 2)
    assert header.client_id == "c" and frame[offset:] == b"BODY"


def test_null_client_id() -> None:
    frame = headers.encode_request_header(3, 1, 77, None, 1)
    header, offset = headers.parse_request_header(frame, 1)
    assert header.client_id is None and offset == len(frame)


@pytest.mark.parametrize(
    ("frame", "header_version"),
    [
        (b"", 1),
        (b"\x00\x12\x00", 1),
        (struct.pack(">hhi", 18, 0, 1) + b"\x00", 1),  # truncated client_id length
        (struct.pack(">hhih", 18, 0, 1, 10) + b"abc", 1),  # client_id runs past the end
        (struct.pack(">hhih", 18, 0, 1, -2), 1),  # negative length other than -1
        (struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe", 1),  # not UTF-8
        (struct.pack(">hhih", 18, 3, 1, 0) + b"\x01\x01\x7f", 2),  # tag past the end
        (struct.pack(">hhih", 18, 3, 1, 0) + b"\xff" * 6, 2),  # varint too long
        (struct.pack(">hhih", 18, 3, 1, 0), 2),  # tag section missing
    ],
)
def test_malformed_headers_raise_malformed_header(frame: bytes, header_version: int) -> None:
    with pytest.raises(headers.MalformedHeader):
        headers.parse_request_header(frame, header_version)


@given(
    api_key=st.integers(-(2**15), 2**15 - 1),
    api_version=st.integers(-(2**15), 2**15 - 1),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=50),
    header_version=st.sampled_from([0, 1, 2]),
)
def test_request_header_round_trip(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int
) -> None:
    raw = headers.encode_request_header(
        api_key, api_version, correlation_id, client_id, header_version
    )
    header, offset = headers.parse_request_header(raw + b"rest", header_version)
    assert (header.api_key, header.api_version, header.correlation_id) == (
        api_key,
        api_version,
        correlation_id,
    )
    assert header.client_id == (client_id if header_version else None)
    assert offset == len(raw)


@given(correlation_id=st.integers(-(2**31), 2**31 - 1), version=st.sampled_from([0, 1]))
def test_response_header_round_trip(correlation_id: int, version: int) -> None:
    raw = headers.encode_response_header(correlation_id, version)
    assert len(raw) == 4 + version
    assert headers.parse_response_header(raw, version) == (correlation_id, len(raw))


@given(st.binary(max_size=64), st.sampled_from([0, 1, 2]))
def test_arbitrary_bytes_never_crash_the_header_parser(data: bytes, version: int) -> None:
    try:
        headers.parse_request_header(data, version)
    except headers.MalformedHeader:
        pass


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    raw = headers.write_unsigned_varint(value)
    assert headers.read_unsigned_varint(raw, 0) == (value, len(raw))
