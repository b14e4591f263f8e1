"""`__consumer_offsets` record codecs: Kafka's layouts, round trips, hostile bytes (GRP-21)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafka.group.records import (
    CorruptOffsetsRecordError,
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitRecord,
    OffsetCommitValue,
    UnknownRecord,
    decode_record,
    encode_record,
)


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_golden_bytes() -> None:
    record = OffsetCommitRecord("g", "t", 3, OffsetCommitValue(42, 7, "meta", 1000))
    key, value = encode_record(record)
    assert key == struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 3)
    assert value == (struct.pack(">hqi", 3, 42, 7) + _string("meta") + struct.pack(">q", 1000))
    assert decode_record(key, value) == record


def test_offset_commit_value_v1_carries_expire_timestamp() -> None:
    record = OffsetCommitRecord("g", "t", 0, OffsetCommitValue(5, -1, "", 10, 99))
    key, value = encode_record(record)
    assert value is not None
    assert value[:2] == struct.pack(">h", 1)
    assert decode_record(key, value) == record


def test_older_offset_values_decode() -> None:
    key = struct.pack(">h", 0) + _string("g") + _string("t") + struct.pack(">i", 1)
    v0 = struct.pack(">hq", 0, 9) + _string("m") + struct.pack(">q", 5)
    assert decode_record(key, v0) == OffsetCommitRecord(
        "g", "t", 1, OffsetCommitValue(9, -1, "m", 5)
    )
    v2 = struct.pack(">hq", 2, 9) + _string("m") + struct.pack(">q", 5)
    assert decode_record(key, v2) == OffsetCommitRecord(
        "g", "t", 1, OffsetCommitValue(9, -1, "m", 5)
    )


def test_flexible_v4_offset_value_decodes() -> None:
    key = struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 0)
    # offset, leader epoch, compact string "ab" (length+1 = 3), commit timestamp, tagged
    # fields: one field, tag 0, 2 bytes.
    value = struct.pack(">hqi", 4, 11, 2) + bytes([3]) + b"ab" + struct.pack(">q", 77)
    value += bytes([1, 0, 2]) + b"xx"
    assert decode_record(key, value) == OffsetCommitRecord(
        "g", "t", 0, OffsetCommitValue(11, 2, "ab", 77)
    )


def test_group_metadata_golden_layout() -> None:
    member = MemberMetadata("m-1", "i-1", "client", "/127.0.0.1", 300, 10, b"sub", b"asg")
    record = GroupMetadataRecord(
        "g", GroupMetadataValue("consumer", 4, "range", "m-1", 1234, (member,))
    )
    key, value = encode_record(record)
    assert key == struct.pack(">h", 2) + _string("g")
    expected = (
        struct.pack(">h", 3)
        + _string("consumer")
        + struct.pack(">i", 4)
        + _string("range")
        + _string("m-1")
        + struct.pack(">qi", 1234, 1)
        + _string("m-1")
        + _string("i-1")
        + _string("client")
        + _string("/127.0.0.1")
        + struct.pack(">ii", 300, 10)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert value == expected
    assert decode_record(key, value) == record


def test_group_metadata_v0_defaults() -> None:
    key = struct.pack(">h", 2) + _string("g")
    value = (
        struct.pack(">h", 0)
        + _string("consumer")
        + struct.pack(">i", 1)
        + struct.pack(">h", -1)  # protocol null
        + struct.pack(">h", -1)  # leader null
        + struct.pack(">i", 1)
        + _string("m")
        + _string("c")
        + _string("h")
        + struct.pack(">i", 6000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    decoded = decode_record(key, value)
    assert isinstance(decoded, GroupMetadataRecord)
    assert decoded.value == GroupMetadataValue(
        "consumer", 1, None, None, -1, (MemberMetadata("m", None, "c", "h", 6000, 6000, b"", b""),)
    )


def test_tombstones_round_trip() -> None:
    for record in (OffsetCommitRecord("g", "t", 0, None), GroupMetadataRecord("g", None)):
        key, value = encode_record(record)
        assert value is None
        assert decode_record(key, None) == record


def test_newer_record_types_are_skipped_not_errors() -> None:
    # key 9+ (share and streams groups); 3-8 are KIP-848 records (test_consumer_group.py)
    assert decode_record(struct.pack(">h", 10) + _string("g"), b"\x00") == UnknownRecord(10)


def test_truncated_and_unknown_versions_raise() -> None:
    key, value = encode_record(OffsetCommitRecord("g", "t", 0, OffsetCommitValue(1, 1, "", 1)))
    assert value is not None
    with pytest.raises(CorruptOffsetsRecordError):
        decode_record(key[:-1], value)
    with pytest.raises(CorruptOffsetsRecordError):
        decode_record(key, value[:-1])
    with pytest.raises(CorruptOffsetsRecordError):
        decode_record(key, struct.pack(">h", 9) + value[2:])
    with pytest.raises(CorruptOffsetsRecordError):
        decode_record(b"\xff\xff", None)


_names = st.text(max_size=12)
# A value with an explicit expiry is written as v1, which has no leader epoch (OffsetCommit
# v2-v4 carry retention_time but no leader epoch, so the coordinator never needs both).
_offset_values = st.one_of(
    st.builds(
        OffsetCommitValue,
        offset=st.integers(-1, 2**63 - 1),
        leader_epoch=st.integers(-1, 2**31 - 1),
        metadata=_names,
        commit_timestamp_ms=st.integers(0, 2**62),
    ),
    st.builds(
        OffsetCommitValue,
        offset=st.integers(-1, 2**63 - 1),
        leader_epoch=st.just(-1),
        metadata=_names,
        commit_timestamp_ms=st.integers(0, 2**62),
        expire_timestamp_ms=st.integers(0, 2**62),
    ),
)
_offset_records = st.builds(
    OffsetCommitRecord,
    group_id=_names,
    topic=_names,
    partition=st.integers(0, 2**31 - 1),
    value=st.one_of(st.none(), _offset_values),
)
_members = st.builds(
    MemberMetadata,
    member_id=_names,
    group_instance_id=st.one_of(st.none(), _names),
    client_id=_names,
    client_host=_names,
    rebalance_timeout_ms=st.integers(0, 2**31 - 1),
    session_timeout_ms=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=20),
    assignment=st.binary(max_size=20),
)
_group_records = st.builds(
    GroupMetadataRecord,
    group_id=_names,
    value=st.one_of(
        st.none(),
        st.builds(
            GroupMetadataValue,
            protocol_type=_names,
            generation=st.integers(0, 2**31 - 1),
            protocol=st.one_of(st.none(), _names),
            leader=st.one_of(st.none(), _names),
            current_state_timestamp_ms=st.integers(-1, 2**62),
            members=st.lists(_members, max_size=3).map(tuple),
        ),
    ),
)


@given(st.one_of(_offset_records, _group_records))
def test_round_trip(record: OffsetCommitRecord | GroupMetadataRecord) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=64)))
def test_arbitrary_bytes_never_crash(key: bytes, value: bytes | None) -> None:
    try:
        decode_record(key, value)
    except CorruptOffsetsRecordError:
        pass
