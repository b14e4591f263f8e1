"""The bounds pre-check in front of kio's native reader (trafka.net.guard).

Regression: kio 0.6.5 reserved memory for a compact array from its claimed count, so a
20-byte request could abort the broker ("memory allocation of 34359738352 bytes failed").
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from trafka.net import codec, guard

st.register_type_strategy(Records, st.binary(max_size=40).map(Records))

_HUGE = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])  # uvarint 2**32 - 1


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 12, _HUGE + b"\x00" * 8),  # Metadata: compact array of structs
        (9, 6, b"\x02g\x02\x02t" + _HUGE),  # OffsetFetch: compact array of int32
        (0, 9, b"\x00\x00\x01\x00\x00\x00\x01" + _HUGE),  # Produce: topic_data
        (4, 4, b"\x00" * 16 + _HUGE),  # LeaderAndIsr v4 (declared): topic_states
    ],
)
def test_huge_compact_array_counts_are_refused_before_kio_allocates(
    api_key: int, version: int, body: bytes
) -> None:
    with pytest.raises(codec.MalformedMessage, match="BoundsError"):
        codec.decode_request(api_key, version, body)


def test_known_tagged_field_contents_are_checked_too() -> None:
    # ApiVersions v3 response: error 0, empty api_keys, throttle 0, one tag (0 =
    # supported_features, a compact array) whose content claims 2**32-2 entries.
    tag_body = _HUGE
    body = (
        b"\x00\x00"
        + b"\x01"
        + b"\x00\x00\x00\x00"
        + b"\x01"
        + b"\x00"
        + bytes([len(tag_body)])
        + tag_body
    )
    with pytest.raises(guard.BoundsError):
        guard.check_flexible(codec.response_class(18, 3), body, 0)  # type: ignore[arg-type]


_FLEXIBLE = [
    ("request", 0, 9),
    ("request", 1, 12),
    ("request", 3, 12),
    ("request", 18, 3),
    ("request", 4, 4),
    ("request", 5, 3),
    ("request", 6, 6),
    ("request", 7, 3),
    ("response", 1, 12),
    ("response", 3, 12),
    ("response", 18, 3),
    ("response", 7, 3),
]


def _class(kind: str, api_key: int, version: int) -> Any:
    lookup = codec.request_class if kind == "request" else codec.response_class
    return lookup(api_key, version)


@pytest.mark.slow
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(_FLEXIBLE))
def test_valid_messages_pass_the_guard_and_round_trip(
    data: st.DataObject, which: tuple[str, int, int]
) -> None:
    cls = _class(*which)
    message = data.draw(st.from_type(cls))
    try:
        raw = codec.encode_with_kio(message)
    except (ValueError, OverflowError, TypeError):
        return  # hypothesis built a value kio cannot encode (out-of-range phantom type)
    guard.check_flexible(cls, raw, 0)
    assert codec.decode_with_kio(cls, raw) == message


@pytest.mark.slow  # imports every kio schema module
def test_the_guard_has_a_rule_for_every_flexible_class() -> None:
    from kio.schema.index import api_key_map

    built = 0
    for api_key in sorted(set(api_key_map) | {4, 5, 6, 7}):
        for version in codec.known_versions(api_key):
            for cls in (
                codec.request_class(api_key, version),
                codec.response_class(api_key, version),
            ):
                assert cls is not None
                if cls.__flexible__:
                    guard._entity_skip(cls)  # raises TypeError for an unknown field type
                    built += 1
    assert built > 300


# ---- nulls where the schema allows none (Kafka: "non-nullable field X was serialized as
# null", a malformed request: the connection is closed before any handler runs) ----------


_CREATE_TOPIC_WITH_NULL_ASSIGNMENTS = b"".join(
    [
        b"\x00\x00\x00\x01",  # one topic
        b"\x00\x01t\x00\x00\x00\x01\x00\x01",  # name "t", 1 partition, replication factor 1
        b"\xff\xff\xff\xff",  # assignments: null
        b"\x00\x00\x00\x00",  # configs: none
        b"\x00\x00\x03\xe8\x00",  # timeout_ms, validate_only
    ]
)


@pytest.mark.parametrize(
    ("api_key", "version", "body", "field"),
    [
        # AlterConfigs v1 (int32 count -1) and v2 (compact count 0): resources
        (33, 1, b"\xff\xff\xff\xff\x00", "resources"),
        (33, 2, b"\x00\x00\x00", "resources"),
        # ListPartitionReassignments v0: one topic "a" whose partition_indexes is null
        (46, 0, b"\x00\x00\x03\xe8\x02\x02a\x00\x00\x00", "partition_indexes"),
        # CreateTopics v2: one topic whose assignments array is null
        (19, 2, _CREATE_TOPIC_WITH_NULL_ASSIGNMENTS, "assignments"),
        # DeleteGroups v2 (flexible): a null group name inside groups_names
        (42, 2, b"\x00\x00", "groups_names"),
    ],
)
def test_a_null_in_a_non_nullable_field_is_a_malformed_request(
    api_key: int, version: int, body: bytes, field: str
) -> None:
    with pytest.raises(codec.MalformedMessage, match=f"non-nullable field {field} "):
        codec.decode_request(api_key, version, body)


def test_nullable_fields_may_be_null() -> None:
    # ListPartitionReassignments: topics null = every reassignment
    assert codec.decode_request(46, 0, b"\x00\x00\x03\xe8\x00\x00").topics is None
    # Metadata v4 (non-flexible): topics null = every topic
    assert codec.decode_request(3, 4, b"\xff\xff\xff\xff\x01").topics is None
    # Produce v3: a null transactional_id
    produce = codec.decode_request(0, 3, b"\xff\xff\xff\xff\x00\x00\x03\xe8\x00\x00\x00\x00")
    assert produce.transactional_id is None


_LEGACY = [
    ("request", 0, 3),
    ("request", 1, 11),
    ("request", 3, 8),
    ("request", 8, 7),
    ("request", 11, 5),
    ("request", 19, 4),
    ("request", 33, 1),
    ("response", 1, 11),
    ("response", 3, 8),
]


@pytest.mark.slow
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(_LEGACY))
def test_valid_non_flexible_messages_pass_the_check(
    data: st.DataObject, which: tuple[str, int, int]
) -> None:
    cls = _class(*which)
    message = data.draw(st.from_type(cls))
    try:
        raw = codec.encode_with_kio(message)
    except (ValueError, OverflowError, TypeError):
        return
    guard.check(cls, raw, 0, guard.MAX_REQUEST_ELEMENTS)
    assert codec.decode_with_kio(cls, raw) == message


# ---- the element cap (kio decodes a body in one call holding the GIL) ----------------------


def _offset_fetch_v1(partitions: int) -> bytes:
    """OffsetFetch v1 (int32 counts): group "g", one topic "t" with `partitions` indexes."""
    return (
        b"\x00\x01g"
        + b"\x00\x00\x00\x01\x00\x01t"
        + partitions.to_bytes(4, "big")
        + b"\x00\x00\x00\x07" * partitions
    )


def _offset_fetch_v6(partitions: int) -> bytes:
    """OffsetFetch v6 (compact): the same, plus require_stable and tag sections."""
    count = bytearray()
    value = partitions + 1
    while value >= 0x80:
        count.append((value & 0x7F) | 0x80)
        value >>= 7
    count.append(value)
    return (
        b"\x02g"
        + b"\x02"
        + b"\x02t"
        + bytes(count)
        + b"\x00\x00\x00\x07" * partitions
        + b"\x00"
        + b"\x00"
        + b"\x00\x00"  # topic tags, require_stable, request tags
    )


@pytest.mark.parametrize(("version", "body_of"), [(1, _offset_fetch_v1), (6, _offset_fetch_v6)])
def test_a_request_of_over_a_million_elements_is_refused_before_decoding(
    version: int, body_of: Any
) -> None:
    cap = guard.MAX_REQUEST_ELEMENTS
    with pytest.raises(codec.MalformedMessage, match="array elements in one body"):
        codec.decode_request(9, version, body_of(cap))  # the topic itself is one more
    request = codec.decode_request(9, version, body_of(cap - 1))
    assert len(request.topics[0].partition_indexes) == cap - 1
    # an answer is not capped: our clients read what a large cluster says
    guard.check(codec.request_class(9, version), body_of(cap), 0, None)
