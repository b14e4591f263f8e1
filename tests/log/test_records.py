"""Record batch v2: build/decode round trips and the rules decoding enforces."""

from __future__ import annotations

import struct

import pytest

from trafka.log.batch import (
    HEADER_SIZE,
    CompressionType,
    TimestampType,
    crc_is_valid,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
)
from trafka.log.errors import CorruptRecordError
from trafka.log.records import (
    NewRecord,
    Record,
    RecordHeader,
    build_batch,
    decode_batch,
    iter_batches,
)
from trafka.log.varint import encode_varint, read_varint, read_varlong


def _records() -> list[NewRecord]:
    return [
        NewRecord(b"v0", key=b"k0", timestamp=1_700_000_000_000),
        NewRecord(None, key=b"tombstone", timestamp=1_700_000_000_005),
        NewRecord(
            b"x" * 300,
            headers=(RecordHeader("trace", b"abc"), RecordHeader("null", None)),
            timestamp=1_699_999_999_000,
        ),
        NewRecord(b"", key=b""),
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_round_trip_every_codec(codec: CompressionType) -> None:
    raw = build_batch(
        _records(),
        base_offset=100,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=41,
        partition_leader_epoch=5,
        now_ms=1_700_000_001_000,
    )
    batch = decode_batch(raw)
    header = batch.header
    assert header.size == len(raw)
    assert header.compression is codec
    assert header.records_count == 4
    assert header.last_offset == 103
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_001_000  # the record that took now_ms
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 41)
    assert header.partition_leader_epoch == 5
    assert batch.records == (
        Record(100, 1_700_000_000_000, b"k0", b"v0", (), 41),
        Record(101, 1_700_000_000_005, b"tombstone", None, (), 42),
        Record(
            102,
            1_699_999_999_000,
            None,
            b"x" * 300,
            (RecordHeader("trace", b"abc"), RecordHeader("null", None)),
            43,
        ),
        Record(103, 1_700_000_001_000, b"", b"", (), 44),
    )


def test_uncompressed_layout_is_kafkas() -> None:
    raw = build_batch([NewRecord(b"v", key=b"k", timestamp=5)], base_offset=0)
    assert len(raw) == HEADER_SIZE + 1 + 8
    # length=8, attributes=0, tsDelta=0, offsetDelta=0, key len 1 'k', value len 1 'v', 0 headers
    assert raw[HEADER_SIZE:] == bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0])
    header = parse_header(raw)
    assert header.magic == 2 and header.attributes == 0
    assert crc_is_valid(raw, 0, header)


def test_flags_and_sequence_wrap() -> None:
    raw = build_batch(
        [NewRecord(b"a"), NewRecord(b"b")],
        base_sequence=(1 << 31) - 1,
        producer_id=1,
        producer_epoch=0,
        is_transactional=True,
        now_ms=10,
    )
    batch = decode_batch(raw)
    assert batch.is_transactional and not batch.is_control
    assert [r.sequence for r in batch.records] == [(1 << 31) - 1, 0]
    assert batch.header.last_sequence == 0


def test_log_append_time_records_take_max_timestamp() -> None:
    raw = build_batch(
        [NewRecord(b"a", timestamp=1), NewRecord(b"b", timestamp=2)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        now_ms=999,
    )
    batch = decode_batch(raw)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.header.max_timestamp == 999
    assert [r.timestamp for r in batch.records] == [999, 999]


def test_log_append_time_needs_now() -> None:
    with pytest.raises(ValueError):
        build_batch([NewRecord(b"a")], timestamp_type=TimestampType.LOG_APPEND_TIME)


def test_delete_horizon_is_base_timestamp() -> None:
    raw = build_batch([NewRecord(b"a", timestamp=500)], delete_horizon_ms=1000)
    batch = decode_batch(raw)
    assert batch.delete_horizon_ms == 1000
    assert batch.header.base_timestamp == 1000
    assert batch.records[0].timestamp == 500


def test_offset_deltas_preserved_and_empty_batch() -> None:
    raw = build_batch(
        [NewRecord(b"a", offset_delta=1), NewRecord(b"b", offset_delta=4)],
        base_offset=10,
        last_offset_delta=6,
        now_ms=0,
    )
    batch = decode_batch(raw)
    assert [r.offset for r in batch.records] == [11, 14]
    assert batch.last_offset == 16
    empty = decode_batch(build_batch([], last_offset_delta=3, base_offset=20, now_ms=0))
    assert empty.records == () and empty.header.records_count == 0 and empty.last_offset == 23
    with pytest.raises(ValueError):
        build_batch([NewRecord(b"a", offset_delta=2), NewRecord(b"b", offset_delta=2)])
    with pytest.raises(ValueError):
        build_batch([])


def test_missing_now_means_no_timestamp() -> None:
    batch = decode_batch(build_batch([NewRecord(b"a")]))
    assert batch.records[0].timestamp == -1
    assert batch.header.max_timestamp == -1


def test_stamping_offset_and_epoch_keeps_crc() -> None:
    raw = bytearray(build_batch([NewRecord(b"a"), NewRecord(b"b")], now_ms=1))
    set_base_offset(raw, 0, 5000)
    set_partition_leader_epoch(raw, 0, 9)
    batch = decode_batch(raw)
    assert [r.offset for r in batch.records] == [5000, 5001]
    assert batch.header.partition_leader_epoch == 9


def test_decode_at_position_and_iter_batches() -> None:
    first = build_batch([NewRecord(b"a")], base_offset=0, now_ms=1)
    second = build_batch(
        [NewRecord(b"b"), NewRecord(b"c")], base_offset=1, compression=CompressionType.GZIP
    )
    buf = first + second
    assert decode_batch(buf, len(first)).records[1].value == b"c"
    batches = list(iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 1]
    assert [r.value for b in batches for r in b.records] == [b"a", b"b", b"c"]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf[:-1]))


def test_crc_mismatch_is_corrupt_unless_unchecked() -> None:
    raw = bytearray(build_batch([NewRecord(b"abc")], now_ms=1))
    raw[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(raw)
    assert decode_batch(raw, check_crc=False).records[0].value is not None


def _rebuild(records_section: bytes, count: int) -> bytes:
    """A batch with a hand-made records section and a correct CRC."""
    template = bytearray(build_batch([NewRecord(b"a")], now_ms=1))
    body = template[:HEADER_SIZE] + records_section
    struct.pack_into(">i", body, 8, len(body) - 12)
    struct.pack_into(">i", body, 57, count)
    struct.pack_into(">i", body, 23, max(count - 1, 0))
    from trafka.log.batch import compute_crc

    struct.pack_into(">I", body, 17, compute_crc(body, 0, len(body)))
    return bytes(body)


def test_record_length_must_match() -> None:
    good = bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0])
    assert decode_batch(_rebuild(good, 1)).records[0].key == b"k"
    too_long_claim = bytes([18]) + good[1:] + b"\x00"
    with pytest.raises(CorruptRecordError):
        decode_batch(_rebuild(too_long_claim, 1))
    with pytest.raises(CorruptRecordError, match="remain"):
        decode_batch(_rebuild(good + b"\x00" * 8, 1))
    with pytest.raises(CorruptRecordError):
        decode_batch(_rebuild(good, 2))
    negative_header_key = bytes([16, 0, 0, 0, 1, 1, 2, 1, 1])
    with pytest.raises(CorruptRecordError):
        decode_batch(_rebuild(negative_header_key, 1))


def test_varints() -> None:
    for value in [0, -1, 1, 63, -64, 64, 300, -(1 << 31), (1 << 31) - 1]:
        encoded = encode_varint(value)
        assert read_varint(encoded, 0) == (value, len(encoded))
    for value in [-(1 << 63), (1 << 63) - 1, 1 << 40]:
        encoded = encode_varint(value)
        assert read_varlong(encoded, 0) == (value, len(encoded))
    assert encode_varint(-1) == b"\x01" and encode_varint(1) == b"\x02"
    assert encode_varint(150) == b"\xac\x02"
    with pytest.raises(CorruptRecordError):
        read_varint(encode_varint(1 << 31), 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\x80", 0)


def test_header_keys_that_are_not_utf8_round_trip() -> None:
    raw = build_batch([NewRecord(b"v", headers=(RecordHeader("ok", b"1"),))], now_ms=1)
    # patch the 2-byte key "ok" into two bytes that are not UTF-8; fix the CRC
    patched = bytearray(raw.replace(b"ok", b"\xff\xfe"))
    from trafka.log.batch import compute_crc

    struct.pack_into(">I", patched, 17, compute_crc(patched, 0, len(patched)))
    (record,) = decode_batch(patched).records
    assert record.headers[0].key.encode("utf-8", "surrogateescape") == b"\xff\xfe"
    rebuilt = build_batch([NewRecord(b"v", headers=record.headers)], now_ms=1)
    assert rebuilt == bytes(patched)


def test_negative_position_is_corrupt() -> None:
    raw = build_batch([NewRecord(b"v")], now_ms=1)
    with pytest.raises(CorruptRecordError):
        decode_batch(raw, -len(raw))


def test_zip_bomb_batch_is_refused() -> None:
    records = [NewRecord(bytes(64 * 1024)) for _ in range(64)]  # 4 MiB of zeros
    for codec in (c for c in CompressionType if c is not CompressionType.NONE):
        raw = build_batch(records, compression=codec, now_ms=1)
        assert len(raw) < 512 * 1024
        with pytest.raises(CorruptRecordError, match="inflates past"):
            decode_batch(raw, max_decompressed_bytes=1024 * 1024)
        assert len(decode_batch(raw).records) == 64
