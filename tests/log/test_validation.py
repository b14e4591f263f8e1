"""Record-level validation of leader appends (issue 12, item 3): the C scanner and the Python
reference agree on arbitrary bytes, and a batch with a valid CRC but bad records is refused
with INVALID_RECORD (keyless records on a compacted topic named one by one, KIP-467)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.log import batch as batch_format
from trafka.log.batch import HEADER_SIZE, CompressionType
from trafka.log.config import LogConfig
from trafka.log.errors import CorruptRecordError, InvalidRecordError
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, RecordHeader, build_batch, decode_batch
from trafka.log.validation import (
    BAD_OFFSET_DELTA,
    NATIVE_SCANNER,
    SIZE_MISMATCH,
    TRAILING_BYTES,
    TRUNCATED,
    RecordValidationError,
    scan_records_python,
    validate_records,
)
from trafka.log.varint import encode_varint

SCANNERS = [pytest.param(scan_records_python, id="python")]
if NATIVE_SCANNER is not None:
    SCANNERS.append(pytest.param(NATIVE_SCANNER, id="native"))


def records(count: int, *, keyless: tuple[int, ...] = ()) -> list[NewRecord]:
    return [
        NewRecord(
            value=b"v" * (i % 7) if i % 5 else None,
            key=None if i in keyless else f"k{i}".encode(),
            headers=(RecordHeader("h", b"x"), RecordHeader("n", None)) if i % 3 == 0 else (),
        )
        for i in range(count)
    ]


def section(data: bytes) -> tuple[bytes, int, int, int]:
    header = batch_format.parse_header(data)
    return data, HEADER_SIZE, header.size, header.records_count


def headers_of(data: bytes) -> list[tuple[int, batch_format.BatchHeader]]:
    return batch_format.validate_batches(data, check_crc=False)


def with_crc(data: bytearray) -> bytes:
    struct.pack_into(
        ">I", data, batch_format.CRC_OFFSET, batch_format.compute_crc(data, 0, len(data))
    )
    return bytes(data)


@pytest.mark.parametrize("scan", SCANNERS)
@pytest.mark.parametrize("codec", list(CompressionType))
def test_well_formed_batches_pass(scan: object, codec: CompressionType) -> None:
    data = build_batch(records(50), compression=codec, now_ms=1000)
    validate_records(data, headers_of(data), compacted=True, scanner=scan)  # type: ignore[arg-type]


@pytest.mark.parametrize("scan", SCANNERS)
def test_keyless_records_on_a_compacted_topic_are_named(scan: object) -> None:
    data = build_batch(records(10, keyless=(2, 7)), now_ms=1000)
    validate_records(data, headers_of(data), compacted=False, scanner=scan)  # type: ignore[arg-type]
    with pytest.raises(RecordValidationError) as raised:
        validate_records(data, headers_of(data), compacted=True, scanner=scan)  # type: ignore[arg-type]
    assert [e.batch_index for e in raised.value.record_errors] == [2, 7]
    assert (
        "Compacted topic cannot accept message without key" in raised.value.record_errors[0].message
    )


def record_bytes(offset_delta: int, extra: bytes = b"") -> bytes:
    body = b"\x00" + encode_varint(0) + encode_varint(offset_delta) + encode_varint(1) + b"k"
    body += encode_varint(1) + b"v" + encode_varint(0) + extra
    return encode_varint(len(body)) + body


@pytest.mark.parametrize("scan", SCANNERS)
@pytest.mark.parametrize(
    ("payload", "count", "reason"),
    [
        (record_bytes(0) + record_bytes(5), 2, BAD_OFFSET_DELTA),
        (record_bytes(0) + record_bytes(1)[:-2], 2, TRUNCATED),
        (record_bytes(0) + b"\x00", 1, TRAILING_BYTES),
        (record_bytes(0), 2, TRUNCATED),
        (record_bytes(0, extra=b"zz"), 1, SIZE_MISMATCH),
    ],
)
def test_bad_records_are_refused(scan: object, payload: bytes, count: int, reason: int) -> None:
    result = scan(payload, 0, len(payload), count, False)  # type: ignore[operator]
    assert result is not None and result[1] == reason


@pytest.mark.skipif(NATIVE_SCANNER is None, reason="the C scanner is not built")
@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 40), st.booleans())
def test_native_and_reference_agree_on_arbitrary_bytes(
    payload: bytes, count: int, need_keys: bool
) -> None:
    assert NATIVE_SCANNER is not None
    expected = scan_records_python(payload, 0, len(payload), count, need_keys)
    assert NATIVE_SCANNER(payload, 0, len(payload), count, need_keys) == expected


@pytest.mark.skipif(NATIVE_SCANNER is None, reason="the C scanner is not built")
@settings(max_examples=600, deadline=None)
@given(st.integers(1, 30), st.data())
def test_native_and_reference_agree_on_mutated_batches(count: int, data: st.DataObject) -> None:
    assert NATIVE_SCANNER is not None
    batch = bytearray(build_batch(records(count, keyless=(0,)), now_ms=5))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(HEADER_SIZE, len(batch)))
    payload = bytes(batch[:cut])
    for keys in (False, True):
        expected = scan_records_python(payload, HEADER_SIZE, len(payload), count, keys)
        assert NATIVE_SCANNER(payload, HEADER_SIZE, len(payload), count, keys) == expected
    # and the decoder consumers use agrees that a scanner-valid batch decodes
    if scan_records_python(payload, HEADER_SIZE, len(payload), count, False) is None:
        fixed = bytearray(payload)
        struct.pack_into(">i", fixed, 8, len(fixed) - 12)
        decode_batch(with_crc(fixed), check_crc=True)


def test_the_native_scanner_refuses_a_range_outside_the_buffer() -> None:
    if NATIVE_SCANNER is None:
        pytest.skip("the C scanner is not built")
    with pytest.raises(ValueError, match="outside"):
        NATIVE_SCANNER(b"abc", 0, 10, 1, False)


def test_a_batch_with_a_valid_crc_and_garbage_records_is_not_appended(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    good = bytearray(build_batch(records(3), now_ms=1))
    garbage = bytearray(good)
    garbage[HEADER_SIZE + 3 :] = b"\xff" * (len(garbage) - HEADER_SIZE - 3)
    with pytest.raises(InvalidRecordError, match="record 0"):
        log.append_as_leader(with_crc(garbage), leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 0
    log.append_as_leader(bytes(good), leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 3
    log.close()


def test_a_compressed_batch_that_does_not_decompress_is_corrupt(tmp_path: Path) -> None:
    data = bytearray(build_batch(records(3), compression=CompressionType.LZ4, now_ms=1))
    data[HEADER_SIZE:] = b"\x00" * (len(data) - HEADER_SIZE)
    with pytest.raises(CorruptRecordError):
        validate_records(with_crc(data), headers_of(bytes(data)), compacted=False)


def test_keyless_records_are_refused_by_a_compacted_log(tmp_path: Path) -> None:
    log = PartitionLog.open(
        tmp_path / "t-0", LogConfig(cleanup_policy=frozenset({"compact"})), now_ms=0
    )
    with pytest.raises(RecordValidationError) as raised:
        log.append_as_leader(
            build_batch(records(4, keyless=(1,)), now_ms=1), leader_epoch=0, now_ms=1
        )
    assert [e.batch_index for e in raised.value.record_errors] == [1]
    log.close()
