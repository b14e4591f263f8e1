"""Property tests: round trips in every codec; no input makes a decoder raise anything but
CorruptRecordError (STYLE.md §6)."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.log.batch import HEADER_SIZE, CompressionType, TimestampType, compute_crc
from trafka.log.columnar import decode_batch_columns
from trafka.log.compression import decompress
from trafka.log.errors import CorruptRecordError
from trafka.log.legacy import decode_legacy_entry
from trafka.log.records import (
    NewRecord,
    RecordHeader,
    build_batch,
    decode_batch,
    iter_batches,
)

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
LIMIT = 1 << 20

optional_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(st.builds(RecordHeader, st.text(max_size=12), optional_bytes), max_size=3).map(
    tuple
)
timestamps = st.none() | st.integers(min_value=0, max_value=1 << 45)
new_records = st.lists(
    st.builds(NewRecord, optional_bytes, optional_bytes, headers, timestamps),
    min_size=1,
    max_size=20,
)
codecs = st.sampled_from(list(CompressionType))


@PROPERTY_SETTINGS
@given(
    records=new_records,
    codec=codecs,
    base_offset=st.integers(min_value=0, max_value=1 << 62),
    base_sequence=st.integers(min_value=-1, max_value=(1 << 31) - 1),
    now_ms=st.integers(min_value=0, max_value=1 << 45),
    log_append_time=st.booleans(),
)
def test_round_trip(
    records: list[NewRecord],
    codec: CompressionType,
    base_offset: int,
    base_sequence: int,
    now_ms: int,
    log_append_time: bool,
) -> None:
    timestamp_type = TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME
    raw = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        base_sequence=base_sequence,
        producer_id=5 if base_sequence >= 0 else -1,
        now_ms=now_ms,
        timestamp_type=timestamp_type,
    )
    batch = decode_batch(raw)
    assert batch.header.size == len(raw)
    assert batch.compression is codec
    assert len(batch.records) == len(records)
    for index, (record, original) in enumerate(zip(batch.records, records, strict=True)):
        assert record.offset == base_offset + index
        assert (record.key, record.value, record.headers) == (
            original.key,
            original.value,
            original.headers,
        )
        written = now_ms if original.timestamp is None else original.timestamp
        assert record.timestamp == (now_ms if log_append_time else written)
        expected_sequence = -1 if base_sequence < 0 else (base_sequence + index) % (1 << 31)
        assert record.sequence == expected_sequence
    _, columns = decode_batch_columns(raw)
    assert columns.values == [r.value for r in batch.records]


def _only_corrupt(buf: bytes) -> None:
    for check_crc in (True, False):
        try:
            decode_batch(buf, max_decompressed_bytes=LIMIT, check_crc=check_crc)
        except CorruptRecordError:
            pass
        try:
            for _ in iter_batches(buf, max_decompressed_bytes=LIMIT, check_crc=check_crc):
                pass
        except CorruptRecordError:
            pass
        try:
            decode_legacy_entry(buf, max_decompressed_bytes=LIMIT, check_crc=check_crc)
        except CorruptRecordError:
            pass


@PROPERTY_SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes(buf: bytes) -> None:
    _only_corrupt(buf)


@PROPERTY_SETTINGS
@given(st.binary(max_size=200), codecs)
def test_arbitrary_bytes_after_a_valid_header(tail: bytes, codec: CompressionType) -> None:
    """A correct header and CRC in front of random records: the record parser is reached."""
    template = bytearray(build_batch([NewRecord(b"x")], compression=codec, now_ms=1))
    body = template[:HEADER_SIZE] + tail
    struct.pack_into(">i", body, 8, len(body) - 12)
    struct.pack_into(">I", body, 17, compute_crc(body, 0, len(body)))
    _only_corrupt(bytes(body))


@PROPERTY_SETTINGS
@given(
    records=new_records,
    codec=codecs,
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=4,
    ),
    cut=st.none() | st.integers(min_value=0),
    fix_crc=st.booleans(),
)
def test_mutated_batches(
    records: list[NewRecord],
    codec: CompressionType,
    edits: list[tuple[int, int]],
    cut: int | None,
    fix_crc: bool,
) -> None:
    raw = bytearray(build_batch(records, compression=codec, now_ms=1))
    for position, byte in edits:
        raw[position % len(raw)] = byte
    if cut is not None:
        raw = raw[: cut % (len(raw) + 1)]
    if fix_crc and len(raw) >= HEADER_SIZE:
        struct.pack_into(">I", raw, 17, compute_crc(raw, 0, len(raw)))
    _only_corrupt(bytes(raw))


@PROPERTY_SETTINGS
@given(codecs, st.binary(max_size=300))
def test_decompress_arbitrary_bytes(codec: CompressionType, data: bytes) -> None:
    try:
        decompress(codec, data, max_output_bytes=LIMIT)
    except CorruptRecordError:
        pass


@PROPERTY_SETTINGS
@given(
    magic=st.sampled_from([0, 1]),
    codec=codecs,
    values=st.lists(optional_bytes, min_size=1, max_size=5),
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=3,
    ),
)
def test_mutated_legacy_entries(
    magic: int, codec: CompressionType, values: list[bytes | None], edits: list[tuple[int, int]]
) -> None:
    from tests.log.test_legacy import message, wrapper

    inner = b"".join(message(i, magic, None, v, timestamp=i) for i, v in enumerate(values))
    if codec is CompressionType.NONE:
        raw = bytearray(inner)
    else:
        raw = bytearray(wrapper(len(values) - 1, magic, inner, codec, timestamp=9))
    assert [r.value for b in iter_batches(bytes(raw)) for r in b.records] == values
    for position, byte in edits:
        raw[position % len(raw)] = byte
    _only_corrupt(bytes(raw))
