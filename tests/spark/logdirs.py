"""Build log dirs in Kafka's layout for the Spark audit tests (no Spark here).

`write_cluster(root)` writes three "brokers" (log dirs `b1`, `b2`, `b3`, each with a
`meta.properties`) holding replicas of the same partitions, written with `build_batch`:

* `orders` partitions 0 and 1, replicas on brokers 1, 2, 3; every codec, keys, headers,
  producer ids; orders-0 rolls into a second segment;
* `events` partition 0, replicas on brokers 1 and 2, one transactional batch;
* `__consumer_offsets` partition 0 on brokers 1 and 2 with offset commits and a group
  metadata record (encoded with trafka.group.records).

Each replica gets its `.index` (an entry per batch: its last offset and position) and
`.timeindex` (an entry per new max timestamp), and each
log dir a `replication-offset-checkpoint` with the high watermark (= log end offset).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from trafka.group.records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitRecord,
    OffsetCommitValue,
    OffsetsTopicRecord,
    encode_record,
)
from trafka.log.batch import CompressionType, parse_header
from trafka.log.records import NewRecord, RecordHeader, build_batch

BASE_TIMESTAMP_MS = 1_700_000_000_000
RECORDS_PER_BATCH = 5


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    compression: str


@dataclass
class Cluster:
    root: str
    log_dirs: dict[int, str] = field(default_factory=dict)
    replicas: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)

    def segment_path(self, broker: int, topic: str, partition: int, base_offset: int = 0) -> str:
        return os.path.join(
            self.log_dirs[broker], f"{topic}-{partition}", f"{base_offset:020d}.log"
        )


def write_properties(log_dir: str, broker: int) -> None:
    with open(os.path.join(log_dir, "meta.properties"), "w") as handle:
        handle.write(f"#Written by the tests\nversion=1\nnode.id={broker}\ncluster.id=AuditTest\n")


def write_checkpoint(log_dir: str, entries: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    with open(os.path.join(log_dir, "replication-offset-checkpoint"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def write_segments(
    partition_dir: str, batches: list[tuple[int, int, bytes]], roll_at: int | None
) -> None:
    """Write (base offset, last offset, bytes) batches into segments with offset indexes;
    a new segment starts at the first batch whose base offset is >= `roll_at`."""
    os.makedirs(partition_dir, exist_ok=True)
    segments: list[list[tuple[int, int, bytes]]] = [[]]
    for batch in batches:
        if roll_at is not None and batch[0] >= roll_at and len(segments) == 1 and segments[0]:
            segments.append([])
        segments[-1].append(batch)
    for segment in segments:
        if not segment:
            continue
        base = segment[0][0]
        log = bytearray()
        index = bytearray()
        time_index = bytearray()
        max_timestamp = -1
        for _base_offset, last_offset, data in segment:
            index += struct.pack(">ii", last_offset - base, len(log))
            if data[16] == 2 and parse_header(data).max_timestamp > max_timestamp:
                # Kafka's time index: (max timestamp so far, last offset of its batch).
                max_timestamp = parse_header(data).max_timestamp
                time_index += struct.pack(">qi", max_timestamp, last_offset - base)
            log += data
        with open(os.path.join(partition_dir, f"{base:020d}.timeindex"), "wb") as handle:
            handle.write(time_index)
        with open(os.path.join(partition_dir, f"{base:020d}.log"), "wb") as handle:
            handle.write(log)
        with open(os.path.join(partition_dir, f"{base:020d}.index"), "wb") as handle:
            handle.write(index)


CODECS = list(CompressionType)


def _partition_batches(
    cluster: Cluster, topic: str, partition: int, batch_count: int, transactional: bool
) -> list[tuple[int, int, bytes]]:
    batches: list[tuple[int, int, bytes]] = []
    offset = 0
    for index in range(batch_count):
        codec = CODECS[index % len(CODECS)]
        records = []
        for i in range(RECORDS_PER_BATCH):
            o = offset + i
            key = None if o % 7 == 3 else f"{topic}-{partition}-key-{o:05d}".encode()
            value = f"{topic}-{partition}-value-{o:05d}".encode() * (1 + o % 3)
            headers = (
                (RecordHeader("trace", f"t{o}".encode()), RecordHeader("empty", None))
                if o % 2 == 0
                else ()
            )
            timestamp = BASE_TIMESTAMP_MS + o * 10
            records.append(NewRecord(value, key=key, headers=headers, timestamp=timestamp))
            cluster.messages.append(
                Message(
                    topic,
                    partition,
                    o,
                    key,
                    value,
                    tuple((h.key, h.value) for h in headers),
                    timestamp,
                    codec.name.lower(),
                )
            )
        data = build_batch(
            records,
            base_offset=offset,
            compression=codec,
            producer_id=1000 + partition,
            producer_epoch=0,
            base_sequence=offset,
            partition_leader_epoch=3,
            is_transactional=transactional,
        )
        batches.append((offset, offset + RECORDS_PER_BATCH - 1, data))
        offset += RECORDS_PER_BATCH
    return batches


def _offsets_batches() -> list[tuple[int, int, bytes]]:
    commits: list[OffsetsTopicRecord] = [
        OffsetCommitRecord(
            "billing", "orders", 0, OffsetCommitValue(10, 2, "m", BASE_TIMESTAMP_MS)
        ),
        OffsetCommitRecord(
            "billing", "orders", 0, OffsetCommitValue(20, 3, "", BASE_TIMESTAMP_MS + 1)
        ),
        OffsetCommitRecord(
            "billing", "orders", 1, OffsetCommitValue(5, 3, "", BASE_TIMESTAMP_MS + 2)
        ),
        GroupMetadataRecord(
            "billing",
            GroupMetadataValue(
                "consumer",
                4,
                "range",
                "member-1",
                BASE_TIMESTAMP_MS,
                (
                    MemberMetadata(
                        "member-1", None, "client-1", "/127.0.0.1", 300000, 45000, b"s", b"a"
                    ),
                ),
            ),
        ),
    ]
    records = [
        NewRecord(value, key=key, timestamp=BASE_TIMESTAMP_MS + i)
        for i, (key, value) in enumerate(encode_record(r) for r in commits)
    ]
    data = build_batch(records, base_offset=0)
    return [(0, len(records) - 1, data)]


def write_cluster(root: str, *, orders_batches: int = 6) -> Cluster:
    """The three-broker cluster described in the module docstring."""
    cluster = Cluster(root)
    for broker in (1, 2, 3):
        path = os.path.join(root, f"b{broker}")
        os.makedirs(path, exist_ok=True)
        write_properties(path, broker)
        cluster.log_dirs[broker] = path
    layout = {
        ("orders", 0): ((1, 2, 3), orders_batches, False, RECORDS_PER_BATCH * 3),
        ("orders", 1): ((2, 3, 1), 3, False, None),
        ("events", 0): ((1, 2), 2, True, None),
    }
    checkpoints: dict[int, dict[tuple[str, int], int]] = {1: {}, 2: {}, 3: {}}
    for (topic, partition), (replicas, count, transactional, roll_at) in layout.items():
        batches = _partition_batches(cluster, topic, partition, count, transactional)
        cluster.replicas[(topic, partition)] = replicas
        cluster.high_watermarks[(topic, partition)] = batches[-1][1] + 1
        for broker in replicas:
            write_segments(
                os.path.join(cluster.log_dirs[broker], f"{topic}-{partition}"), batches, roll_at
            )
            checkpoints[broker][(topic, partition)] = batches[-1][1] + 1
    offsets = _offsets_batches()
    for broker in (1, 2):
        write_segments(
            os.path.join(cluster.log_dirs[broker], "__consumer_offsets-0"), offsets, None
        )
        checkpoints[broker][("__consumer_offsets", 0)] = offsets[-1][1] + 1
    cluster.replicas[("__consumer_offsets", 0)] = (1, 2)
    cluster.high_watermarks[("__consumer_offsets", 0)] = offsets[-1][1] + 1
    for broker, entries in checkpoints.items():
        write_checkpoint(cluster.log_dirs[broker], entries)
    return cluster


def flip_byte(path: str, needle: bytes, delta: int = 0) -> int:
    """Flip one bit in the first occurrence of `needle` in the file; return its position."""
    with open(path, "r+b") as handle:
        data = handle.read()
        position = data.index(needle) + delta
        handle.seek(position)
        handle.write(bytes([data[position] ^ 0x01]))
    return position
