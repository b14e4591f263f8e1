"""The v2 batch header view: parse, CRC, in-place rewrites (the produce hot path)."""

from __future__ import annotations

import struct

import crc32c
import pytest

from trafka.log import batch
from trafka.log.errors import CorruptRecordError


def make_batch(base_offset: int = 0, records: bytes = b"\x00" * 10, count: int = 1) -> bytearray:
    """A syntactically valid v2 batch with opaque record bytes (enough for header tests)."""
    body = struct.pack(">hiqqqhii", 0, count - 1, 1000, 2000, -1, -1, -1, count) + records
    crc = crc32c.crc32c(body)
    head = struct.pack(">qiibI", base_offset, len(body) + 9, -1, 2, crc)
    return bytearray(head + body)


def test_parse_header_reads_every_field() -> None:
    buf = make_batch(base_offset=42, count=3)
    header = batch.parse_header(buf)
    assert header.base_offset == 42
    assert header.size == len(buf)
    assert header.last_offset == 44
    assert header.records_count == 3
    assert header.max_timestamp == 2000
    assert header.compression is batch.CompressionType.NONE
    assert not header.has_producer_id
    assert batch.crc_is_valid(buf, 0, header)


def test_rewrites_outside_the_crc_keep_it_valid() -> None:
    buf = make_batch()
    batch.set_base_offset(buf, 0, 1234)
    batch.set_partition_leader_epoch(buf, 0, 7)
    header = batch.parse_header(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 7)
    assert batch.crc_is_valid(buf, 0, header)


def test_log_append_time_sets_the_bit_and_recomputes_the_crc() -> None:
    buf = make_batch()
    batch.set_log_append_time(buf, 0, len(buf), 99_999)
    header = batch.parse_header(buf)
    assert header.timestamp_type is batch.TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 99_999
    assert batch.crc_is_valid(buf, 0, header)


def test_validate_rejects_a_flipped_byte_and_a_torn_tail() -> None:
    good = make_batch() + make_batch(base_offset=1)
    assert len(batch.validate_batches(good)) == 2
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate_batches(flipped)
    with pytest.raises(CorruptRecordError):
        batch.validate_batches(good[:-3])
    with pytest.raises(CorruptRecordError):
        batch.validate_batches(b"")
