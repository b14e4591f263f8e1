"""Kafka's compression codecs, interoperable with the Java client, librdkafka and kafka-python.

The codec id lives in attribute bits 0-2 (SEEDS MSG-04, EXT-01): 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. In a v2 batch everything after recordsCount is compressed as one blob; in a
v0/v1 message set the compressed inner message set is the value of a wrapper message.

The traps (PLATFORM.md §5), each handled here:

* **gzip**: RFC 1952 gzip members (Java `GZIPOutputStream`). Decoding accepts several
  concatenated members, as Java's `GZIPInputStream` does, and ignores trailing bytes that do
  not start another member (Java does the same).
* **snappy**: the Java client writes **xerial snappy-java framing**::

      offset  size  field
           0     8  magic  b"\\x82SNAPPY\\x00"
           8     4  version  int32 BE (1)
          12     4  min compatible version  int32 BE (1)
          16        blocks: [int32 BE compressed length][raw snappy block], each block
                    holding at most 32 KiB of input

  librdkafka may send one raw snappy block without framing. We write xerial and read both
  (like xerial's `SnappyInputStream`, which falls back to raw when the magic is absent).
  cramjam's `snappy.compress` is the *official* framing format, which Kafka does not use,
  so only `compress_raw`/`decompress_raw` are called.
* **lz4**: Kafka's frame format (`KafkaLZ4BlockOutputStream`): LZ4 frame, **independent
  blocks** (`block_linked=False`; Java rejects "Dependent block stream is unsupported"),
  64 KiB maximum block size, no content size, no content checksum. Any valid LZ4 frame is
  decoded (linked blocks, content size and checksums included).
* **zstd**: zstd-jni writes frames **without a content size**, which
  `ZstdDecompressor().decompress()` refuses; we stream-decode instead.

Bounded decompression: every decoder stops and raises `CorruptRecordError` as soon as the
output would exceed `max_output_bytes`, so a small "zip bomb" batch cannot exhaust memory.
Every decode failure, whatever the codec library raises, becomes `CorruptRecordError`.

Magic 0 LZ4: Kafka 0.8/0.9 producers computed the frame's header checksum over the wrong
bytes (KAFKA-3160), so Kafka ignores that checksum for magic 0; `relax_lz4_header_checksum`
rewrites it to the correct value before decoding such a wrapper.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from trafka.log.batch import CompressionType
from trafka.log.errors import CorruptRecordError
from trafka.log.varint import read_unsigned_varint

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
"""Default bound on the decompressed size of one batch's records (or one wrapper's value)."""

GZIP_LEVEL = 6
"""Java's `Deflater.DEFAULT_COMPRESSION`, what the Java client's gzip uses by default."""

ZSTD_LEVEL = 3
"""Kafka's `compression.zstd.level` default."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
"""snappy-java's default block size (input bytes per block)."""

_GZIP_MAGIC = b"\x1f\x8b"
_INT32 = struct.Struct(">i")
_CHUNK_BYTES = 256 * 1024

_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress `data` the way the Java client does for `codec`."""
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec is CompressionType.SNAPPY:
        return xerial_snappy_compress(data)
    if codec is CompressionType.LZ4:
        return bytes(
            lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    if codec is CompressionType.ZSTD:
        return bytes(_ZSTD_COMPRESSOR.compress(data))
    raise AssertionError(f"unreachable codec {codec!r}")


def decompress(
    codec: CompressionType,
    data: bytes | bytearray | memoryview,
    *,
    max_output_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress `data`; raise `CorruptRecordError` on bad data or output past the bound."""
    try:
        if codec is CompressionType.NONE:
            result = bytes(data)
        elif codec is CompressionType.GZIP:
            result = _gunzip(data, max_output_bytes)
        elif codec is CompressionType.SNAPPY:
            result = snappy_decompress(data, max_output_bytes)
        elif codec is CompressionType.LZ4:
            result = _lz4_decompress(data, max_output_bytes)
        elif codec is CompressionType.ZSTD:
            result = _zstd_decompress(data, max_output_bytes)
        else:
            raise AssertionError(f"unreachable codec {codec!r}")
    except CorruptRecordError:
        raise
    except Exception as error:  # the codec libraries raise many types; the contract is one
        raise CorruptRecordError(
            f"{codec.name.lower()} data does not decompress: {error}"
        ) from None
    if len(result) > max_output_bytes:
        raise _too_large(codec, max_output_bytes)
    return result


def codec_from_attributes(attributes: int) -> CompressionType:
    """The codec of attribute bits 0-2; unknown ids (5-7) are corrupt data."""
    codec_id = attributes & 0x07
    if codec_id > CompressionType.ZSTD:
        raise CorruptRecordError(f"unknown compression codec id {codec_id}")
    return CompressionType(codec_id)


def _too_large(codec: CompressionType, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{codec.name.lower()} data inflates past {limit} bytes")


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    pending = bytes(data)
    while True:
        decompressor = zlib.decompressobj(31)
        while True:
            chunk = decompressor.decompress(pending, limit - total + 1)
            total += len(chunk)
            if total > limit:
                raise _too_large(CompressionType.GZIP, limit)
            chunks.append(chunk)
            if decompressor.eof:
                break
            pending = decompressor.unconsumed_tail
            if not pending:
                raise CorruptRecordError("gzip data ends before the end of the stream")
        pending = decompressor.unused_data
        if not pending.startswith(_GZIP_MAGIC):
            return b"".join(chunks)


def xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    """snappy-java's framed format: the 16-byte header, then length-prefixed raw blocks."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decompress(
    data: bytes | bytearray | memoryview, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes:
    """Decode xerial-framed snappy, or one raw snappy block when the xerial magic is absent."""
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        return _snappy_raw_block(raw, limit)
    if len(raw) < len(XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    pos = len(XERIAL_HEADER)
    chunks: list[bytes] = []
    total = 0
    while pos < len(raw):
        if len(raw) - pos < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (block_length,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if block_length < 0 or pos + block_length > len(raw):
            raise CorruptRecordError(f"xerial snappy block of {block_length} bytes truncated")
        chunk = _snappy_raw_block(raw[pos : pos + block_length], limit - total)
        total += len(chunk)
        chunks.append(chunk)
        pos += block_length
    return b"".join(chunks)


def _snappy_raw_block(block: bytes, limit: int) -> bytes:
    # The preamble holds the uncompressed length: check it before the library allocates it.
    declared, _ = read_unsigned_varint(block, 0)
    if declared > limit:
        raise _too_large(CompressionType.SNAPPY, limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _lz4_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    pending = bytes(data)
    while pending:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(pending, max_length=limit - total + 1)
        while True:
            total += len(chunk)
            if total > limit:
                raise _too_large(CompressionType.LZ4, limit)
            chunks.append(chunk)
            if decompressor.eof or decompressor.needs_input:
                break
            chunk = decompressor.decompress(b"", max_length=limit - total + 1)
        if not decompressor.eof:
            raise CorruptRecordError("lz4 frame ends before its end mark")
        pending = decompressor.unused_data or b""
    return b"".join(chunks)


_XXH_PRIME1 = 2654435761
_XXH_PRIME2 = 2246822519
_XXH_PRIME3 = 3266489917
_XXH_PRIME4 = 668265263
_XXH_PRIME5 = 374761393
_MASK32 = 0xFFFFFFFF
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _rotate_left32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def _xxh32_short(data: bytes) -> int:
    """XXH32 with seed 0 of fewer than 16 bytes (an LZ4 frame descriptor is at most 14)."""
    assert len(data) < 16
    value = (_XXH_PRIME5 + len(data)) & _MASK32
    pos = 0
    while pos + 4 <= len(data):
        word = int.from_bytes(data[pos : pos + 4], "little")
        value = (value + word * _XXH_PRIME3) & _MASK32
        value = (_rotate_left32(value, 17) * _XXH_PRIME4) & _MASK32
        pos += 4
    for byte in data[pos:]:
        value = (value + byte * _XXH_PRIME5) & _MASK32
        value = (_rotate_left32(value, 11) * _XXH_PRIME1) & _MASK32
    value ^= value >> 15
    value = (value * _XXH_PRIME2) & _MASK32
    value ^= value >> 13
    value = (value * _XXH_PRIME3) & _MASK32
    value ^= value >> 16
    return value


def relax_lz4_header_checksum(frame: bytes) -> bytes:
    """`frame` with its header checksum byte recomputed (KAFKA-3160, magic 0 only).

    Frame header: magic (4), FLG (1), BD (1), [content size (8) if FLG bit 3],
    [dictionary id (4) if FLG bit 0], HC (1) = second byte of XXH32(FLG..before HC).
    Anything that is not an LZ4 frame is returned unchanged (decoding then fails).
    """
    if len(frame) < 7 or not frame.startswith(_LZ4_MAGIC):
        return frame
    flags = frame[4]
    checksum_at = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= checksum_at:
        return frame
    checksum = (_xxh32_short(frame[4:checksum_at]) >> 8) & 0xFF
    return frame[:checksum_at] + bytes([checksum]) + frame[checksum_at + 1 :]


def _zstd_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    raw = bytes(data)
    if not raw:
        raise CorruptRecordError("empty zstd data")
    chunks: list[bytes] = []
    total = 0
    with _ZSTD_DECOMPRESSOR.stream_reader(raw, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(_CHUNK_BYTES, limit - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise _too_large(CompressionType.ZSTD, limit)
            chunks.append(chunk)
    return b"".join(chunks)
