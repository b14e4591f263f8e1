"""Compression codecs: Kafka's framings, interoperable variants, and bounded decompression."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from trafka.log.batch import CompressionType
from trafka.log.compression import (
    XERIAL_HEADER,
    codec_from_attributes,
    compress,
    decompress,
    snappy_decompress,
)
from trafka.log.errors import CorruptRecordError

PAYLOADS = [b"", b"a", bytes(range(256)) * 3, b"kafka record " * 20_000]


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_round_trip(codec: CompressionType, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


def test_snappy_is_xerial_framed_in_32k_blocks() -> None:
    payload = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    framed = compress(CompressionType.SNAPPY, payload)
    assert framed.startswith(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    pos, blocks = len(XERIAL_HEADER), []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == payload


def test_snappy_raw_block_is_accepted() -> None:
    payload = b"librdkafka may send raw snappy " * 100
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert decompress(CompressionType.SNAPPY, raw) == payload


def test_lz4_frames_use_independent_64k_blocks() -> None:
    frame = compress(CompressionType.LZ4, b"x" * 200_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flags, block_descriptor = frame[4], frame[5]
    assert flags & 0xC0 == 0x40  # version 01
    assert flags & 0x20  # block independence (Java rejects linked blocks)
    assert not flags & 0x08  # no content size
    assert (block_descriptor >> 4) & 0x07 == 4  # 64 KB maximum block size


def test_lz4_any_valid_frame_decodes() -> None:
    payload = b"linked blocks and checksums " * 10_000
    for kwargs in [
        {},
        {"block_linked": True, "content_checksum": True, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_checksum": True},
    ]:
        assert decompress(CompressionType.LZ4, lz4.frame.compress(payload, **kwargs)) == payload


def test_zstd_frames_without_content_size_decode() -> None:
    payload = b"zstd-jni streams " * 5_000
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(payload)
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(no_size)  # the trap
    assert decompress(CompressionType.ZSTD, no_size) == payload
    compressor = zstandard.ZstdCompressor().compressobj()
    streamed = compressor.compress(payload) + compressor.flush()
    assert decompress(CompressionType.ZSTD, streamed) == payload


def test_gzip_members_and_trailing_bytes() -> None:
    two_members = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, two_members) == b"first second"
    assert decompress(CompressionType.GZIP, gzip.compress(b"x") + b"\x00\x00") == b"x"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, gzip.compress(b"y" * 1000)[:-12])


def _bombs() -> dict[CompressionType, bytes]:
    zeros = bytes(8 * 1024 * 1024)
    return {
        CompressionType.GZIP: gzip.compress(zeros),
        CompressionType.SNAPPY: compress(CompressionType.SNAPPY, zeros),
        CompressionType.LZ4: compress(CompressionType.LZ4, zeros),
        CompressionType.ZSTD: zstandard.ZstdCompressor(write_content_size=False).compress(zeros),
    }


def test_bounded_decompression() -> None:
    for codec, bomb in _bombs().items():
        assert len(bomb) < 1024 * 1024
        with pytest.raises(CorruptRecordError, match="inflates past"):
            decompress(codec, bomb, max_output_bytes=1024 * 1024)
        assert len(decompress(codec, bomb, max_output_bytes=8 * 1024 * 1024)) == 8 * 1024 * 1024
    # a raw snappy block declaring a huge length is refused before decoding
    with pytest.raises(CorruptRecordError):
        snappy_decompress(b"\xff\xff\xff\xff\x0f\x00", 1024)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_garbage_is_corrupt(codec: CompressionType) -> None:
    for garbage in [b"", b"\x00", b"not compressed at all", zlib.compress(b"abc"), b"\xff" * 64]:
        try:
            decompress(codec, garbage)
        except CorruptRecordError:
            pass


def test_unknown_codec_ids_are_corrupt() -> None:
    assert codec_from_attributes(0x14) is CompressionType.ZSTD
    for codec_id in (5, 6, 7):
        with pytest.raises(CorruptRecordError):
            codec_from_attributes(codec_id)
