"""Decoding v0/v1 message sets (SEEDS MSG-03..MSG-10, EXT-03), including compressed wrappers."""

from __future__ import annotations

import struct
import warnings
import zlib

import pytest

with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

from trafka.log.batch import CompressionType, TimestampType
from trafka.log.compression import compress
from trafka.log.errors import CorruptRecordError
from trafka.log.legacy import decode_legacy_entry, read_message
from trafka.log.records import NewRecord, Record, build_batch, iter_batches


def message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    attributes: int = 0,
    timestamp: int = -1,
) -> bytes:
    """A log entry holding one v0/v1 message (test helper: trafka never writes these)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def wrapper(offset: int, magic: int, inner: bytes, codec: CompressionType, **kw: int) -> bytes:
    attributes = int(codec) | kw.pop("attributes", 0)
    return message(offset, magic, None, compress(codec, inner), attributes=attributes, **kw)


def test_uncompressed_v0_and_v1() -> None:
    v0 = message(5, 0, b"k", b"v")
    assert len(v0) == 12 + 14 + 2  # MSG-03: 14 bytes of header
    v1 = message(6, 1, None, b"w", timestamp=1234)
    assert len(v1) == 12 + 22 + 1  # MSG-06: 22 bytes of header
    batches = list(iter_batches(v0 + v1))
    assert [b.records for b in batches] == [
        (Record(5, -1, b"k", b"v"),),
        (Record(6, 1234, None, b"w"),),
    ]
    assert [b.magic for b in batches] == [0, 1]
    assert [b.size for b in batches] == [len(v0), len(v1)]
    assert batches[1].header.max_timestamp == 1234
    assert batches[1].header.crc == read_message(v1).crc


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_v1_wrapper_inner_offsets_are_relative(codec: CompressionType) -> None:
    inner = b"".join(message(i, 1, b"k%d" % i, b"v%d" % i, timestamp=100 + i) for i in range(3))
    entry = wrapper(102, 1, inner, codec, timestamp=102)
    batch = decode_legacy_entry(entry)
    assert [r.offset for r in batch.records] == [100, 101, 102]
    assert [r.timestamp for r in batch.records] == [100, 101, 102]
    assert batch.header.base_offset == 100 and batch.header.last_offset == 102
    assert batch.header.records_count == 3
    assert batch.compression is codec
    assert batch.timestamp_type is TimestampType.CREATE_TIME


def test_v1_log_append_time_wrapper_stamps_inner_messages() -> None:
    inner = b"".join(message(i, 1, None, b"v", timestamp=5) for i in range(2))
    entry = wrapper(11, 1, inner, CompressionType.GZIP, timestamp=999, attributes=0x08)
    batch = decode_legacy_entry(entry)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [(r.offset, r.timestamp) for r in batch.records] == [(10, 999), (11, 999)]


def test_v0_wrapper_inner_offsets_are_absolute() -> None:
    inner = b"".join(message(40 + i, 0, None, b"v%d" % i) for i in range(3))
    batch = decode_legacy_entry(wrapper(42, 0, inner, CompressionType.SNAPPY))
    assert [r.offset for r in batch.records] == [40, 41, 42]
    assert [r.timestamp for r in batch.records] == [-1, -1, -1]
    assert batch.header.max_timestamp == -1


def test_v0_ignores_attribute_bit_3() -> None:
    batch = decode_legacy_entry(message(0, 0, None, b"v", attributes=0x08))
    assert batch.timestamp_type is TimestampType.CREATE_TIME


def test_mixed_magics_in_one_buffer() -> None:
    buf = (
        message(0, 0, None, b"a")
        + message(1, 1, None, b"b", timestamp=7)
        + build_batch([NewRecord(b"c"), NewRecord(b"d")], base_offset=2, now_ms=8)
    )
    values = [(r.offset, r.value) for b in iter_batches(buf) for r in b.records]
    assert values == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_bad_legacy_entries() -> None:
    good = bytearray(message(0, 1, b"k", b"v", timestamp=1))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_legacy_entry(bad_crc)
    assert decode_legacy_entry(bad_crc, check_crc=False).records[0].value == b"w"
    inner_v1 = message(0, 1, None, b"x", timestamp=1)
    nested = wrapper(0, 1, wrapper(0, 1, inner_v1, CompressionType.GZIP), CompressionType.GZIP)
    cases = [
        good[:-1],  # torn
        message(0, 1, None, None, attributes=1),  # compressed with a null value
        wrapper(0, 1, b"", CompressionType.GZIP),  # no inner messages
        wrapper(0, 0, inner_v1, CompressionType.GZIP),  # inner magic differs
        nested,
        wrapper(0, 1, inner_v1[:-1], CompressionType.GZIP),  # torn inner message
        message(0, 1, None, b"not gzip", attributes=1),
        message(0, 1, None, b"x", attributes=5),  # unknown codec
        good[:12] + b"\x00\x00\x00\x00" + good[16:],  # crc field zeroed
    ]
    for case in cases:
        with pytest.raises(CorruptRecordError):
            decode_legacy_entry(case)
    too_small = struct.pack(">qiIbb", 0, 13, 0, 0, 0) + b"\x00" * 9
    with pytest.raises(CorruptRecordError, match="below 14"):
        decode_legacy_entry(too_small)


def test_v0_lz4_header_checksum_is_ignored() -> None:
    """KAFKA-3160: 0.8/0.9 producers wrote a wrong LZ4 header checksum; Kafka ignores it
    for magic 0 (and only there)."""
    inner0 = message(0, 0, None, b"v")
    inner1 = message(0, 1, None, b"v", timestamp=1)
    for magic, inner in [(0, inner0), (1, inner1)]:
        frame = bytearray(compress(CompressionType.LZ4, inner))
        frame[6] ^= 0x5A  # the HC byte (no content size, no dictionary id)
        entry = message(0, magic, None, bytes(frame), attributes=3, timestamp=1)
        if magic == 0:
            assert decode_legacy_entry(entry).records[0].value == b"v"
        else:
            with pytest.raises(CorruptRecordError):
                decode_legacy_entry(entry)


# kafka-python's codecs without optional packages: gzip and lz4 (its magic 0 lz4 needs xxhash)
@pytest.mark.parametrize("magic_codec", [(0, 0), (0, 1), (1, 0), (1, 1), (1, 3)])
def test_kafka_python_legacy_builder(magic_codec: tuple[int, int]) -> None:
    magic, codec = magic_codec
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(5):
        builder.append(i, 1_600_000_000_000 + i, b"key%d" % i, b"value%d" % i, [])
    buf = bytearray(builder.build())
    if codec:
        # The producer leaves the wrapper offset 0; the broker stamps the last inner offset.
        struct.pack_into(">q", buf, 0, 4)
    records = [r for b in iter_batches(buf) for r in b.records]
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert [r.key for r in records] == [b"key%d" % i for i in range(5)]
    assert [r.value for r in records] == [b"value%d" % i for i in range(5)]
    expected_ts = [-1] * 5 if magic == 0 else [1_600_000_000_000 + i for i in range(5)]
    assert [r.timestamp for r in records] == expected_ts
