"""The vectorised record decoder (`trafka.log.columnar`) against the reference loop
(`trafka.log.records.decode_record_columns`): same columns for every batch, same error
for every malformed one (STYLE.md §6). Every test runs twice: with the numba-compiled
kernels (the `spark` extra installs numba) and with the numpy steps used without numba."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.log import columnar
from trafka.log.batch import HEADER_SIZE, CompressionType, TimestampType, compute_crc
from trafka.log.columnar import (
    MIN_VECTOR_RECORDS,
    BinaryColumn,
    RecordArrays,
    decode_batch_columns,
    decode_record_arrays,
)
from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.errors import CorruptRecordError
from trafka.log.records import (
    NewRecord,
    RecordColumns,
    RecordHeader,
    build_batch,
    decode_batch,
    decode_record_columns,
    records_section,
)

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
LIMIT = 1 << 22
INT64_MAX = (1 << 63) - 1

optional_bytes = st.none() | st.binary(max_size=80) | st.binary(min_size=64, max_size=300)
headers = st.lists(
    st.builds(RecordHeader, st.text(max_size=12), st.none() | st.binary(max_size=40)),
    max_size=3,
).map(tuple)
timestamps = st.none() | st.integers(min_value=0, max_value=1 << 45)
new_records = st.lists(
    st.builds(
        NewRecord,
        optional_bytes,
        optional_bytes,
        st.just(()) | headers,
        timestamps,
    ),
    min_size=1,
    max_size=40,
)
codecs = st.sampled_from(list(CompressionType))


@pytest.fixture(autouse=True, scope="module", params=["compiled", "numpy"])
def kernels(request: pytest.FixtureRequest) -> Any:
    """Module-scoped (hypothesis forbids function-scoped fixtures under @given)."""
    saved = list(columnar._KERNELS)
    columnar._KERNELS[:] = [None] if request.param == "numpy" else []
    if request.param == "compiled":
        assert columnar._compiled() is not None, "numba is part of the spark extra"
    yield request.param
    columnar._KERNELS[:] = saved


def _lists(columns: RecordColumns | RecordArrays) -> tuple[Any, ...]:
    return (
        columns.offsets,
        columns.timestamps,
        columns.keys,
        columns.values,
        columns.headers,
        columns.sequences,
    )


def _fits_int64(columns: RecordColumns) -> bool:
    return all(-(1 << 63) <= v <= INT64_MAX for v in columns.offsets + columns.timestamps)


def _same_outcome(data: bytes, raw: bytes) -> None:
    """Both decoders of one records section: same lists, or the same error."""
    header, _ = records_section(raw, 0, LIMIT, False)
    try:
        expected: RecordColumns | None = decode_record_columns(data, header)
        expected_error = None
    except CorruptRecordError as error:
        expected, expected_error = None, str(error)
    try:
        actual: RecordArrays | None = decode_record_arrays(data, header)
        actual_error = None
    except CorruptRecordError as error:
        actual, actual_error = None, str(error)
    if expected is not None and not _fits_int64(expected):
        assert actual is None and actual_error is not None and "int64" in actual_error
        return
    assert actual_error == expected_error
    if expected is not None:
        assert actual is not None
        assert _lists(actual) == _lists(expected)


@PROPERTY_SETTINGS
@given(
    records=new_records,
    codec=codecs,
    base_offset=st.integers(min_value=0, max_value=1 << 62),
    base_sequence=st.integers(min_value=-1, max_value=(1 << 31) - 1),
    now_ms=st.integers(min_value=0, max_value=1 << 45),
    log_append_time=st.booleans(),
    delete_horizon=st.none() | st.integers(min_value=0, max_value=1 << 45),
    gap=st.integers(min_value=1, max_value=70_000),
)
def test_same_columns_as_the_reference(
    records: list[NewRecord],
    codec: CompressionType,
    base_offset: int,
    base_sequence: int,
    now_ms: int,
    log_append_time: bool,
    delete_horizon: int | None,
    gap: int,
) -> None:
    # Offset deltas with gaps (as after compaction), so offsetDelta is often several bytes.
    spaced = [
        NewRecord(r.value, r.key, r.headers, r.timestamp, index * gap)
        for index, r in enumerate(records)
    ]
    raw = build_batch(
        spaced,
        base_offset=base_offset,
        compression=codec,
        base_sequence=base_sequence,
        producer_id=5 if base_sequence >= 0 else -1,
        now_ms=now_ms,
        timestamp_type=TimestampType.LOG_APPEND_TIME
        if log_append_time
        else TimestampType.CREATE_TIME,
        delete_horizon_ms=delete_horizon,
    )
    header, data = records_section(raw, 0, LIMIT, True)
    reference = decode_record_columns(data, header)
    assert _lists(decode_record_arrays(data, header)) == _lists(reference)
    # Valid records under 8 KiB take the vectorised path, not the fallback to the reference.
    assert _lists(columnar._decode_vectorised(data, header)) == _lists(reference)
    _, routed = decode_batch_columns(raw)
    assert _lists(routed) == _lists(reference)
    assert routed.values == [r.value for r in decode_batch(raw).records]


@PROPERTY_SETTINGS
@given(
    records=st.lists(
        st.builds(NewRecord, optional_bytes, optional_bytes, headers, timestamps),
        min_size=MIN_VECTOR_RECORDS,
        max_size=30,
    ),
    flips=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=3,
    ),
    cut=st.integers(min_value=-3, max_value=3),
)
def test_malformed_sections_fail_as_the_reference(
    records: list[NewRecord], flips: list[tuple[int, int]], cut: int
) -> None:
    """Bytes changed, cut or added anywhere in the records: the same error (or result)."""
    raw = build_batch(records, now_ms=1_700_000_000_000)
    _, data = records_section(raw, 0, LIMIT, True)
    mutated = bytearray(data)
    for where, byte in flips:
        mutated[where % len(mutated)] = byte
    if cut < 0:
        del mutated[cut:]
    else:
        mutated += bytes(cut)
    _same_outcome(bytes(mutated), raw)


@PROPERTY_SETTINGS
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=60))
def test_arbitraryrecords_section(data: bytes, count: int) -> None:
    raw = bytearray(build_batch([NewRecord(b"x")], now_ms=1))
    struct.pack_into(">i", raw, HEADER_SIZE - 4, count)
    _same_outcome(data, bytes(raw))


@PROPERTY_SETTINGS
@given(st.binary(max_size=300), codecs)
def test_arbitrary_bytes_after_a_valid_header(tail: bytes, codec: CompressionType) -> None:
    """Through `decode_batch_columns`: only CorruptRecordError, whatever the input."""
    template = bytearray(build_batch([NewRecord(b"x")] * 10, compression=codec, now_ms=1))
    body = template[:HEADER_SIZE] + tail
    struct.pack_into(">i", body, 8, len(body) - 12)
    struct.pack_into(">I", body, 17, compute_crc(body, 0, len(body)))
    try:
        decode_batch_columns(bytes(body), max_decompressed_bytes=LIMIT)
    except CorruptRecordError:
        pass


def test_control_batch() -> None:
    raw = build_end_transaction_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=7),
        producer_id=42,
        producer_epoch=3,
        now_ms=1234,
        base_offset=10,
    )
    header, columns = decode_batch_columns(raw)
    assert header.is_control
    assert columns.offsets == [10]
    assert columns.keys == [struct.pack(">hh", 0, 1)]
    assert columns.values == [struct.pack(">hi", 0, 7)]


@pytest.mark.parametrize("count", [1, MIN_VECTOR_RECORDS, 50])
def test_offsets_beyond_int64_are_corrupt_on_both_routes(count: int) -> None:
    records = [NewRecord(b"v", offset_delta=(1 << 30) + i) for i in range(count)]
    raw = build_batch(records, base_offset=INT64_MAX - (1 << 29), now_ms=1)
    with pytest.raises(CorruptRecordError, match="int64"):
        decode_batch_columns(raw)


def test_big_records_and_long_varints() -> None:
    """A 3-byte record length (the walk declines it), 10-byte timestamp deltas."""
    records = [
        NewRecord(b"x" * 20_000, b"k", (RecordHeader("h", None),), timestamp=0),
        *[NewRecord(b"v" * i, timestamp=(1 << 62) - i) for i in range(20)],
    ]
    raw = build_batch(records, now_ms=1)
    header, data = records_section(raw, 0, LIMIT, True)
    assert _lists(decode_record_arrays(data, header)) == _lists(decode_record_columns(data, header))
    negative = [NewRecord(b"v", timestamp=1000 - i * 10**15) for i in range(20)]
    raw = build_batch(negative, now_ms=1)
    header, data = records_section(raw, 0, LIMIT, True)
    arrays = decode_record_arrays(data, header)
    assert arrays.timestamps == [1000 - i * 10**15 for i in range(20)]


def test_binary_column_layout() -> None:
    column = BinaryColumn.from_list([b"ab", None, b"", b"cde"])
    assert column.positions.tolist() == [0, 2, 2, 2, 5]
    assert column.data.tobytes() == b"abcde"
    assert column.valid.tolist() == [True, False, True, True]
    assert column.null_count == 1
    both = BinaryColumn.concat([column, BinaryColumn.from_list([b"z", None])])
    assert both.to_list() == [b"ab", None, b"", b"cde", b"z", None]
    assert both.positions.dtype == np.int64


def test_concat_keeps_headers_with_their_records() -> None:
    first = build_batch(
        [NewRecord(b"a", headers=(RecordHeader("k", b"1"),))] * 10, base_offset=0, now_ms=1
    )
    second = build_batch([NewRecord(b"b")] * 10, base_offset=10, now_ms=1)
    parts = [decode_batch_columns(raw)[1] for raw in (first, second)]
    joined = RecordArrays.concat(parts)
    assert joined.offsets == list(range(20))
    assert joined.headers == [(RecordHeader("k", b"1"),)] * 10 + [()] * 10
