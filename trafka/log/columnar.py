"""Vectorised (numpy) decoding of a v2 batch's records into Arrow-ready columns.

This is the log layer's record decoder for bulk reads (the Spark audit export), not a
second parser: `decode_batch_columns` (below) routes every batch of at least
`MIN_VECTOR_RECORDS` records here, and any batch this decoder does not fully understand
goes back to the reference, `trafka.log.records.decode_record_columns` (the pure-Python
per-record loop), which then raises exactly the `CorruptRecordError` it always raised.
The record layout (SEEDS MSG-12, EXT-02) is in `trafka.log.records`' docstring.

How a records section is decoded (`decode_record_arrays`):

1. one tight Python loop walks the record `length` varints only (one or two bytes inline,
   longer ones through `trafka.log.varint`), giving every record's body start and end;
2. every field is then decoded for ALL records at once: `_varints` gathers the byte at
   each record's position, and while any varint continues (top bit set) the next byte,
   accumulating 7 bits per byte as uint64, then zig-zags; positions advance by widths and
   by key/value lengths;
3. headers (rare) are decoded per header index over the records that have that many;
4. keys, values, header keys and header values become `BinaryColumn`s, Arrow's binary
   layout (n + 1 positions into one data buffer, a validity mask), gathered by one boolean
   mask over the section (+1 at each slice start, -1 at its end, cumulative sum);
5. the batch is accepted only when every record ends exactly at its declared length and
   every varint is within Kafka's range (int32 varints, int64 varlongs); otherwise the
   reference decoder decodes (and rejects) it.

Results are exactly the reference's: absolute offsets, final timestamps (LogAppendTime
batches report maxTimestamp), sequences (-1 without one, else wrapping at 2**31), nullable
keys/values/header values, header keys as bytes (the reference decodes them as UTF-8 with
surrogateescape; `RecordArrays.headers` does the same). One rule is added to the
reference's: an offset or timestamp outside int64 (base plus delta overflowing) is
corrupt here, since no column type can hold it.

Three kernels are compiled with numba when it is installed (the `spark` extra): the
length walk of step 1 (`_walk_lengths`), the varint decoding of step 2
(`_varints_kernel`) and the gathering of step 4 (`_gather_kernel`); each is one plain loop
with exactly the semantics of the numpy steps it replaces (tests/log/test_columnar.py runs
every test both ways), and halves the decoding time (docs/performance.md). Without numba
the numpy steps and the Python loop run.

numpy (and numba) are imported here and nowhere else in `trafka.log`; this module imports
the v2 codec (`trafka.log.records`) and the record model, never the other way round, and
the broker never imports it (only the Spark export and the benchmarks do), so the broker
needs neither.

Not implemented: decoding several batches in one vectorised pass (each batch is one pass,
so batches of very few records pay numpy's per-call overhead; those take the reference
loop below `MIN_VECTOR_RECORDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from trafka.log.batch import NO_SEQUENCE, TIMESTAMP_TYPE_MASK, BatchHeader
from trafka.log.errors import CorruptRecordError
from trafka.log.record_model import Buffer, RecordColumns, RecordHeader
from trafka.log.records import DEFAULT_MAX, decode_record_columns, records_section

MIN_VECTOR_RECORDS = 8
"""Batches with fewer records are decoded by the reference loop (numpy's per-call
overhead is larger than the per-record work for them)."""

MIN_RECORD_SIZE = 7
"""The smallest possible record (as in `trafka.log.records`)."""

SEQUENCE_MODULUS = 1 << 31
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
ByteArray = npt.NDArray[np.uint8]
BoolArray = npt.NDArray[np.bool_]


class _Fallback(Exception):
    """Internal: this batch goes to the reference decoder."""


@dataclass(frozen=True, slots=True)
class BinaryColumn:
    """Nullable byte strings in Arrow's binary layout.

    Element i is `data[positions[i]:positions[i + 1]]`, or null where `valid[i]` is false
    (a null has an empty slice). `positions` is int64 with n + 1 entries starting at 0.
    """

    positions: Int64Array
    data: ByteArray
    valid: BoolArray

    def __len__(self) -> int:
        return len(self.valid)

    @property
    def null_count(self) -> int:
        return len(self.valid) - int(np.count_nonzero(self.valid))

    def to_list(self) -> list[bytes | None]:
        raw = self.data.tobytes()
        bounds = self.positions.tolist()
        return [
            raw[bounds[index] : bounds[index + 1]] if ok else None
            for index, ok in enumerate(self.valid.tolist())
        ]

    @classmethod
    def from_list(cls, items: list[bytes | None]) -> BinaryColumn:
        lengths = np.fromiter((0 if b is None else len(b) for b in items), np.int64, len(items))
        positions = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=positions[1:])
        data = np.frombuffer(b"".join(b for b in items if b is not None), dtype=np.uint8)
        valid = np.fromiter((b is not None for b in items), np.bool_, len(items))
        return cls(positions, data, valid)

    @classmethod
    def concat(cls, columns: list[BinaryColumn]) -> BinaryColumn:
        """One column holding `columns` one after the other."""
        if len(columns) == 1:
            return columns[0]
        total = sum(len(c) for c in columns)
        positions = np.empty(total + 1, dtype=np.int64)
        positions[0] = 0
        at = 1
        shift = 0
        for column in columns:
            count = len(column)
            np.add(column.positions[1:], shift, out=positions[at : at + count])
            at += count
            shift += int(column.positions[-1])
        data = np.concatenate([c.data for c in columns]) if columns else _NO_BYTES
        valid = np.concatenate([c.valid for c in columns]) if columns else _NO_BOOLS
        return cls(positions, data, valid)


_NO_BYTES: ByteArray = np.zeros(0, dtype=np.uint8)
_NO_BOOLS: BoolArray = np.zeros(0, dtype=np.bool_)


@dataclass(frozen=True, slots=True)
class RecordArrays:
    """The records of one batch (or of several, concatenated) as numpy columns.

    Row i of every column is record i. `offset_array`, `timestamp_array` (Kafka
    milliseconds, -1 = none) and `sequence_array` (-1 = none) hold final values, as
    `trafka.log.records.Record` does. Header `header_positions[i]:header_positions[i+1]`
    of `header_keys`/`header_values` belong to record i (header keys are never null).

    The properties `offsets`, `timestamps`, `keys`, `values`, `headers` and `sequences`
    give the same Python lists as `trafka.log.records.RecordColumns` (built on each access:
    convenient, not fast).
    """

    offset_array: Int64Array
    timestamp_array: Int64Array
    sequence_array: Int32Array
    key_column: BinaryColumn
    value_column: BinaryColumn
    header_positions: Int64Array
    header_keys: BinaryColumn
    header_values: BinaryColumn

    def __len__(self) -> int:
        return len(self.offset_array)

    @property
    def offsets(self) -> list[int]:
        return [int(v) for v in self.offset_array.tolist()]

    @property
    def timestamps(self) -> list[int]:
        return [int(v) for v in self.timestamp_array.tolist()]

    @property
    def sequences(self) -> list[int]:
        return [int(v) for v in self.sequence_array.tolist()]

    @property
    def keys(self) -> list[bytes | None]:
        return self.key_column.to_list()

    @property
    def values(self) -> list[bytes | None]:
        return self.value_column.to_list()

    @property
    def headers(self) -> list[tuple[RecordHeader, ...]]:
        keys = self.header_keys.to_list()
        values = self.header_values.to_list()
        flat = [
            RecordHeader((key or b"").decode("utf-8", "surrogateescape"), value)
            for key, value in zip(keys, values, strict=True)
        ]
        bounds = self.header_positions.tolist()
        return [tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(len(self))]

    @classmethod
    def from_columns(cls, columns: RecordColumns) -> RecordArrays:
        """The reference decoder's lists as arrays; CorruptRecordError when an offset or
        timestamp does not fit int64."""
        offsets = _int64(columns.offsets, "offset")
        timestamps = _int64(columns.timestamps, "timestamp")
        sequences = np.array(columns.sequences, dtype=np.int32)
        counts = np.fromiter((len(h) for h in columns.headers), np.int64, len(columns.headers))
        header_positions = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=header_positions[1:])
        flat = [header for headers in columns.headers for header in headers]
        return cls(
            offsets,
            timestamps,
            sequences,
            BinaryColumn.from_list(columns.keys),
            BinaryColumn.from_list(columns.values),
            header_positions,
            BinaryColumn.from_list([h.key.encode("utf-8", "surrogateescape") for h in flat]),
            BinaryColumn.from_list([h.value for h in flat]),
        )

    @classmethod
    def concat(cls, parts: list[RecordArrays]) -> RecordArrays:
        """The records of `parts`, one after the other (at least one part)."""
        if len(parts) == 1:
            return parts[0]
        header_counts = np.concatenate([np.diff(p.header_positions) for p in parts])
        header_positions = np.zeros(len(header_counts) + 1, dtype=np.int64)
        np.cumsum(header_counts, out=header_positions[1:])
        return cls(
            np.concatenate([p.offset_array for p in parts]),
            np.concatenate([p.timestamp_array for p in parts]),
            np.concatenate([p.sequence_array for p in parts]),
            BinaryColumn.concat([p.key_column for p in parts]),
            BinaryColumn.concat([p.value_column for p in parts]),
            header_positions,
            BinaryColumn.concat([p.header_keys for p in parts]),
            BinaryColumn.concat([p.header_values for p in parts]),
        )


def _int64(values: list[int], what: str) -> Int64Array:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise CorruptRecordError(f"a record's {what} does not fit int64") from None


def decode_record_arrays(data: bytes, header: BatchHeader) -> RecordArrays:
    """Decode the (uncompressed) records section of a v2 batch into `RecordArrays`.

    Same results and errors as `trafka.log.records.decode_record_columns` (which decodes
    any batch this function's fast path declines), whatever the record count.
    """
    try:
        return _decode_vectorised(data, header)
    except _Fallback:
        return RecordArrays.from_columns(decode_record_columns(data, header))


def decode_batch_columns(
    buf: Buffer,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX,
    check_crc: bool = True,
) -> tuple[BatchHeader, RecordArrays]:
    """`trafka.log.records.decode_batch`, but the records as numpy columns: the fast path
    for bulk export.

    Same checks and errors as `decode_batch`, plus one: an offset or timestamp beyond
    int64 is corrupt. Batches of at least `MIN_VECTOR_RECORDS` records are decoded by the
    vectorised decoder (`decode_record_arrays`), smaller ones by the reference loop
    (`trafka.log.records.decode_record_columns`) and converted; both give the same columns.
    """
    header, data = records_section(buf, pos, max_decompressed_bytes, check_crc)
    if header.records_count >= MIN_VECTOR_RECORDS:
        return header, decode_record_arrays(data, header)
    return header, RecordArrays.from_columns(decode_record_columns(data, header))


def _record_starts(data: bytes, count: int) -> Int64Array:
    """Where each record (its length varint) starts, then the section end.

    The one sequential step of the decoder (each record's start depends on the previous
    record's length): compiled with numba when it is installed (the `spark` extra), else
    a minimal per-record Python loop. Both read each length as a one- or two-byte varint
    and do not check it; `_decode_vectorised` then decodes the lengths properly and checks
    that every record starts where the previous one ended, so a negative, too short or
    longer-than-two-byte length goes to the reference. Records that do not end exactly at
    the section end raise `_Fallback` here.
    """
    kernels = _compiled()
    if kernels is None:
        return np.array(_record_starts_python(data, count), dtype=np.int64)
    starts = np.empty(count + 1, dtype=np.int64)
    if kernels.walk(np.frombuffer(data, dtype=np.uint8), count, starts) != len(data):
        raise _Fallback
    return starts


def _record_starts_python(data: bytes, count: int) -> list[int]:
    """`_record_starts` without numba (the same walk as `_walk_lengths`)."""
    starts: list[int] = []
    append = starts.append
    pos = 0
    try:
        for _ in range(count):
            append(pos)
            byte = data[pos]
            if byte < 0x80:
                pos += 1 + (byte >> 1)
            else:
                pos += 2 + (((byte & 0x7F) | (data[pos + 1] << 7)) >> 1)
    except IndexError:
        raise _Fallback from None
    if pos != len(data):
        raise _Fallback
    append(pos)
    return starts


def _walk_lengths(buf: ByteArray, count: int, starts: Int64Array) -> int:
    """Fill `starts` (count + 1 entries) and return the section end, or -1 when a length
    byte lies past the buffer. Plain Python over numpy scalars, compiled by numba."""
    size = buf.shape[0]
    pos = np.int64(0)
    for index in range(count):
        starts[index] = pos
        if pos >= size:
            return -1
        byte = np.int64(buf[pos])
        if byte < 0x80:
            pos += 1 + (byte >> 1)
        else:
            if pos + 1 >= size:
                return -1
            pos += 2 + (((byte & 0x7F) | (np.int64(buf[pos + 1]) << 7)) >> 1)
    starts[count] = pos
    return int(pos)


def _varints_kernel(
    buf: ByteArray, pos: Int64Array, max_bytes: int, values: Int64Array, widths: Int64Array
) -> bool:
    """`_varints` as one loop (compiled by numba): fills `values` and `widths`, returns
    False where `_varints` raises `_Fallback`. Positions past the buffer read its last
    byte, like `take(mode="clip")` (the caller's bounds checks reject such records)."""
    last = buf.shape[0] - 1
    for index in range(pos.shape[0]):
        at = pos[index]
        unsigned = np.uint64(0)
        width = 0
        while True:
            byte = buf[min(at + width, last)]
            part = np.uint64(byte & 0x7F)
            if width == 9 and part > np.uint64(1):
                return False  # a varlong beyond 64 bits
            unsigned |= part << np.uint64(7 * width)
            width += 1
            if byte < 0x80:
                break
            if width == max_bytes:
                return False  # longer than max_bytes
        if max_bytes == 5 and (unsigned >> np.uint64(32)) != np.uint64(0):
            return False  # beyond int32
        values[index] = np.int64(unsigned >> np.uint64(1)) ^ -np.int64(unsigned & np.uint64(1))
        widths[index] = width
    return True


def _gather_kernel(buf: ByteArray, starts: Int64Array, lengths: Int64Array, out: ByteArray) -> None:
    """`_gather` as one loop of slice copies (compiled by numba)."""
    filled = 0
    for index in range(starts.shape[0]):
        start = starts[index]
        length = lengths[index]
        out[filled : filled + length] = buf[start : start + length]
        filled += length


@dataclass(frozen=True, slots=True)
class _Kernels:
    walk: Any
    varints: Any
    gather: Any


_KERNELS: list[_Kernels | None] = []
"""The numba-compiled kernels (None without numba), made on first use."""


def _compiled() -> _Kernels | None:
    if not _KERNELS:
        try:
            import numba
        except ImportError:
            _KERNELS.append(None)
        else:
            # cache=True keeps the machine code in __pycache__ (or numba's user cache), so
            # a new process (a Spark worker) loads it instead of compiling it (~1 s).
            jit = numba.njit(cache=True, nogil=True, boundscheck=False)
            _KERNELS.append(_Kernels(jit(_walk_lengths), jit(_varints_kernel), jit(_gather_kernel)))
    return _KERNELS[0]


def _varints(
    buf: ByteArray, pos: Int64Array, max_bytes: int
) -> tuple[Int64Array, Int64Array | int]:
    """Zig-zag varints (max_bytes 5, int32) or varlongs (10, int64) at every `pos`.

    Returns the values and the widths (the int 1 when every varint is one byte). Raises
    `_Fallback` when one is longer than `max_bytes` or out of its type's range. Runs
    `_varints_kernel` when numba is installed, else the numpy steps below.
    """
    kernels = _compiled()
    if kernels is not None:
        values = np.empty(len(pos), dtype=np.int64)
        widths = np.empty(len(pos), dtype=np.int64)
        if not kernels.varints(buf, pos, max_bytes, values, widths):
            raise _Fallback
        return values, widths
    byte = buf.take(pos, mode="clip")
    more = byte >= 0x80
    if not more.any():
        small = byte.astype(np.int64)
        return (small >> 1) ^ -(small & 1), 1
    second = buf.take(pos + 1, mode="clip")
    if not (more & (second >= 0x80)).any():
        # At most two bytes (values below 8192 in magnitude): the common case.
        extra = more.astype(np.int64)
        two = byte.astype(np.int64)
        two += ((second.astype(np.int64) << 7) - 0x80) * extra
        return (two >> 1) ^ -(two & 1), extra + 1
    unsigned = (byte & 0x7F).astype(np.uint64)
    width = np.ones(len(pos), dtype=np.int64)
    for index in range(1, max_bytes):
        byte = buf.take(pos + index, mode="clip")
        part = (byte & 0x7F).astype(np.uint64)
        if index == 9 and bool((part[more] > 1).any()):
            raise _Fallback  # a varlong beyond 64 bits
        part <<= np.uint64(7 * index)
        part *= more
        unsigned |= part
        width += more
        more &= byte >= 0x80
        if not more.any():
            break
    else:
        raise _Fallback  # longer than max_bytes
    if max_bytes == 5 and bool((unsigned >> np.uint64(32)).any()):
        raise _Fallback  # beyond int32
    half = (unsigned >> np.uint64(1)).view(np.int64)
    sign = (unsigned & np.uint64(1)).view(np.int64)
    return half ^ -sign, width


def _gather(buf: ByteArray, starts: Int64Array, lengths: Int64Array) -> ByteArray:
    """The bytes of the slices `[starts[i], starts[i] + lengths[i])` (non-overlapping, in
    increasing order), concatenated: a boolean mask over `buf` built from the alternating
    run lengths (gap, slice, gap, ..., gap), then one compress."""
    count = len(starts)
    if count == 0:
        return _NO_BYTES
    kernels = _compiled()
    if kernels is not None:
        out = np.empty(int(lengths.sum()), dtype=np.uint8)
        kernels.gather(buf, starts, lengths, out)
        return out
    ends = starts + lengths
    runs = np.empty(2 * count + 1, dtype=np.int64)
    runs[0] = starts[0]
    runs[1:-1:2] = lengths
    np.subtract(starts[1:], ends[:-1], out=runs[2:-1:2])
    runs[-1] = len(buf) - ends[-1]
    return buf[np.repeat(_pattern(count), runs)]


def _pattern(count: int) -> BoolArray:
    """False, True, False, ..., False: 2 * count + 1 entries."""
    pattern = np.zeros(2 * count + 1, dtype=np.bool_)
    pattern[1::2] = True
    return pattern


def _binary(buf: ByteArray, starts: Int64Array, lengths: Int64Array) -> BinaryColumn:
    """A column of slices; a negative length is a null."""
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    positions = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(sizes, out=positions[1:])
    return BinaryColumn(positions, _gather(buf, starts, sizes), valid)


def _decode_vectorised(data: bytes, header: BatchHeader) -> RecordArrays:
    count = header.records_count
    size = len(data)
    if count <= 0 or count * MIN_RECORD_SIZE > size:
        raise _Fallback
    starts = _record_starts(data, count)
    ends = starts[1:]
    buf = np.frombuffer(data, dtype=np.uint8)
    lengths, width = _varints(buf, starts[:-1], 5)
    pos = starts[:-1] + width
    if bool((lengths < MIN_RECORD_SIZE - 1).any()) or not np.array_equal(pos + lengths, ends):
        raise _Fallback
    pos = pos + 1  # attributes: unused
    timestamp_deltas, width = _varints(buf, pos, 10)
    pos = pos + width
    offset_deltas, width = _varints(buf, pos, 5)
    pos = pos + width
    key_lengths, width = _varints(buf, pos, 5)
    key_starts = pos + width
    pos = key_starts + np.maximum(key_lengths, 0)
    value_lengths, width = _varints(buf, pos, 5)
    value_starts = pos + width
    pos = value_starts + np.maximum(value_lengths, 0)
    header_counts, width = _varints(buf, pos, 5)
    pos = pos + width
    if bool((pos > ends).any()):
        raise _Fallback
    header_positions = np.zeros(count + 1, dtype=np.int64)
    header_slices: _HeaderSlices | None = None
    if bool(header_counts.any()):
        header_slices = _header_slices(buf, pos, ends, header_counts)
        pos = header_slices.ends
        np.cumsum(header_counts, out=header_positions[1:])
    if not np.array_equal(pos, ends):
        raise _Fallback
    # Every record is consistent: the slices below are in bounds and in order.
    if header_slices is None:
        header_keys = header_values = _EMPTY_COLUMN
    else:
        header_keys = _binary(buf, header_slices.key_starts, header_slices.key_lengths)
        header_values = _binary(buf, header_slices.value_starts, header_slices.value_lengths)
    return RecordArrays(
        _offsets(header, offset_deltas),
        _timestamps(header, timestamp_deltas, count),
        _sequences(header, offset_deltas),
        _binary(buf, key_starts, key_lengths),
        _binary(buf, value_starts, value_lengths),
        header_positions,
        header_keys,
        header_values,
    )


_EMPTY_COLUMN = BinaryColumn(np.zeros(1, dtype=np.int64), _NO_BYTES, _NO_BOOLS)


@dataclass(frozen=True, slots=True)
class _HeaderSlices:
    """Where each header's key and value are (record-major), and where each record's
    headers end."""

    key_starts: Int64Array
    key_lengths: Int64Array
    value_starts: Int64Array
    value_lengths: Int64Array
    ends: Int64Array


def _header_slices(
    buf: ByteArray, pos: Int64Array, ends: Int64Array, header_counts: Int64Array
) -> _HeaderSlices:
    """Decode the headers per header index, over the records with that many headers.

    A negative count or key length, headers that cannot fit (2 bytes each at least), or
    a header past its record's end go to the reference.
    """
    if bool((header_counts < 0).any()) or bool((header_counts * 2 > ends - pos).any()):
        raise _Fallback
    pos = pos.copy()
    total = int(header_counts.sum())
    first = np.zeros(len(header_counts), dtype=np.int64)
    np.cumsum(header_counts[:-1], out=first[1:])
    key_starts = np.empty(total, dtype=np.int64)
    key_lengths = np.empty(total, dtype=np.int64)
    value_starts = np.empty(total, dtype=np.int64)
    value_lengths = np.empty(total, dtype=np.int64)
    for index in range(int(header_counts.max())):
        rows = np.flatnonzero(header_counts > index)
        at = pos[rows]
        lengths, width = _varints(buf, at, 5)
        if bool((lengths < 0).any()):
            raise _Fallback
        flat = first[rows] + index
        key_starts[flat] = at + width
        key_lengths[flat] = lengths
        at = at + width + lengths
        lengths, width = _varints(buf, at, 5)
        value_starts[flat] = at + width
        value_lengths[flat] = lengths
        at = at + width + np.maximum(lengths, 0)
        if bool((at > ends[rows]).any()):
            raise _Fallback
        pos[rows] = at
    return _HeaderSlices(key_starts, key_lengths, value_starts, value_lengths, pos)


def _checked_add(base: int, deltas: Int64Array, what: str) -> Int64Array:
    low = base + int(deltas.min())
    high = base + int(deltas.max())
    if low < INT64_MIN or high > INT64_MAX:
        raise CorruptRecordError(f"a record's {what} does not fit int64")
    return deltas + np.int64(base)


def _offsets(header: BatchHeader, offset_deltas: Int64Array) -> Int64Array:
    return _checked_add(header.base_offset, offset_deltas, "offset")


def _timestamps(header: BatchHeader, timestamp_deltas: Int64Array, count: int) -> Int64Array:
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return np.full(count, header.max_timestamp, dtype=np.int64)
    return _checked_add(header.base_timestamp, timestamp_deltas, "timestamp")


def _sequences(header: BatchHeader, offset_deltas: Int64Array) -> Int32Array:
    if header.base_sequence < 0:
        return np.full(len(offset_deltas), NO_SEQUENCE, dtype=np.int32)
    wrapped: Any = np.mod(offset_deltas + header.base_sequence, SEQUENCE_MODULUS)
    return np.asarray(wrapped, dtype=np.int32)
