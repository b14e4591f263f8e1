"""The handler registry and ApiVersions derived from it."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trafka.net import codec, protocol
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.registry import load_all


def test_every_handler_has_a_docstring_naming_its_range() -> None:
    registry = load_all()
    for handler in registry.handlers():
        module = __import__(handler.module, fromlist=["_"])
        doc = module.__doc__ or ""
        assert doc.startswith(f"{handler.name} v"), handler.module


def test_advertised_ranges_have_schemas_and_look_like_kafka_3() -> None:
    registry = load_all()
    versions = {key: (low, high) for key, low, high in registry.supported_versions()}
    # kafka-python infers (3, 0) from ListOffsets v7 and needs Metadata >= 4, Produce >= 3
    assert versions[2][1] == 7
    assert versions[3][1] >= 5
    assert versions[0] == (0, 9)
    assert versions[1][0] <= 4 <= versions[1][1]
    # KIP-714 telemetry (an empty subscription) and KIP-966 DescribeTopicPartitions, v0 only
    assert versions[71] == versions[72] == versions[75] == (0, 0)
    supported = protocol.SupportedApis(
        protocol.ApiVersionRange(h.api_key, h.min_version, h.max_version, h.advertised_min_version)
        for h in registry.handlers()
    )
    assert len(supported) == len(registry.handlers())
    assert list(registry.supported_apis()) == list(supported)
    # every version a node accepts can be decoded and answered (not checked at start-up)
    assert supported.missing_schemas() == []


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_response_encodes_with_empty_tags(version: int) -> None:
    registry = load_all()
    cls = codec.response_class(18, version)
    response = build(
        cls,
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, lo, hi in registry.supported_versions()
            ],
            "throttle_time": 0,
        },
    )
    body = codec.encode_response(response)
    decoded = codec.decode_response(18, version, body)
    assert {int(a.api_key) for a in decoded.api_keys} == {
        k for k, _, _ in registry.supported_versions()
    }
    if version >= 3:
        assert body.endswith(b"\x00")  # empty tagged fields (old librdkafka, REFERENCE §6)


def test_build_fills_missing_fields_and_converts_wire_types() -> None:
    request_cls = codec.request_class(0, 9)
    assert request_cls is not None
    request = request_cls(
        transactional_id=None,
        acks=1,
        timeout=__import__("datetime").timedelta(seconds=1),
        topic_data=(),
    )
    cls = response_class(request)
    response = build(
        cls,
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time": -1}
                    ],
                }
            ],
            "throttle_time": 0,
        },
    )
    decoded = codec.decode_response(0, 9, codec.encode_response(response))
    partition = decoded.responses[0].partition_responses[0]
    assert int(partition.base_offset) == 5
    assert partition.log_append_time is None


def test_protocol_md_lists_every_advertised_range() -> None:
    """docs/protocol.md's "Every Kafka 4 API" table says what ApiVersions advertises: a row
    per API key, with our range or "not implemented" (keep it current with the handlers)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    table = doc.split("## Every Kafka 4 API", 1)[1].split("\n## ", 1)[0]
    rows = {
        int(m.group(1)): m.group(2).strip()
        for m in re.finditer(r"^\| \w+ \((\d+)\) \| ([^|]+) \|", table, re.M)
    }
    advertised = {key: (low, high) for key, low, high in load_all().supported_versions()}
    for key, (low, high) in advertised.items():
        expected = f"{low}–{high}" if low != high else str(low)
        assert rows.get(key, "").startswith(expected), (key, rows.get(key), expected)
    for key, shown in rows.items():
        if key not in advertised and key not in (4, 5, 6, 7):  # controller channel: ours
            assert shown == "not implemented", (key, shown)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_the_api_versions_handler_answers_every_handshake_with_the_same_bytes(
    version: int,
) -> None:
    """The answer is encoded once per version and registry generation (issue 19's S2)."""
    from types import SimpleNamespace

    from trafka.net.server import EncodedResponse
    from trafka.node.handlers import api_versions

    registry = load_all()
    request = codec.request_class(18, version)
    assert request is not None
    request_object = build(request, {"client_software_name": "t", "client_software_version": "1"})
    ctx: Any = SimpleNamespace(api_version=version)
    first = trio.run(api_versions.handle, ctx, request_object)
    assert isinstance(first, EncodedResponse)
    assert trio.run(api_versions.handle, ctx, request_object) is first
    decoded = codec.decode_response(18, version, b"".join(bytes(c) for c in first.chunks))
    assert [(int(a.api_key), a.min_version, a.max_version) for a in decoded.api_keys] == [
        (k, lo, hi) for k, lo, hi in registry.supported_versions()
    ]
    # a handler added (again) to the table: the answer is derived again
    registry.add(registry.handlers()[0])
    again = trio.run(api_versions.handle, ctx, request_object)
    assert again is not first and again.chunks == first.chunks
