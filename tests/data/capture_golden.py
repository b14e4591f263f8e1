"""Capture golden record batches from real Kafka clients (run once; the outputs are committed).

A tiny fake Kafka broker (raw sockets, kio for the message bodies) answers ApiVersions,
Metadata, InitProducerId and Produce, and keeps the record bytes of every Produce
partition exactly as the client sent them. Then confluent-kafka (librdkafka), kafka-python
and kafkajs (from tests/js/node_modules; none and gzip) produce a fixed set of messages
(keys, null keys, tombstones, headers, explicit timestamps, one 40 KB value) in every codec
they can use, and the script writes:

    tests/data/golden/<client>-<codec>[-idempotent].bin   the Produce records bytes
    tests/data/golden/manifest.json                         what was sent, per file

Usage: .venv/bin/python tests/data/capture_golden.py

kafka-python needs python-snappy for snappy (`kafka.codec.has_snappy()`); without it that
capture is skipped and the manifest says so. The tests (tests/log/test_golden.py) decode the
files with no network.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import io
import json
import socket
import struct
import sys
import threading
import uuid
import warnings
from pathlib import Path
from typing import Any

import kio.index
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

GOLDEN_DIR = Path(__file__).parent / "golden"
BASE_TIMESTAMP_MS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# What we advertise, per broker profile. librdkafka picks its message format from these
# (REFERENCE.md §4): magic 2 needs Produce >= 3 and Fetch >= 4, magic 1 Produce >= 2 and
# Fetch >= 2, otherwise magic 0. Fetch is advertised only for that choice, never served.
# librdkafka only uses LZ4 when FindCoordinator (10) is advertised (its "0.9 broker" probe).
PROFILES = {
    "v2": {18: (0, 3), 3: (0, 12), 22: (0, 4), 0: (3, 9), 1: (4, 12), 10: (0, 4)},
    "magic1": {18: (0, 3), 3: (0, 12), 0: (0, 2), 1: (0, 3), 10: (0, 2)},
    "magic0": {18: (0, 3), 3: (0, 12), 0: (0, 1), 1: (0, 1), 10: (0, 0)},
}


def messages() -> list[dict[str, Any]]:
    """The messages every capture sends (bytes as latin-1 safe base64 in the manifest)."""
    result: list[dict[str, Any]] = [
        {"key": b"key-0", "value": b"value-0", "headers": [], "timestamp": BASE_TIMESTAMP_MS},
        {"key": None, "value": b"no key", "headers": [], "timestamp": BASE_TIMESTAMP_MS + 1},
        {"key": b"tombstone", "value": None, "headers": [], "timestamp": BASE_TIMESTAMP_MS + 2},
        {"key": b"", "value": b"", "headers": [], "timestamp": BASE_TIMESTAMP_MS + 3},
        {
            "key": b"with-headers",
            "value": b"h",
            "headers": [("trace-id", b"abc123"), ("\u00e9t\u00e9", b"\x00\xff")],
            "timestamp": BASE_TIMESTAMP_MS - 5000,
        },
        {
            "key": b"big",
            "value": (b"compressible kafka payload " * 1600)[:40_000],
            "headers": [],
            "timestamp": BASE_TIMESTAMP_MS + 4,
        },
    ]
    for index in range(6, 20):
        result.append(
            {
                "key": b"key-%d" % index,
                "value": b"value-%d " % index * index,
                "headers": [("n", b"%d" % index)],
                "timestamp": BASE_TIMESTAMP_MS + index,
            }
        )
    return result


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def manifest_messages() -> list[dict[str, Any]]:
    return [
        {
            "key": _b64(m["key"]),
            "value": _b64(m["value"]),
            "headers": [[k, _b64(v)] for k, v in m["headers"]],
            "timestamp": m["timestamp"],
        }
        for m in messages()
    ]


# ---------------------------------------------------------------------- fake broker


def _make(cls: type[Any], **values: Any) -> Any:
    """An instance of a kio class of any version: keep only the fields this version has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _nested(cls: type[Any], name: str) -> type[Any]:
    return getattr(sys.modules[cls.__module__], name)  # type: ignore[no-any-return]


class FakeBroker:
    def __init__(self, api_versions: dict[int, tuple[int, int]]) -> None:
        self.api_versions = api_versions
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.captured: list[tuple[str, int, int, bytes]] = []  # topic, partition, version, bytes
        self.next_offset: dict[tuple[str, int], int] = {}
        self.next_producer_id = 1000
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            while True:
                size_bytes = _recv_exactly(connection, 4)
                if size_bytes is None:
                    return
                frame = _recv_exactly(connection, struct.unpack(">i", size_bytes)[0])
                if frame is None:
                    return
                response = self._handle(frame)
                if response is not None:
                    connection.sendall(struct.pack(">i", len(response)) + response)

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, api_version = struct.unpack_from(">hh", frame)
        supported = self.api_versions.get(api_key)
        if api_key == 18 and (supported is None or api_version > supported[1]):
            # Kafka answers an ApiVersions version it does not know in v0 form (KIP-511).
            request_class = kio.index.load_request_schema(18, 0)
            header, _ = entity_reader(request_class.__header_schema__)(frame, 0)
            return self._encode(header.correlation_id, 18, 0, self._api_versions(0, True))
        if supported is None or not supported[0] <= api_version <= supported[1]:
            print(f"fake broker: unsupported api {api_key} v{api_version}", file=sys.stderr)
            return b""  # the client will fail loudly
        if api_key == 0 and api_version < 3:
            return self._produce_legacy(api_version, frame)
        request_class = kio.index.load_request_schema(api_key, api_version)
        header, offset = entity_reader(request_class.__header_schema__)(frame, 0)
        request, _ = entity_reader(request_class)(frame, offset)
        if api_key == 18:
            body = self._api_versions(api_version, False)
        elif api_key == 3:
            body = self._metadata(api_version, request)
        elif api_key == 22:
            body = self._init_producer_id(api_version)
        else:
            body = self._produce(api_version, request)
            if request.acks == 0:
                return None
        return self._encode(header.correlation_id, api_key, api_version, body)

    def _encode(self, correlation_id: int, api_key: int, api_version: int, body: Any) -> bytes:
        response_class = type(body)
        flexible = response_class.__flexible__ and api_key != 18  # ApiVersions: header v0
        header_class = ResponseHeaderV1 if flexible else ResponseHeaderV0
        out = io.BytesIO()
        entity_writer(header_class)(out, header_class(correlation_id=correlation_id))
        entity_writer(response_class)(out, body)
        return out.getvalue()

    def _api_versions(self, version: int, unsupported: bool) -> Any:
        cls = kio.index.load_response_schema(18, version)
        keys = tuple(
            _make(_nested(cls, "ApiVersion"), api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.api_versions.items())
        )
        return _make(
            cls,
            error_code=ErrorCode.unsupported_version if unsupported else ErrorCode.none,
            api_keys=keys,
            throttle_time=datetime.timedelta(0),
        )

    def _metadata(self, version: int, request: Any) -> Any:
        cls = kio.index.load_response_schema(3, version)
        names = [t.name for t in request.topics] if request.topics else []
        partition_class = _nested(cls, "MetadataResponsePartition")
        topics = tuple(
            _make(
                _nested(cls, "MetadataResponseTopic"),
                error_code=ErrorCode.none,
                name=name,
                topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
                is_internal=False,
                partitions=(
                    _make(
                        partition_class,
                        error_code=ErrorCode.none,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                        offline_replicas=(),
                    ),
                ),
            )
            for name in names
        )
        broker = _make(
            _nested(cls, "MetadataResponseBroker"), node_id=1, host="127.0.0.1", port=self.port
        )
        return _make(
            cls,
            throttle_time=datetime.timedelta(0),
            brokers=(broker,),
            cluster_id="golden-capture",
            controller_id=1,
            topics=topics,
        )

    def _init_producer_id(self, version: int) -> Any:
        with self.lock:
            producer_id = self.next_producer_id
            self.next_producer_id += 1
        return _make(
            kio.index.load_response_schema(22, version),
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            producer_id=producer_id,
            producer_epoch=0,
        )

    def _produce(self, version: int, request: Any) -> Any:
        cls = kio.index.load_response_schema(0, version)
        topic_responses = []
        for topic in request.topic_data:
            partitions = []
            for partition in topic.partition_data:
                records = bytes(partition.records or b"")
                key = (topic.name, partition.index)
                with self.lock:
                    self.captured.append((topic.name, partition.index, version, records))
                    base_offset = self.next_offset.get(key, 0)
                    self.next_offset[key] = base_offset + _count_offsets(records)
                partitions.append(
                    _make(
                        _nested(cls, "PartitionProduceResponse"),
                        index=partition.index,
                        error_code=ErrorCode.none,
                        base_offset=base_offset,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    )
                )
            topic_responses.append(
                _make(
                    _nested(cls, "TopicProduceResponse"),
                    name=topic.name,
                    partition_responses=tuple(partitions),
                )
            )
        return _make(cls, responses=tuple(topic_responses), throttle_time=datetime.timedelta(0))

    def _produce_legacy(self, version: int, frame: bytes) -> bytes | None:
        """Produce v0-2 (kio starts at v3), by hand: header v1, then
        acks int16, timeout int32, [topic string, [partition int32, records bytes]]."""
        (correlation_id, client_id_length) = struct.unpack_from(">ih", frame, 4)
        pos = 10 + max(client_id_length, 0)
        acks, _timeout, topic_count = struct.unpack_from(">hii", frame, pos)
        pos += 10
        out = [struct.pack(">ii", correlation_id, topic_count)]
        for _ in range(topic_count):
            (name_length,) = struct.unpack_from(">h", frame, pos)
            name = frame[pos + 2 : pos + 2 + name_length].decode()
            pos += 2 + name_length
            (partition_count,) = struct.unpack_from(">i", frame, pos)
            pos += 4
            out.append(struct.pack(">h", name_length) + name.encode())
            out.append(struct.pack(">i", partition_count))
            for _ in range(partition_count):
                partition, size = struct.unpack_from(">ii", frame, pos)
                records = frame[pos + 8 : pos + 8 + size]
                pos += 8 + size
                with self.lock:
                    self.captured.append((name, partition, version, records))
                    base_offset = self.next_offset.get((name, partition), 0)
                    self.next_offset[(name, partition)] = base_offset + _count_offsets(records)
                out.append(struct.pack(">ihq", partition, 0, base_offset))
                if version >= 2:
                    out.append(struct.pack(">q", -1))  # log_append_time
        if version >= 1:
            out.append(struct.pack(">i", 0))  # throttle_time_ms
        return None if acks == 0 else b"".join(out)


def _count_offsets(records: bytes) -> int:
    """Offsets used by the batches (v2: lastOffsetDelta + 1) or messages (v0/v1: one per
    shallow message; a compressed wrapper is counted once, enough for a fake broker)."""
    count, pos = 0, 0
    while pos + 17 <= len(records):
        length = struct.unpack_from(">i", records, pos + 8)[0]
        if records[pos + 16] == 2:
            count += struct.unpack_from(">i", records, pos + 23)[0] + 1
        else:
            count += 1
        pos += length + 12
    return count


def _recv_exactly(connection: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = connection.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------- clients


def produce_confluent(port: int, topic: str, codec: str, idempotent: bool, profile: str) -> str:
    """librdkafka with acks=all and a 200 ms linger (all messages in one batch per codec)."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "compression.type": codec,
            "linger.ms": 200,
            "enable.idempotence": idempotent,
            "acks": "all",
        }
    )
    for message in messages():
        producer.produce(
            topic,
            value=message["value"],
            key=message["key"],
            headers=list(message["headers"]),
            timestamp=message["timestamp"],
        )
    remaining = producer.flush(30)
    assert remaining == 0, f"confluent-kafka left {remaining} messages unsent"
    library = confluent_kafka.libversion()[0]
    return f"confluent-kafka {confluent_kafka.version()[0]} / librdkafka {library}"


def produce_kafka_python(port: int, topic: str, codec: str, idempotent: bool, profile: str) -> str:
    """kafka-python; for the magic 1 profile its broker version is pinned to 0.10.1, since
    it infers "new broker" from Metadata v12 and would write magic 2 into Produce v2."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kafka

    extra: dict[str, Any] = {"api_version": (0, 10, 1)} if profile == "magic1" else {}
    producer = kafka.KafkaProducer(
        **extra,
        bootstrap_servers=f"127.0.0.1:{port}",
        compression_type=None if codec == "none" else codec,
        linger_ms=200,
        batch_size=1 << 20,
        enable_idempotence=idempotent,
        acks="all",
    )
    for message in messages():
        producer.send(
            topic,
            value=message["value"],
            key=message["key"],
            headers=list(message["headers"]) if profile == "v2" else None,  # v0/v1: none
            timestamp_ms=message["timestamp"],
        )
    producer.flush(30)
    producer.close(5)
    return f"kafka-python {kafka.__version__}"


KAFKAJS_SCRIPT = r"""
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const fs = require('fs');
const spec = JSON.parse(fs.readFileSync(process.env.GOLDEN_SPEC, 'utf8'));
const bytes = (text) => (text === null ? null : Buffer.from(text, 'base64'));
(async () => {
  const kafka = new Kafka({
    clientId: 'golden', brokers: [`127.0.0.1:${spec.port}`], logLevel: logLevel.NOTHING,
  });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic: spec.topic,
    compression: spec.codec === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
    messages: spec.messages.map((m) => ({
      key: bytes(m.key),
      value: bytes(m.value),
      headers: Object.fromEntries(m.headers.map(([k, v]) => [k, bytes(v)])),
      timestamp: String(m.timestamp),
    })),
  });
  await producer.disconnect();
  console.log(require('kafkajs/package.json').version);
})().catch((error) => { console.error(error); process.exit(1); });
"""
JS_DIR = Path(__file__).parent.parent / "js"


def produce_kafkajs(port: int, topic: str, codec: str, idempotent: bool, profile: str) -> str:
    """kafkajs 2.x (tests/js/node_modules): gzip is its only built-in codec; one send()."""
    import os
    import subprocess
    import tempfile

    assert not idempotent and profile == "v2"
    spec = {"port": port, "topic": topic, "codec": codec, "messages": manifest_messages()}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(spec, handle)
    try:
        result = subprocess.run(
            ["node", "-e", KAFKAJS_SCRIPT],
            cwd=JS_DIR,
            env={**os.environ, "GOLDEN_SPEC": handle.name},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        os.unlink(handle.name)
    return f"kafkajs {result.stdout.strip()}"


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kafka.codec

    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    brokers = {name: FakeBroker(versions) for name, versions in PROFILES.items()}
    captures: list[dict[str, Any]] = []
    skipped: list[str] = []
    runs = [("confluent-kafka", codec, False, "v2") for codec in CODECS]
    runs.append(("confluent-kafka", "lz4", True, "v2"))
    runs.append(("confluent-kafka", "zstd", True, "v2"))
    for profile in ("magic1", "magic0"):
        runs += [("confluent-kafka", codec, False, profile) for codec in CODECS[:4]]
    available = {
        "none": True,
        "gzip": kafka.codec.has_gzip(),
        "snappy": kafka.codec.has_snappy(),
        "lz4": kafka.codec.has_lz4(),
        "zstd": kafka.codec.has_zstd(),
    }
    for codec in CODECS:
        if available[codec]:
            runs.append(("kafka-python", codec, True, "v2"))  # its default: idempotent
        else:
            skipped.append(f"kafka-python {codec}: codec library not installed")
    runs.append(("kafka-python", "gzip", False, "v2"))
    runs.append(("kafka-python", "gzip", False, "magic1"))
    runs += [("kafkajs", codec, False, "v2") for codec in ("none", "gzip")]
    try:
        for client, codec, idempotent, profile in runs:
            name = f"{client}-{codec}" + ("-idempotent" if idempotent else "")
            if profile != "v2":
                name = f"{client}-{profile}-{codec}"
            topic = f"golden-{name}"
            broker = brokers[profile]
            before = len(broker.captured)
            produce = {
                "confluent-kafka": produce_confluent,
                "kafka-python": produce_kafka_python,
                "kafkajs": produce_kafkajs,
            }[client]
            version = produce(broker.port, topic, codec, idempotent, profile)
            parts = [c for c in broker.captured[before:] if c[0] == topic and c[3]]
            data = b"".join(c[3] for c in parts)
            (GOLDEN_DIR / f"{name}.bin").write_bytes(data)
            captures.append(
                {
                    "file": f"{name}.bin",
                    "client": client,
                    "client_version": version,
                    "codec": codec,
                    "idempotent": idempotent,
                    "broker_profile": profile,
                    "produce_versions": sorted({c[2] for c in parts}),
                    "produce_requests": len(parts),
                    "bytes": len(data),
                }
            )
            print(f"captured {name}: {len(data)} bytes in {len(parts)} request(s)")
    finally:
        for broker in brokers.values():
            broker.close()
    manifest = {
        "description": "Produce request record bytes captured from real clients by "
        "tests/data/capture_golden.py; bytes are base64, timestamps in ms.",
        "profiles": {name: {str(k): v for k, v in p.items()} for name, p in PROFILES.items()},
        "messages": manifest_messages(),
        "captures": captures,
        "skipped": skipped,
    }
    (GOLDEN_DIR / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
