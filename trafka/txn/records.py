"""Records of the `__transaction_state` topic, in Kafka's key/value layouts (EOS-01, KIP-98).

Both key and value start with an int16 *version*. Layouts (apache/kafka
`transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json`):

    TransactionLogKey   v0: transactional_id string (int16 length, UTF-8)
    TransactionLogValue v0: producer_id int64, producer_epoch int16,
                            transaction_timeout_ms int32, transaction_status int8,
                            transaction_partitions nullable [topic string,
                                                             partition_ids [int32]],
                            transaction_last_update_timestamp_ms int64,
                            transaction_start_timestamp_ms int64
                        v1: as v0, flexible (KIP-482: unsigned-varint "compact" lengths + 1,
                            a tagged-field section after each struct); top-level tags
                            0 previous_producer_id int64, 1 next_producer_id int64,
                            2 client_transaction_version int16 (KIP-890 part 2)

`transaction_status` is `TransactionState`'s byte. A null value is a tombstone (the id
expired). We write key v0 and value v0 (what Kafka writes for clients that do not use
KIP-890 part 2's transaction version 2), so `kafka-dump-log.sh --transaction-log-decoder`
reads our topic, and decode v0 and v1 (v1's tags are read and ignored except for the known
ones, which we keep). Log compaction keeps the last record per key, so these records are the
durable state of the coordinator; `TransactionCoordinator.load` rebuilds from them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from trafka.txn.state import TransactionState

KEY_VERSION = 0
VALUE_VERSION = 0
MAX_VALUE_VERSION = 1


class CorruptTransactionRecordError(ValueError):
    """A `__transaction_state` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: tuple[TopicPartitions, ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1  # v1 tag 0; v0 does not carry it
    next_producer_id: int = -1  # v1 tag 1
    client_transaction_version: int = 0  # v1 tag 2


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """The metadata of one transactional id; `value=None` is a tombstone (expired)."""

    transactional_id: str
    value: TransactionLogValue | None


# --- writing -------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    return struct.pack(">h", len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def encode_value(value: TransactionLogValue) -> bytes:
    """Version 0 of the value (Kafka's layout for transaction version 0/1 clients)."""
    out = bytearray(
        struct.pack(
            ">hqhib",
            VALUE_VERSION,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            value.state.value,
        )
    )
    out += struct.pack(">i", len(value.partitions))
    for entry in value.partitions:
        out += _string(entry.topic)
        out += struct.pack(">i", len(entry.partitions))
        for partition in entry.partitions:
            out += struct.pack(">i", partition)
    out += struct.pack(">qq", value.last_update_timestamp_ms, value.start_timestamp_ms)
    return bytes(out)


def encode_record(record: TransactionLogRecord) -> tuple[bytes, bytes | None]:
    key = encode_key(record.transactional_id)
    return key, None if record.value is None else encode_value(record.value)


# --- reading -------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("_data", "_position", "flexible")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0
        self.flexible = False

    def take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise CorruptTransactionRecordError("record truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def unpack(self, fmt: str) -> tuple[int, ...]:
        layout = struct.Struct(fmt)
        return tuple(int(v) for v in layout.unpack(self.take(layout.size)))

    def unsigned_varint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
        raise CorruptTransactionRecordError("varint too long")

    def length(self, *, int32: bool) -> int:
        if self.flexible:
            return self.unsigned_varint() - 1
        return self.unpack(">i" if int32 else ">h")[0]

    def string(self) -> str:
        size = self.length(int32=False)
        if size < 0:
            raise CorruptTransactionRecordError("null in a non-nullable string")
        try:
            return self.take(size).decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptTransactionRecordError("string is not UTF-8") from error

    def array_length(self) -> int:
        size = self.length(int32=True)
        if size > len(self._data):
            raise CorruptTransactionRecordError("bad array length")
        return size

    def tagged_fields(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        fields: dict[int, bytes] = {}
        for _ in range(self.unsigned_varint()):
            tag = self.unsigned_varint()
            fields[tag] = self.take(self.unsigned_varint())
        return fields

    def expect_end(self) -> None:
        if self._position != len(self._data):
            raise CorruptTransactionRecordError("trailing bytes after record")


def decode_key(data: bytes) -> str:
    reader = _Reader(data)
    (version,) = reader.unpack(">h")
    if version != KEY_VERSION:
        raise CorruptTransactionRecordError(f"unknown TransactionLogKey version {version}")
    transactional_id = reader.string()
    reader.expect_end()
    return transactional_id


def _tag_int(fields: dict[int, bytes], tag: int, fmt: str, default: int) -> int:
    data = fields.get(tag)
    if data is None:
        return default
    if len(data) != struct.calcsize(fmt):
        raise CorruptTransactionRecordError(f"tagged field {tag} has {len(data)} bytes")
    return int(struct.unpack(fmt, data)[0])


def decode_value(data: bytes) -> TransactionLogValue:
    reader = _Reader(data)
    (version,) = reader.unpack(">h")
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise CorruptTransactionRecordError(f"unknown TransactionLogValue version {version}")
    reader.flexible = version >= 1
    producer_id, producer_epoch, timeout_ms, status = reader.unpack(">qhib")
    try:
        state = TransactionState(status)
    except ValueError:
        raise CorruptTransactionRecordError(f"unknown transaction status {status}") from None
    count = reader.array_length()
    partitions: list[TopicPartitions] = []
    for _ in range(max(count, 0)):
        topic = reader.string()
        ids = tuple(reader.unpack(">i")[0] for _ in range(max(reader.array_length(), 0)))
        reader.tagged_fields()
        partitions.append(TopicPartitions(topic, ids))
    last_update_ms, start_ms = reader.unpack(">qq")
    tags = reader.tagged_fields()
    reader.expect_end()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        partitions=tuple(partitions),
        last_update_timestamp_ms=last_update_ms,
        start_timestamp_ms=start_ms,
        previous_producer_id=_tag_int(tags, 0, ">q", -1),
        next_producer_id=_tag_int(tags, 1, ">q", -1),
        client_transaction_version=_tag_int(tags, 2, ">h", 0),
    )


def decode_record(key: bytes, value: bytes | None) -> TransactionLogRecord:
    """Decode one record; CorruptTransactionRecordError if it does not."""
    transactional_id = decode_key(key)
    return TransactionLogRecord(transactional_id, None if value is None else decode_value(value))
