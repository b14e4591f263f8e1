"""The record model: what every record decoder produces and `build_batch` takes.

A leaf of `trafka.log` (it imports only the batch header): the v2 codec
(`trafka.log.records`), the legacy v0/v1 decoder (`trafka.log.legacy`) and the columnar
decoder (`trafka.log.columnar`) all import it and none of them imports another through it,
so the three decoders form no import cycle (tests/test_layering.py checks that the package
has none). Kafka splits its `Record`/`RecordBatch` interfaces from `DefaultRecordBatch` and
`AbstractLegacyRecordBatch` the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from trafka.log.batch import NO_SEQUENCE, BatchHeader, CompressionType, TimestampType

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """One record header: a UTF-8 key and nullable bytes (KIP-82)."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record, from a batch of any magic, with its absolute offset.

    `timestamp` is the record's timestamp as Kafka's consumer reports it (LogAppendTime
    batches report the batch's maxTimestamp); -1 when there is none (magic 0).
    `sequence` is the producer sequence (v2 only), -1 without one.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()
    sequence: int = NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class NewRecord:
    """Input to `trafka.log.records.build_batch`.

    `timestamp` None means "now" (`build_batch`'s `now_ms`, or -1 without one).
    `offset_delta` None means the record's index in the batch; compaction passes the
    original deltas so offsets survive a rewrite (they must strictly increase).
    """

    value: bytes | None
    key: bytes | None = None
    headers: tuple[RecordHeader, ...] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded batch: its header and its records.

    For legacy (magic 0/1) log entries `header` is an equivalent view built by
    `trafka.log.legacy` (see there); `header.size` is always the bytes the entry occupies.
    """

    header: BatchHeader
    records: tuple[Record, ...]

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size(self) -> int:
        return self.header.size

    @property
    def compression(self) -> CompressionType:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon of a cleaned batch (KIP-534), None when not set."""
        if self.header.has_delete_horizon:
            return self.header.base_timestamp
        return None


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The records of one batch, column by column (row i of each list is record i).

    Offsets and timestamps are absolute and final (LogAppendTime applied), sequences are
    -1 without a producer sequence, exactly as in `Record`.
    """

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[RecordHeader, ...]]
    sequences: list[int]

    def __len__(self) -> int:
        return len(self.offsets)
