"""Drive hostile frames at live nodes while probing their liveness (issue 12, item 8).

* `fuzz(addresses, generator, ...)`: sends generated frames round-robin over a few
  connections to the nodes' Kafka listeners, drains whatever comes back without parsing
  it, reconnects whenever a node closes a connection (the expected answer to bad input),
  and counts frames per API and kind.
* `HeartbeatProbe`: one thread per node sending ApiVersions every 200 ms on its own
  connection; records the slowest answer and every probe over the stall bound (1 s) or
  failed, so "no node stalled over 1 s" is checked, not assumed.
* `NumberedProducer`: a real client (confluent-kafka, acks=all, idempotent) producing
  numbered messages the whole time; `read_all` reads them back to check nothing acked is
  lost.
"""

from __future__ import annotations

import collections
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from trafka.net import codec, headers

STALL_S = 1.0
PROBE_INTERVAL_S = 0.2


@dataclass
class FuzzReport:
    frames: int = 0
    bytes_sent: int = 0
    closed_by_server: int = 0
    send_timeouts: int = 0
    by_label: collections.Counter[str] = field(default_factory=collections.Counter)
    apis: set[tuple[int, int]] = field(default_factory=set)

    def summary(self) -> str:
        kinds = collections.Counter()
        for label, count in self.by_label.items():
            kinds[label.split()[0]] += count
        return (
            f"{self.frames} frames ({dict(kinds)}), {self.bytes_sent // 1024} KiB, "
            f"{len(self.apis)} (api, version) pairs, {self.closed_by_server} connections "
            f"closed by the nodes, {self.send_timeouts} send timeouts"
        )


def _connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=5)
    sock.settimeout(2)
    return sock


def _drain(sock: socket.socket) -> bool:
    """Read what is there without waiting; False once the peer closed."""
    sock.setblocking(False)
    try:
        while True:
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
    finally:
        sock.settimeout(2)


def fuzz(
    addresses: Sequence[tuple[str, int]],
    frames: Iterable[tuple[str, bytes]],
    *,
    max_frames: int | None = None,
    duration_s: float | None = None,
    connections: int = 6,
    seed: int = 0,
    stop: threading.Event | None = None,
    progress_every: int | None = None,
) -> FuzzReport:
    """`progress_every`: print a line (frames, elapsed, kinds) to stderr every that many
    frames, so a long run that must be stopped still leaves its count."""
    rng = random.Random(seed)
    started = time.monotonic()
    report = FuzzReport()
    sockets: list[socket.socket | None] = [None] * connections
    deadline = None if duration_s is None else time.monotonic() + duration_s
    iterator: Iterator[tuple[str, bytes]] = iter(frames)
    try:
        while max_frames is None or report.frames < max_frames:
            if deadline is not None and time.monotonic() >= deadline:
                break
            if stop is not None and stop.is_set():
                break
            label, frame = next(iterator)
            slot = report.frames % connections
            sock = sockets[slot]
            if sock is None:
                try:
                    sock = sockets[slot] = _connect(rng.choice(addresses))
                except OSError:
                    time.sleep(0.05)
                    continue
            report.frames += 1
            report.by_label[label] += 1
            if progress_every and report.frames % progress_every == 0:
                print(
                    f"[fuzz] {report.frames} frames, {time.monotonic() - started:.0f} s, "
                    f"{len(report.apis)} (api, version) pairs, "
                    f"{report.closed_by_server} closed by the nodes",
                    file=sys.stderr,
                    flush=True,
                )
            parts = label.split()
            if len(parts) == 3:
                report.apis.add((int(parts[1]), int(parts[2][1:])))
            try:
                sock.sendall(frame)
                report.bytes_sent += len(frame)
                alive = _drain(sock)
            except TimeoutError:
                report.send_timeouts += 1
                alive = False
            except OSError:
                alive = False
            if not alive:
                report.closed_by_server += 1
                sock.close()
                sockets[slot] = None
    finally:
        for sock in sockets:
            if sock is not None:
                sock.close()
    return report


def _api_versions_frame(correlation_id: int) -> bytes:
    header = headers.encode_request_header(18, 0, correlation_id, "probe", 1)
    return struct.pack(">i", len(header)) + header


class HeartbeatProbe:
    """ApiVersions v0 to every node every 200 ms; slow or failed answers are recorded."""

    def __init__(self, addresses: Sequence[tuple[str, int]], stall_s: float = STALL_S) -> None:
        self.addresses = list(addresses)
        self.stall_s = stall_s
        self.slowest_s: dict[tuple[str, int], float] = {a: 0.0 for a in self.addresses}
        self.stalls: list[tuple[float, tuple[str, int], str]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._probe, args=(address,), daemon=True)
            for address in self.addresses
        ]

    def __enter__(self) -> HeartbeatProbe:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    def _probe(self, address: tuple[str, int]) -> None:
        sock: socket.socket | None = None
        correlation_id = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if sock is None:
                    sock = socket.create_connection(address, timeout=self.stall_s * 5)
                    sock.settimeout(self.stall_s * 5)
                correlation_id += 1
                sock.sendall(_api_versions_frame(correlation_id))
                size = struct.unpack(">i", _read(sock, 4))[0]
                _read(sock, size)
                elapsed = time.monotonic() - started
            except OSError as error:
                self.stalls.append((time.time(), address, f"probe failed: {error!r}"))
                if sock is not None:
                    sock.close()
                sock = None
                self._stop.wait(PROBE_INTERVAL_S)
                continue
            self.slowest_s[address] = max(self.slowest_s[address], elapsed)
            if elapsed > self.stall_s:
                self.stalls.append((time.time(), address, f"answered after {elapsed:.2f}s"))
            self._stop.wait(PROBE_INTERVAL_S)
        if sock is not None:
            sock.close()


def _read(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


class NumberedProducer:
    """A confluent-kafka producer (acks=all, idempotent) sending numbers until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.acked: set[int] = set()
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NumberedProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        from confluent_kafka import KafkaError, KafkaException, Message, Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                self.acked.add(int(message.value()))  # type: ignore[arg-type]
            else:
                self.failed.append(str(error))

        number = 0
        while not self._stop.is_set():
            try:
                producer.produce(
                    self.topic,
                    str(number).encode(),
                    partition=number % self.partitions,
                    on_delivery=delivered,
                )
                number += 1
            except BufferError:
                pass
            except KafkaException as error:  # e.g. metadata not there yet: record, go on
                self.failed.append(str(error))
                time.sleep(0.1)
            producer.poll(0.005)
        self.sent = number
        producer.flush(60)


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> set[int]:
    """Every number in `topic`, read from the start to the end of each partition."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "fuzz-check", "enable.auto.commit": False}
    )
    try:
        ends = {}
        for p in range(partitions):  # leadership may still be settling: retry
            give_up = time.monotonic() + timeout_s
            while True:
                try:
                    ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[
                        1
                    ]
                    break
                except KafkaException:
                    if time.monotonic() > give_up:
                        raise
                    time.sleep(1)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: set[int] = set()
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            seen.add(int(message.value()))  # type: ignore[arg-type]
            positions[message.partition() or 0] = (message.offset() or 0) + 1
        return seen
    finally:
        consumer.close()


def supported_apis(address: tuple[str, int]) -> dict[int, tuple[int, int]]:
    """What the node advertises (ApiVersions v0)."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_api_versions_frame(1))
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    response = codec.decode_response(18, 0, frame, 4)
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
