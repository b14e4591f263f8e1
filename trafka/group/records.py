"""Records of the `__consumer_offsets` topic, in Kafka's key/value layouts (GRP-21).

Both key and value start with an int16 *version*; the key version says what the record is.
Strings are int16-length UTF-8, bytes are int32-length, nullable strings use length -1.
Version 4 values are flexible (KIP-482: unsigned-varint "compact" lengths + 1, a tagged-field
section at the end); we decode them, and write versions 3 (what Kafka 2.1-3.x writes).
Layouts (apache/kafka `group-coordinator/src/main/resources/common/message/*.json`):

    OffsetCommitKey   (key version 0 or 1): group string, topic string, partition int32
    GroupMetadataKey  (key version 2):      group string
    key versions 3-8: KIP-848 consumer groups (`consumer_records`); other key versions
    (share and streams groups): decoded as `UnknownRecord`, ignored

    OffsetCommitValue v0: offset int64, metadata string, commit_timestamp int64
                      v1: offset int64, metadata string, commit_timestamp int64,
                          expire_timestamp int64
                      v2: offset int64, metadata string, commit_timestamp int64
                      v3: offset int64, leader_epoch int32, metadata string,
                          commit_timestamp int64
                      v4: as v3, flexible
    GroupMetadataValue v0-v4: protocol_type string, generation int32,
                          protocol nullable string, leader nullable string,
                          current_state_timestamp int64 (v2+),
                          members [member_id string, group_instance_id nullable string (v3+),
                                   client_id string, client_host string,
                                   rebalance_timeout int32 (v1+), session_timeout int32,
                                   subscription bytes, assignment bytes]

A null value is a tombstone: the offset was deleted/expired, or the group was deleted.
Log compaction keeps the last record per key, so these records are the durable state of the
coordinator; `GroupCoordinator.load` rebuilds its state from them (failover, GRP-05).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from trafka.group.consumer_records import (
    CONSUMER_KEY_VERSIONS,
    ConsumerGroupRecord,
    CorruptConsumerRecordError,
    decode_consumer_record,
    encode_consumer_key,
    encode_consumer_value,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class CorruptOffsetsRecordError(ValueError):
    """A `__consumer_offsets` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # only v1 carries it; -1 = use offsets.retention.minutes


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """Committed offset of (group, topic, partition); `value=None` is a tombstone."""

    group_id: str
    topic: str
    partition: int
    value: OffsetCommitValue | None


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """Membership/generation of a group; `value=None` is a tombstone (group deleted)."""

    group_id: str
    value: GroupMetadataValue | None


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record type we do not model (share and streams groups): skipped."""

    key_version: int


OffsetsTopicRecord = OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord | UnknownRecord


# --- writing -------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self._parts.append(struct.pack(">h", value))

    def int32(self, value: int) -> None:
        self._parts.append(struct.pack(">i", value))

    def int64(self, value: int) -> None:
        self._parts.append(struct.pack(">q", value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.int16(len(data))
        self._parts.append(data)

    def bytes_(self, value: bytes) -> None:
        self.int32(len(value))
        self._parts.append(value)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


def encode_key(record: OffsetsTopicRecord) -> bytes:
    writer = _Writer()
    if isinstance(record, OffsetCommitRecord):
        writer.int16(OFFSET_COMMIT_KEY_VERSION)
        writer.string(record.group_id)
        writer.string(record.topic)
        writer.int32(record.partition)
    elif isinstance(record, GroupMetadataRecord):
        writer.int16(GROUP_METADATA_KEY_VERSION)
        writer.string(record.group_id)
    elif not isinstance(record, UnknownRecord):
        return encode_consumer_key(record)
    else:
        raise ValueError("unknown records are never written")
    return writer.getvalue()


def encode_value(record: OffsetsTopicRecord) -> bytes | None:
    if isinstance(record, UnknownRecord):
        raise ValueError("unknown records are never written")
    if not isinstance(record, OffsetCommitRecord | GroupMetadataRecord):
        return encode_consumer_value(record)
    if record.value is None:
        return None
    writer = _Writer()
    if isinstance(record.value, OffsetCommitValue):
        value = record.value
        if value.expire_timestamp_ms >= 0:
            # Only v1 carries an explicit expiry (OffsetCommit v2-v4 retention_time).
            writer.int16(1)
            writer.int64(value.offset)
            writer.string(value.metadata)
            writer.int64(value.commit_timestamp_ms)
            writer.int64(value.expire_timestamp_ms)
        else:
            writer.int16(OFFSET_COMMIT_VALUE_VERSION)
            writer.int64(value.offset)
            writer.int32(value.leader_epoch)
            writer.string(value.metadata)
            writer.int64(value.commit_timestamp_ms)
        return writer.getvalue()
    group = record.value
    writer.int16(GROUP_METADATA_VALUE_VERSION)
    writer.string(group.protocol_type)
    writer.int32(group.generation)
    writer.string(group.protocol)
    writer.string(group.leader)
    writer.int64(group.current_state_timestamp_ms)
    writer.int32(len(group.members))
    for member in group.members:
        writer.string(member.member_id)
        writer.string(member.group_instance_id)
        writer.string(member.client_id)
        writer.string(member.client_host)
        writer.int32(member.rebalance_timeout_ms)
        writer.int32(member.session_timeout_ms)
        writer.bytes_(member.subscription)
        writer.bytes_(member.assignment)
    return writer.getvalue()


def encode_record(record: OffsetsTopicRecord) -> tuple[bytes, bytes | None]:
    """(key, value) bytes of a record; value None is a tombstone."""
    return encode_key(record), encode_value(record)


# --- reading -------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("_data", "_flexible", "_position")

    def __init__(self, data: bytes, *, flexible: bool = False) -> None:
        self._data = data
        self._position = 0
        self._flexible = flexible

    def _take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise CorruptOffsetsRecordError("record truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def unsigned_varint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
        raise CorruptOffsetsRecordError("varint too long")

    def _length(self, *, int32: bool) -> int:
        if self._flexible:
            return self.unsigned_varint() - 1
        return self.int32() if int32 else self.int16()

    def nullable_string(self) -> str | None:
        length = self._length(int32=False)
        if length < 0:
            return None
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptOffsetsRecordError("string is not UTF-8") from error

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptOffsetsRecordError("null in a non-nullable string")
        return value

    def bytes_(self) -> bytes:
        length = self._length(int32=True)
        if length < 0:
            raise CorruptOffsetsRecordError("null in a non-nullable bytes field")
        return self._take(length)

    def array_length(self) -> int:
        length = self._length(int32=True)
        if length < 0 or length > len(self._data):
            raise CorruptOffsetsRecordError("bad array length")
        return length

    def tagged_fields(self) -> None:
        if not self._flexible:
            return
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()  # tag
            self._take(self.unsigned_varint())

    def expect_end(self) -> None:
        if self._position != len(self._data):
            raise CorruptOffsetsRecordError("trailing bytes after record")


def _decode_offset_value(data: bytes) -> OffsetCommitValue:
    version = _Reader(data).int16()
    if not 0 <= version <= 4:
        raise CorruptOffsetsRecordError(f"unknown OffsetCommitValue version {version}")
    reader = _Reader(data[2:], flexible=version >= 4)
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp_ms = reader.int64()
    expire_timestamp_ms = reader.int64() if version == 1 else -1
    reader.tagged_fields()
    reader.expect_end()
    return OffsetCommitValue(
        offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms
    )


def _decode_group_value(data: bytes) -> GroupMetadataValue:
    version = _Reader(data).int16()
    if not 0 <= version <= 4:
        raise CorruptOffsetsRecordError(f"unknown GroupMetadataValue version {version}")
    reader = _Reader(data[2:], flexible=version >= 4)
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp_ms = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.array_length()):
        member_id = reader.string()
        group_instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout_ms = reader.int32() if version >= 1 else -1
        session_timeout_ms = reader.int32()
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        reader.tagged_fields()
        members.append(
            MemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            )
        )
    reader.tagged_fields()
    reader.expect_end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp_ms, tuple(members)
    )


def decode_record(key: bytes, value: bytes | None) -> OffsetsTopicRecord:
    """Decode one `__consumer_offsets` record; raises `CorruptOffsetsRecordError`."""
    reader = _Reader(key)
    key_version = reader.int16()
    try:
        if key_version in (0, 1):
            group_id = reader.string()
            topic = reader.string()
            partition = reader.int32()
            reader.expect_end()
            offset_value = None if value is None else _decode_offset_value(value)
            return OffsetCommitRecord(group_id, topic, partition, offset_value)
        if key_version == GROUP_METADATA_KEY_VERSION:
            group_id = reader.string()
            reader.expect_end()
            group_value = None if value is None else _decode_group_value(value)
            return GroupMetadataRecord(group_id, group_value)
        if key_version in CONSUMER_KEY_VERSIONS:
            return decode_consumer_record(key, value)
    except CorruptConsumerRecordError as error:
        raise CorruptOffsetsRecordError(str(error)) from error
    except struct.error as error:  # pragma: no cover - _take guards every read
        raise CorruptOffsetsRecordError(str(error)) from error
    if key_version < 0:
        raise CorruptOffsetsRecordError(f"negative key version {key_version}")
    return UnknownRecord(key_version)
