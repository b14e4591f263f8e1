"""`__consumer_offsets` records of KIP-848 consumer groups, in Kafka 4.0's layouts.

apache/kafka `group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`.
A key is an int16 *key version* (the record type) followed by its fields in the classic
(non-flexible) encoding: int16-length strings. A value is an int16 version (0) followed by
its fields in the flexible encoding (KIP-482): compact strings / arrays (unsigned varint
length + 1, 0 = null), 16-byte uuids, and an empty tagged-field section after every struct.

    key 3 ConsumerGroupMetadata              key: group     value: epoch int32
    key 4 ConsumerGroupPartitionMetadata     key: group     value: topics [topic_id uuid,
              topic_name string, num_partitions int32, partition_metadata [partition int32,
              racks [string]] (written when some partition has racks)]
    key 5 ConsumerGroupMemberMetadata        key: group, member
              value: instance_id string?, rack_id string?, client_id string,
              client_host string, subscribed_topic_names [string],
              subscribed_topic_regex string?, rebalance_timeout_ms int32,
              server_assignor string?, tag 0: classic_member_metadata? [session_timeout_ms
              int32, supported_protocols [name string, metadata bytes]] (a classic member
              of a consumer group, KIP-848 online migration)
    key 6 ConsumerGroupTargetAssignmentMetadata  key: group  value: assignment_epoch int32
    key 7 ConsumerGroupTargetAssignmentMember    key: group, member
              value: topic_partitions [topic_id uuid, partitions [int32]]
    key 8 ConsumerGroupCurrentMemberAssignment   key: group, member
              value: member_epoch int32, previous_member_epoch int32, state int8,
              assigned_partitions [topic_id uuid, partitions [int32]],
              partitions_pending_revocation [topic_id uuid, partitions [int32]]

A null value is a tombstone. Tagged fields added after 4.0 (metadata hash, assignment
epochs per partition) are skipped when read. Kafka 4.1+ stops writing key 4 (KIP-1101's
metadata hash); we write it, and read it back only as the group's last known topics.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_VERSIONS = frozenset(range(3, 9))
_MAX_ITEMS = 1_000_000
MAX_RACK_PARTITIONS = 100_000
"""Bound on the partitions whose racks a record may carry (a hostile record cannot make the
loader allocate beyond it)."""

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


class CorruptConsumerRecordError(ValueError):
    """A KIP-848 key or value that does not decode."""


def normalized_racks(per_partition: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    """Per-partition racks as `TopicMetadataEntry.racks` holds them: each sorted, without the
    trailing partitions that have none (so equal metadata compares equal)."""
    racks = [tuple(sorted(set(r))) for r in per_partition]
    while racks and not racks[-1]:
        racks.pop()
    return tuple(racks)


@dataclass(frozen=True, slots=True)
class TopicMetadataEntry:
    topic_id: uuid.UUID
    name: str
    partitions: int
    racks: tuple[tuple[str, ...], ...] = ()
    """Per partition, the sorted racks of its replicas' brokers (empty: none known); the
    rack-aware assignors use them, and a change moves the group epoch (KIP-1101's rule)."""

    def partition_racks(self, partition: int) -> tuple[str, ...]:
        return self.racks[partition] if 0 <= partition < len(self.racks) else ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription) in preference order


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataRecord:
    group_id: str
    epoch: int | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataRecord:
    group_id: str
    topics: tuple[TopicMetadataEntry, ...] | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataRecord:
    group_id: str
    member_id: str
    value: MemberMetadataValue | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataRecord:
    group_id: str
    assignment_epoch: int | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: TopicPartitions | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentRecord:
    group_id: str
    member_id: str
    value: CurrentAssignmentValue | None


ConsumerGroupRecord = (
    ConsumerGroupMetadataRecord
    | ConsumerGroupPartitionMetadataRecord
    | ConsumerGroupMemberMetadataRecord
    | ConsumerGroupTargetAssignmentMetadataRecord
    | ConsumerGroupTargetAssignmentMemberRecord
    | ConsumerGroupCurrentMemberAssignmentRecord
)


# --- writing -------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def raw(self, data: bytes) -> None:
        self._parts.append(data)

    def int8(self, value: int) -> None:
        self.raw(struct.pack(">b", value))

    def int16(self, value: int) -> None:
        self.raw(struct.pack(">h", value))

    def int32(self, value: int) -> None:
        self.raw(struct.pack(">i", value))

    def uvarint(self, value: int) -> None:
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self.raw(bytes(out))

    def classic_string(self, value: str) -> None:
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.int16(len(data))
        self.raw(data)

    def compact_string(self, value: str | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        data = value.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.raw(data)

    def array_length(self, count: int) -> None:
        self.uvarint(count + 1)

    def uuid(self, value: uuid.UUID) -> None:
        self.raw(value.bytes)

    def no_tags(self) -> None:
        self.uvarint(0)

    def topic_partitions(self, value: TopicPartitions) -> None:
        self.array_length(len(value))
        for topic_id, partitions in value:
            self.uuid(topic_id)
            self.array_length(len(partitions))
            for partition in partitions:
                self.int32(partition)
            self.no_tags()

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


def encode_consumer_key(record: ConsumerGroupRecord) -> bytes:
    writer = _Writer()
    writer.int16(_key_version(record))
    writer.classic_string(record.group_id)
    if isinstance(
        record,
        ConsumerGroupMemberMetadataRecord
        | ConsumerGroupTargetAssignmentMemberRecord
        | ConsumerGroupCurrentMemberAssignmentRecord,
    ):
        writer.classic_string(record.member_id)
    return writer.getvalue()


def _key_version(record: ConsumerGroupRecord) -> int:
    if isinstance(record, ConsumerGroupMetadataRecord):
        return CONSUMER_GROUP_METADATA
    if isinstance(record, ConsumerGroupPartitionMetadataRecord):
        return CONSUMER_GROUP_PARTITION_METADATA
    if isinstance(record, ConsumerGroupMemberMetadataRecord):
        return CONSUMER_GROUP_MEMBER_METADATA
    if isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
        return CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
    if isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
        return CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
    return CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT


def encode_consumer_value(record: ConsumerGroupRecord) -> bytes | None:
    writer = _Writer()
    writer.int16(0)
    if isinstance(
        record, ConsumerGroupMetadataRecord | ConsumerGroupTargetAssignmentMetadataRecord
    ):
        epoch = (
            record.epoch
            if isinstance(record, ConsumerGroupMetadataRecord)
            else record.assignment_epoch
        )
        if epoch is None:
            return None
        writer.int32(epoch)
    elif isinstance(record, ConsumerGroupPartitionMetadataRecord):
        if record.topics is None:
            return None
        writer.array_length(len(record.topics))
        for topic in record.topics:
            writer.uuid(topic.topic_id)
            writer.compact_string(topic.name)
            writer.int32(topic.partitions)
            with_racks = [(p, r) for p, r in enumerate(topic.racks) if r]
            writer.array_length(len(with_racks))
            for partition, racks in with_racks:
                writer.int32(partition)
                writer.array_length(len(racks))
                for rack in racks:
                    writer.compact_string(rack)
                writer.no_tags()
            writer.no_tags()
    elif isinstance(record, ConsumerGroupMemberMetadataRecord):
        member = record.value
        if member is None:
            return None
        writer.compact_string(member.instance_id)
        writer.compact_string(member.rack_id)
        writer.compact_string(member.client_id)
        writer.compact_string(member.client_host)
        writer.array_length(len(member.subscribed_topic_names))
        for name in member.subscribed_topic_names:
            writer.compact_string(name)
        writer.compact_string(member.subscribed_topic_regex)
        writer.int32(member.rebalance_timeout_ms)
        writer.compact_string(member.server_assignor)
        if member.classic is not None:
            tagged = _Writer()
            tagged.int32(member.classic.session_timeout_ms)
            tagged.array_length(len(member.classic.protocols))
            for name, metadata in member.classic.protocols:
                tagged.compact_string(name)
                tagged.uvarint(len(metadata) + 1)
                tagged.raw(metadata)
                tagged.no_tags()
            tagged.no_tags()
            field = tagged.getvalue()
            writer.uvarint(1)  # one tagged field: tag 0
            writer.uvarint(0)
            writer.uvarint(len(field))
            writer.raw(field)
            return writer.getvalue()
    elif isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
        if record.partitions is None:
            return None
        writer.topic_partitions(record.partitions)
    else:
        current = record.value
        if current is None:
            return None
        writer.int32(current.member_epoch)
        writer.int32(current.previous_member_epoch)
        writer.int8(current.state)
        writer.topic_partitions(current.assigned)
        writer.topic_partitions(current.pending_revocation)
    writer.no_tags()
    return writer.getvalue()


# --- reading -------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("_data", "_position")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise CorruptConsumerRecordError("record truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
        raise CorruptConsumerRecordError("varint too long")

    def _text(self, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptConsumerRecordError("string is not UTF-8") from error

    def classic_string(self) -> str:
        length = self.int16()
        if length < 0:
            raise CorruptConsumerRecordError("null key string")
        return self._text(self.take(length))

    def nullable_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self._text(self.take(length))

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptConsumerRecordError("null in a non-nullable string")
        return value

    def array_length(self) -> int:
        length = self.uvarint() - 1
        if length < 0 or length > min(_MAX_ITEMS, len(self._data)):
            raise CorruptConsumerRecordError("bad array length")
        return length

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def topic_partitions(self) -> TopicPartitions:
        result = []
        for _ in range(self.array_length()):
            topic_id = self.uuid()
            partitions = tuple(self.int32() for _ in range(self.array_length()))
            self.tags()
            result.append((topic_id, partitions))
        return tuple(result)

    def expect_end(self) -> None:
        if self._position != len(self._data):
            raise CorruptConsumerRecordError("trailing bytes after record")


def decode_consumer_record(key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """Decode a record whose key version is in `CONSUMER_KEY_VERSIONS`."""
    reader = _Reader(key)
    key_version = reader.int16()
    group_id = reader.classic_string()
    member_id = ""
    if key_version in (
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ):
        member_id = reader.classic_string()
    reader.expect_end()
    if key_version not in CONSUMER_KEY_VERSIONS:
        raise CorruptConsumerRecordError(f"not a consumer group key version: {key_version}")
    if value is None:
        return _tombstone(key_version, group_id, member_id)
    body = _Reader(value)
    if body.int16() != 0:
        raise CorruptConsumerRecordError("unknown consumer group value version")
    record = _decode_value(key_version, group_id, member_id, body)
    if key_version != CONSUMER_GROUP_MEMBER_METADATA:
        body.tags()
    body.expect_end()
    return record


def _classic_member_tag(body: _Reader) -> ClassicMemberMetadata | None:
    """The value's tagged fields (read here, so the caller finds none left): tag 0 is the
    classic member metadata; other tags are skipped."""
    classic = None
    for _ in range(body.uvarint()):
        tag = body.uvarint()
        field = _Reader(body.take(body.uvarint()))
        if tag != 0:
            continue
        session_timeout_ms = field.int32()
        protocols = []
        for _ in range(field.array_length()):
            name = field.string()
            size = field.uvarint() - 1
            if size < 0:
                raise CorruptConsumerRecordError("null protocol metadata")
            protocols.append((name, field.take(size)))
            field.tags()
        field.tags()
        classic = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
    return classic


def _tombstone(key_version: int, group_id: str, member_id: str) -> ConsumerGroupRecord:
    if key_version == CONSUMER_GROUP_METADATA:
        return ConsumerGroupMetadataRecord(group_id, None)
    if key_version == CONSUMER_GROUP_PARTITION_METADATA:
        return ConsumerGroupPartitionMetadataRecord(group_id, None)
    if key_version == CONSUMER_GROUP_MEMBER_METADATA:
        return ConsumerGroupMemberMetadataRecord(group_id, member_id, None)
    if key_version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return ConsumerGroupTargetAssignmentMetadataRecord(group_id, None)
    if key_version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        return ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, None)
    return ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, None)


def _decode_value(
    key_version: int, group_id: str, member_id: str, body: _Reader
) -> ConsumerGroupRecord:
    if key_version == CONSUMER_GROUP_METADATA:
        return ConsumerGroupMetadataRecord(group_id, body.int32())
    if key_version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return ConsumerGroupTargetAssignmentMetadataRecord(group_id, body.int32())
    if key_version == CONSUMER_GROUP_PARTITION_METADATA:
        topics = []
        for _ in range(body.array_length()):
            topic_id = body.uuid()
            name = body.string()
            partitions = body.int32()
            racks: dict[int, tuple[str, ...]] = {}
            for _ in range(body.array_length()):
                partition = body.int32()
                partition_racks = tuple(sorted(body.string() for _ in range(body.array_length())))
                body.tags()
                if 0 <= partition < min(partitions, MAX_RACK_PARTITIONS):
                    racks[partition] = partition_racks
            body.tags()
            rack_list = normalized_racks(
                racks.get(p, ()) for p in range(max(racks, default=-1) + 1)
            )
            topics.append(TopicMetadataEntry(topic_id, name, partitions, rack_list))
        return ConsumerGroupPartitionMetadataRecord(group_id, tuple(topics))
    if key_version == CONSUMER_GROUP_MEMBER_METADATA:
        instance_id = body.nullable_string()
        rack_id = body.nullable_string()
        client_id = body.string()
        client_host = body.string()
        names = tuple(body.string() for _ in range(body.array_length()))
        regex = body.nullable_string()
        rebalance_timeout_ms = body.int32()
        assignor = body.nullable_string()
        value = MemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout_ms,
            assignor,
            _classic_member_tag(body),
        )
        return ConsumerGroupMemberMetadataRecord(group_id, member_id, value)
    if key_version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        return ConsumerGroupTargetAssignmentMemberRecord(
            group_id, member_id, body.topic_partitions()
        )
    member_epoch = body.int32()
    previous_member_epoch = body.int32()
    state = body.int8()
    assigned = body.topic_partitions()
    pending = body.topic_partitions()
    current = CurrentAssignmentValue(member_epoch, previous_member_epoch, state, assigned, pending)
    return ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, current)
