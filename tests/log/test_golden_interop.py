"""Proof that our bytes are Kafka's: kafka-python's and aiokafka's own record parsers read
what `build_batch` writes, in every codec, with the same contents; and our decoder reads
what their builders write."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from trafka.log.batch import CompressionType, TimestampType
from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.records import NewRecord, RecordHeader, build_batch, decode_batch

with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from aiokafka.record import default_records as aiokafka_default
    from aiokafka.record.memory_records import MemoryRecords as AiokafkaMemoryRecords
    from kafka.record import MemoryRecords as KafkaPythonMemoryRecords
    from kafka.record.default_records import (
        DefaultRecordBatchBuilder as KafkaPythonBuilder,
    )

RECORDS = [
    NewRecord(b"value-0", key=b"key-0", timestamp=1_700_000_000_000),
    NewRecord(None, key=b"tombstone", timestamp=1_700_000_000_001),
    NewRecord(
        b"h" * 5000,
        headers=(RecordHeader("trace", b"t1"), RecordHeader("n\u00e9", None)),
        timestamp=1_699_999_000_000,
    ),
    NewRecord(b"", key=b"", timestamp=1_700_000_000_002),
]
# kafka-python needs python-snappy for snappy (not a dependency); aiokafka uses cramjam.
KAFKA_PYTHON_CODECS = [c for c in CompressionType if c is not CompressionType.SNAPPY]


def _ours(codec: CompressionType, **kwargs: Any) -> bytes:
    first = build_batch(
        RECORDS,
        base_offset=100,
        compression=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=9,
        partition_leader_epoch=4,
        **kwargs,
    )
    second = build_batch([NewRecord(b"second batch")], base_offset=104, compression=codec, now_ms=5)
    return first + second


def _contents(batch: Any) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]


def _expected(log_append_time_ms: int | None = None) -> list[tuple[Any, ...]]:
    return [
        (
            100 + i,
            r.timestamp if log_append_time_ms is None else log_append_time_ms,
            r.key,
            r.value,
            [(h.key, h.value) for h in r.headers],
        )
        for i, r in enumerate(RECORDS)
    ]


def _check_batch(batch: Any, codec: CompressionType) -> None:
    assert batch.validate_crc()
    assert batch.compression_type == int(codec)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 9)
    assert batch.base_offset == 100


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_kafka_python_reads_our_batches(codec: CompressionType) -> None:
    memory = KafkaPythonMemoryRecords(_ours(codec))
    batch = memory.next_batch()
    _check_batch(batch, codec)
    assert _contents(batch) == _expected()
    second = memory.next_batch()
    assert _contents(second) == [(104, 5, None, b"second batch", [])]
    assert memory.next_batch() is None


@pytest.mark.parametrize("codec", list(CompressionType))
def test_aiokafka_reads_our_batches(codec: CompressionType) -> None:
    raw = _ours(codec)
    memory = AiokafkaMemoryRecords(raw)
    batch = memory.next_batch()
    _check_batch(batch, codec)
    assert _contents(batch) == _expected()
    assert _contents(memory.next_batch()) == [(104, 5, None, b"second batch", [])]
    # the pure-Python parser too (the default one above is aiokafka's Cython extension)
    first_size = decode_batch(raw).size
    pure = aiokafka_default._DefaultRecordBatchPy(raw[:first_size])
    _check_batch(pure, codec)
    assert _contents(pure) == _expected()


def test_flags_as_the_clients_see_them() -> None:
    raw = build_batch(
        RECORDS,
        base_offset=100,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        now_ms=1_800_000_000_000,
        is_transactional=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    for memory in (KafkaPythonMemoryRecords(raw), AiokafkaMemoryRecords(raw)):
        batch = memory.next_batch()
        assert batch.timestamp_type == 1 and batch.is_transactional
        assert _contents(batch) == _expected(log_append_time_ms=1_800_000_000_000)
    marker = build_end_transaction_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=3),
        producer_id=1,
        producer_epoch=0,
        now_ms=5,
    )
    for memory in (KafkaPythonMemoryRecords(marker), AiokafkaMemoryRecords(marker)):
        batch = memory.next_batch()
        assert batch.is_control_batch and batch.is_transactional


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_we_read_kafka_python_builder_batches(codec: CompressionType) -> None:
    builder = KafkaPythonBuilder(2, int(codec), False, 5, 1, 0, 1 << 20)
    for i in range(10):
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i * 50, [("h", b"%d" % i)])
    batch = decode_batch(bytes(builder.build()))
    assert batch.compression is codec
    assert [
        (r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in batch.records
    ] == [
        (i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i * 50, (RecordHeader("h", b"%d" % i),), i)
        for i in range(10)
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_we_read_aiokafka_builder_batches(codec: CompressionType) -> None:
    builder = aiokafka_default.DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 20)
    for i in range(10):
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i * 50, [("h", b"%d" % i)])
    batch = decode_batch(bytes(builder.build()))
    assert batch.compression is codec
    assert [(r.offset, r.key, r.value, r.headers) for r in batch.records] == [
        (i, b"k%d" % i, b"v%d" % i * 50, (RecordHeader("h", b"%d" % i),)) for i in range(10)
    ]
