"""Golden bytes: record batches captured from real clients decode exactly.

`tests/data/capture_golden.py` ran a fake broker once and stored what confluent-kafka
(librdkafka) and kafka-python sent in Produce requests, in every codec, as magic 2 and (for
librdkafka and kafka-python's legacy builder) as magic 1 and magic 0 message sets, plus
kafkajs's batches (none and gzip, its built-in codecs).
The traps these files pin down (PLATFORM.md §5): librdkafka's snappy is raw, kafka-python's
is xerial-framed; librdkafka's zstd frames have no content size; librdkafka's magic 0 LZ4
frames carry the wrong header checksum of KAFKA-3160.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from trafka.log.batch import HEADER_SIZE, CompressionType
from trafka.log.compression import decompress
from trafka.log.records import NewRecord, Record, RecordHeader, build_batch, iter_batches

GOLDEN_DIR = Path(__file__).parent.parent / "data" / "golden"
MANIFEST: dict[str, Any] = json.loads((GOLDEN_DIR / "manifest.json").read_text())
CAPTURES: list[dict[str, Any]] = MANIFEST["captures"]
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MAGIC_OF_PROFILE = {"v2": 2, "magic1": 1, "magic0": 0}


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _sent() -> list[dict[str, Any]]:
    return [
        {
            "key": _bytes(m["key"]),
            "value": _bytes(m["value"]),
            "headers": tuple(RecordHeader(k, _bytes(v)) for k, v in m["headers"]),
            "timestamp": m["timestamp"],
        }
        for m in MANIFEST["messages"]
    ]


def _as_the_broker_stamps_it(data: bytes, magic: int) -> bytes:
    """Producers leave a legacy wrapper's offset 0; the broker writes the last inner offset
    (MSG-09). v2 batches and uncompressed messages carry their offsets already."""
    if magic == 2:
        return data
    stamped = bytearray(data)
    pos = 0
    while pos < len(stamped):
        (size,) = struct.unpack_from(">i", stamped, pos + 8)
        if stamped[pos + 17] & 0x07:
            struct.pack_into(">q", stamped, pos, len(_sent()) - 1)
        pos += 12 + size
    return bytes(stamped)


def test_the_capture_covers_every_codec_and_magic() -> None:
    seen = {(c["client"], MAGIC_OF_PROFILE[c["broker_profile"]], c["codec"]) for c in CAPTURES}
    for codec in CODECS:
        assert ("confluent-kafka", 2, codec) in seen
        assert ("kafka-python", 2, codec) in seen
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            assert ("confluent-kafka", magic, codec) in seen
    assert ("kafka-python", 1, "gzip") in seen
    assert {("kafkajs", 2, "none"), ("kafkajs", 2, "gzip")} <= seen


@pytest.mark.parametrize("capture", CAPTURES, ids=[c["file"] for c in CAPTURES])
def test_golden_capture_decodes_exactly(capture: dict[str, Any]) -> None:
    magic = MAGIC_OF_PROFILE[capture["broker_profile"]]
    raw = (GOLDEN_DIR / capture["file"]).read_bytes()
    assert len(raw) == capture["bytes"]
    batches = list(iter_batches(_as_the_broker_stamps_it(raw, magic)))  # CRCs checked
    assert {b.magic for b in batches} == {magic}
    assert {int(b.compression) for b in batches} == {CODECS[capture["codec"]]}
    records = [r for b in batches for r in b.records]
    sent = _sent()
    assert [r.offset for r in records] == list(range(len(sent)))
    assert [r.key for r in records] == [m["key"] for m in sent]
    assert [r.value for r in records] == [m["value"] for m in sent]
    if magic == 2:
        assert [r.headers for r in records] == [m["headers"] for m in sent]
    else:
        assert all(r.headers == () for r in records)  # v0/v1 have no headers
    expected_timestamps = [-1] * len(sent) if magic == 0 else [m["timestamp"] for m in sent]
    assert [r.timestamp for r in records] == expected_timestamps
    if capture["idempotent"]:
        assert all(b.header.producer_id >= 1000 and b.header.producer_epoch == 0 for b in batches)
        assert [r.sequence for r in records] == list(range(len(sent)))
    elif capture["client"] == "kafkajs":
        # kafkajs writes producerEpoch 0 and baseSequence 0 without a producer id
        # (REFERENCE.md §4); Kafka still derives sequences from baseSequence.
        assert all(b.header.producer_id == -1 for b in batches)
        assert all((b.header.producer_epoch, b.header.base_sequence) == (0, 0) for b in batches)
        assert [r.sequence for r in records] == list(range(len(sent)))
    else:
        assert all(b.header.producer_id == -1 for b in batches)
        assert all(r.sequence == -1 for r in records)


# kafkajs takes the smallest timestamp as baseTimestamp (Java, librdkafka and kafka-python
# take the first record's), so its deltas differ from ours: valid, not byte-identical.
V2_CAPTURES = [c for c in CAPTURES if c["broker_profile"] == "v2" and c["client"] != "kafkajs"]


def test_kafkajs_base_timestamp_is_the_smallest() -> None:
    (batch,) = list(iter_batches((GOLDEN_DIR / "kafkajs-none.bin").read_bytes()))
    assert batch.header.base_timestamp == min(m["timestamp"] for m in _sent())
    assert batch.header.base_timestamp != batch.records[0].timestamp


@pytest.mark.parametrize("capture", V2_CAPTURES, ids=[c["file"] for c in V2_CAPTURES])
def test_our_encoding_of_the_same_records_is_byte_identical(capture: dict[str, Any]) -> None:
    """Same records, same header fields: build_batch writes the client's exact records
    section (compressed bytes differ between compressor implementations, the content not)."""
    raw = (GOLDEN_DIR / capture["file"]).read_bytes()
    (batch,) = list(iter_batches(raw))
    header = batch.header
    ours = build_batch(
        [
            NewRecord(r.value, key=r.key, headers=r.headers, timestamp=r.timestamp)
            for r in batch.records
        ],
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    theirs_records = decompress(header.compression, raw[HEADER_SIZE:])
    assert ours[HEADER_SIZE:] == theirs_records
    if header.compression is CompressionType.NONE:
        assert ours == raw
    else:
        # identical header apart from the size, codec bits and CRC
        assert ours[12:17] == raw[12:17] and ours[23:HEADER_SIZE] == raw[23:HEADER_SIZE]


def test_decoded_records_have_the_expected_shape() -> None:
    (batch,) = list(iter_batches((GOLDEN_DIR / "confluent-kafka-none.bin").read_bytes()))
    assert batch.records[2] == Record(2, 1_700_000_000_002, b"tombstone", None, (), -1)
    assert batch.header.max_timestamp == max(m["timestamp"] for m in _sent())
