"""kcat (Debian's kcat 1.7.1 on librdkafka 2.0.2) against one real knode.

librdkafka 2.0.2 is old: it opens with ApiVersions v3 but cannot skip non-empty tagged
fields (REFERENCE.md fact 7, fixed in librdkafka 2.2.0), uses Metadata v4, Produce v7,
Fetch v11, ListOffsets v2. So this is the "old C client" path: metadata listing, keyed
produce with headers in every codec kcat ships, consume with exact content and offsets,
offsets past the end, offsets for timestamps (`-Q`, `-o s@`/`e@`) and the balanced consumer
(`-G`, committed offsets).

kcat must be installed (`apt-get install kcat`; `.ci/run` installs it): without it these
tests fail, they do not skip.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KCAT_TIMEOUT_S = 60.0
# kcat's -z values and the codec id they put in bits 0-2 of a batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TIMESTAMP_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed: apt-get install kcat")
    return path


def _run(
    kcat: str, cluster: KnodeCluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kcat, "-b", cluster.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )


def _ok(kcat: str, cluster: KnodeCluster, *args: str, stdin: str | None = None) -> str:
    result = _run(kcat, cluster, *args, stdin=stdin)
    assert result.returncode == 0, (args, result.returncode, result.stderr)
    return result.stdout


def _create(cluster: KnodeCluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(timeout=15)


def _batch_codecs(partition_dir: Path) -> list[tuple[int, int]]:
    """(codec id, record count) of every batch in the partition's segment files, read with
    the on-disk layout (REFERENCE.md §2.3: baseOffset int64, batchLength int32, leader epoch
    int32, magic int8, crc uint32, attributes int16 @21, ..., recordsCount int32 @57)."""
    batches = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            (batch_length,) = struct.unpack_from(">i", data, position + 8)
            assert data[position + 16] == 2, "magic"
            (attributes,) = struct.unpack_from(">h", data, position + 21)
            (records,) = struct.unpack_from(">i", data, position + 57)
            batches.append((attributes & 0x07, records))
            position += 12 + batch_length
    return batches


def test_metadata_listing(kcat: str, knode: KnodeCluster) -> None:
    _create(knode, "kcat-meta", 3)
    text = _ok(kcat, knode, "-L")
    assert " 1 brokers:\n" in text
    assert f"  broker 1 at {knode.address(1)} (controller)\n" in text
    assert '  topic "kcat-meta" with 3 partitions:\n' in text
    for partition in range(3):
        assert f"    partition {partition}, leader 1, replicas: 1, isrs: 1\n" in text

    listing = json.loads(_ok(kcat, knode, "-L", "-J", "-t", "kcat-meta"))
    assert listing["controllerid"] == 1
    assert listing["brokers"] == [{"id": 1, "name": knode.address(1)}]
    (topic,) = listing["topics"]
    assert topic["topic"] == "kcat-meta"
    assert "error" not in topic
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == 1
        assert p["replicas"] == [{"id": 1}] and p["isrs"] == [{"id": 1}]


def _lines(codec: str, count: int, first: int = 0) -> list[tuple[str, str]]:
    """(key, value) pairs; values are compressible and some contain the key delimiter."""
    return [
        (f"key-{i % 7}", f"{codec}-value-{i}:" + "abc" * (i % 40))
        for i in range(first, first + count)
    ]


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_produce_and_consume_every_codec(kcat: str, knode: KnodeCluster, codec: str) -> None:
    topic = f"kcat-{codec}"  # created by the first produce (auto.create.topics.enable)
    first = _lines(codec, 300)
    second = _lines(codec, 200, first=300)
    started_ms = int(time.time() * 1000)
    for lines, run in ((first, "1"), (second, "2")):
        stdin = "".join(f"{key}:{value}\n" for key, value in lines)
        _ok(
            kcat,
            knode,
            "-P",
            "-t",
            topic,
            "-K:",
            "-H",
            "k=v",
            "-H",
            f"run={run}",
            "-z",
            codec,
            stdin=stdin,
        )
    finished_ms = int(time.time() * 1000)

    result = _run(
        kcat, knode, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%k:%s:%h:%o:%p:%T\n"
    )
    assert result.returncode == 0, result.stderr
    expected = [
        f"{key}:{value}:k=v,run={run}:{offset}:0"
        for offset, ((key, value), run) in enumerate(
            [(line, "1") for line in first] + [(line, "2") for line in second]
        )
    ]
    received = result.stdout.splitlines()
    assert [line.rsplit(":", 1)[0] for line in received] == expected
    for line in received:
        assert started_ms - 1000 <= int(line.rsplit(":", 1)[1]) <= finished_ms + 1000
    assert f"Reached end of topic {topic} [0] at offset 500" in result.stderr

    # The broker stores the batches as they arrived. librdkafka sends a batch uncompressed
    # when compressing does not make it smaller, so small tail batches may be codec 0.
    batches = _batch_codecs(knode.nodes[1].data_dir / f"{topic}-0")
    assert sum(records for _, records in batches) == 500
    assert {codec_id for codec_id, _ in batches} <= {0, CODEC_IDS[codec]}
    assert any(codec_id == CODEC_IDS[codec] for codec_id, _ in batches)


def test_null_values_and_keyed_partitioning(kcat: str, knode: KnodeCluster) -> None:
    topic = "kcat-keyed"
    _create(knode, topic, 3)
    keys = [f"user-{i % 10}" for i in range(300)]
    stdin = "".join(f"{key}:{'' if i % 50 == 0 else f'v{i}'}\n" for i, key in enumerate(keys))
    _ok(kcat, knode, "-P", "-t", topic, "-K:", "-Z", stdin=stdin)

    text = _ok(kcat, knode, "-C", "-t", topic, "-e", "-Z", "-f", "%p|%o|%k|%s|%S\n")
    rows = [line.split("|") for line in text.splitlines()]
    assert len(rows) == 300
    partition_of_key: dict[str, str] = {}
    offsets: dict[str, list[int]] = {}
    values = set()
    for partition, offset, key, value, size in rows:
        assert partition_of_key.setdefault(key, partition) == partition, key
        offsets.setdefault(partition, []).append(int(offset))
        if value == "NULL":
            assert size == "-1"
        else:
            assert size == str(len(value))
        values.add(value)
    for partition_offsets in offsets.values():
        assert partition_offsets == list(range(len(partition_offsets)))
    assert values == {"NULL"} | {f"v{i}" for i in range(300) if i % 50}


def test_consume_from_offsets_past_and_near_the_end(kcat: str, knode: KnodeCluster) -> None:
    topic = "kcat-offsets"
    _create(knode, topic, 1)
    _ok(kcat, knode, "-P", "-t", topic, stdin="".join(f"m{i}\n" for i in range(10)))
    fmt = "%o:%s\n"

    # Past the end: OFFSET_OUT_OF_RANGE, reset to the end (librdkafka's default), EOF at 10.
    result = _run(kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "25", "-e", "-f", fmt)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "Offset out of range" in result.stderr
    assert f"Reached end of topic {topic} [0] at offset 10" in result.stderr

    # The same with auto.offset.reset=error: kcat reports the error and fails.
    result = _run(
        kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "25", "-e", "-f", fmt,
        "-X", "topic.auto.offset.reset=error",
    )  # fmt: skip
    assert result.returncode != 0
    assert "Offset out of range" in result.stderr

    # Exactly at the high watermark: nothing, EOF at 10, no error.
    result = _run(kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "10", "-e", "-f", fmt)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "Offset out of range" not in result.stderr
    assert f"Reached end of topic {topic} [0] at offset 10" in result.stderr

    # Relative to the end and absolute inside the log.
    assert _ok(kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "-3", "-e", "-f", fmt) == (
        "7:m7\n8:m8\n9:m9\n"
    )
    assert _ok(kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "8", "-e", "-f", fmt) == (
        "8:m8\n9:m9\n"
    )
    assert _ok(kcat, knode, "-C", "-t", topic, "-p", "0", "-o", "end", "-e", "-f", fmt) == ""


def test_offsets_for_timestamps(kcat: str, knode: KnodeCluster) -> None:
    topic = "kcat-times"
    _create(knode, topic, 1)
    producer = Producer({"bootstrap.servers": knode.bootstrap_servers, "linger.ms": 0})
    for i in range(20):  # one batch per message: the timestamp index sees each of them
        producer.produce(topic, value=f"t{i}".encode(), timestamp=BASE_TIMESTAMP_MS + 10 * i)
        producer.flush(10)
    assert producer.flush(10) == 0

    def query(timestamp: int) -> str:
        return _ok(kcat, knode, "-Q", "-t", f"{topic}:0:{timestamp}")

    assert query(BASE_TIMESTAMP_MS) == f"{topic} [0] offset 0\n"
    assert query(1) == f"{topic} [0] offset 0\n"
    assert query(BASE_TIMESTAMP_MS + 15) == f"{topic} [0] offset 2\n"
    assert query(BASE_TIMESTAMP_MS + 190) == f"{topic} [0] offset 19\n"
    assert query(BASE_TIMESTAMP_MS + 191) == f"{topic} [0] offset -1\n"  # none that late
    assert query(-1) == f"{topic} [0] offset 20\n"  # latest
    assert query(-2) == f"{topic} [0] offset 0\n"  # earliest

    # Consume between two timestamps: start at the first >= s@, stop before e@.
    start, stop = BASE_TIMESTAMP_MS + 55, BASE_TIMESTAMP_MS + 100
    text = _ok(
        kcat, knode, "-C", "-t", topic, "-o", f"s@{start}", "-o", f"e@{stop}", "-f", "%o:%s:%T\n"
    )
    assert text.splitlines() == [f"{i}:t{i}:{BASE_TIMESTAMP_MS + 10 * i}" for i in range(6, 10)]

    result = _run(kcat, knode, "-Q", "-t", "kcat-no-such-topic:0:1")
    assert result.returncode != 0
    assert "Unknown partition" in result.stderr


def test_balanced_consumer_commits(kcat: str, knode: KnodeCluster) -> None:
    topic = "kcat-group"
    _create(knode, topic, 2)
    _ok(kcat, knode, "-P", "-t", topic, "-K:", stdin="".join(f"k{i}:g{i}\n" for i in range(40)))

    def consume() -> list[str]:
        text = _ok(
            kcat, knode, "-G", "kcat-g", "-X", "auto.offset.reset=earliest", "-e",
            "-f", "%p:%o:%s\n", topic,
        )  # fmt: skip
        return text.splitlines()

    # A new group starts at the beginning (auto.offset.reset), commits on close ...
    first = consume()
    assert sorted(line.split(":")[2] for line in first) == sorted(f"g{i}" for i in range(40))
    # ... so the next member of the group resumes from the committed offsets.
    assert consume() == []
    _ok(kcat, knode, "-P", "-t", topic, "-K:", stdin="k1:late\n")
    (line,) = consume()
    assert line.endswith(":late")
