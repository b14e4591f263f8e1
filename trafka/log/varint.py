"""Zig-zag variable-length integers, as in record batch v2 (SEEDS MSG-12, EXT-02).

Kafka borrows Protocol Buffers' encoding: a signed value `n` is zig-zagged to
`(n << 1) ^ (n >> 63)` so that small magnitudes of either sign are small, then written in
groups of 7 bits, least significant group first, with the top bit of every byte but the
last set. `varint` fields are int32 (at most 5 bytes), `varlong` fields int64 (at most 10).

Decoders take `bytes` (indexing `bytes` is the fastest byte access CPython has) and a
position, and return `(value, next_position)`. Bad input raises `CorruptRecordError` only.
"""

from __future__ import annotations

from trafka.log.errors import CorruptRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def zigzag(value: int) -> int:
    """The unsigned zig-zag form of a signed 64-bit value."""
    return (value << 1) ^ (value >> 63)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag varint (or varlong) encoding of `value` to `out`."""
    unsigned = (value << 1) ^ (value >> 63)
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def varint_size(value: int) -> int:
    """Bytes the zig-zag encoding of `value` occupies."""
    unsigned = (value << 1) ^ (value >> 63)
    size = 1
    while unsigned >= 0x80:
        unsigned >>= 7
        size += 1
    return size


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (int32, at most 5 bytes) at `pos`."""
    return _read(buf, pos, 5, INT32_MIN, INT32_MAX)


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64, at most 10 bytes) at `pos`."""
    return _read(buf, pos, 10, INT64_MIN, INT64_MAX)


def read_unsigned_varint(buf: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a plain (not zig-zag) unsigned varint, e.g. snappy's length preamble."""
    result = 0
    shift = 0
    end = len(buf)
    for index in range(pos, min(pos + max_bytes, end)):
        byte = buf[index]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, index + 1
        shift += 7
    if pos + max_bytes <= end:
        raise CorruptRecordError(f"varint at {pos} longer than {max_bytes} bytes")
    raise CorruptRecordError(f"varint at {pos} runs past the end of the data")


def _read(buf: bytes, pos: int, max_bytes: int, low: int, high: int) -> tuple[int, int]:
    try:
        byte = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"varint at {pos} runs past the end of the data") from None
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    unsigned, next_pos = read_unsigned_varint(buf, pos, max_bytes)
    value = (unsigned >> 1) ^ -(unsigned & 1)
    if not low <= value <= high:
        raise CorruptRecordError(f"varint at {pos} out of range: {value}")
    return value, next_pos
