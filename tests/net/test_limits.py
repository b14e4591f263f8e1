"""Bounded resources on the Kafka listener (issue 12, item 4): a size prefix costs no memory
until the bytes arrive, the request header is checked before the body is read, a peer that
stops reading its responses is disconnected, and the connection knobs have finite
defaults and per-IP overrides."""

from __future__ import annotations

import os
import struct
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from trafka.net import framing
from trafka.net.framing import FrameReader
from trafka.net.server import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    EncodedResponse,
    KafkaServer,
    Listener,
    RequestContext,
    ServerConfig,
    parse_connection_overrides,
)

from .toy import SUPPORTED, ToyBroker
from .wire import WireClient, metadata_v1, request_frame

StartServer = Callable[..., Awaitable[tuple[KafkaServer, ToyBroker]]]


@pytest.fixture
async def start_server(nursery: trio.Nursery) -> AsyncIterator[StartServer]:
    async def start(
        config: ServerConfig | None = None, handler: Any = None
    ) -> tuple[KafkaServer, ToyBroker]:
        broker = ToyBroker()
        server = KafkaServer(handler or broker.handle, SUPPORTED, config)
        bound = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
        broker.port = bound[0].port
        return server, broker

    yield start


async def test_a_large_size_prefix_costs_memory_only_as_bytes_arrive() -> None:
    left, right = trio.socket.socketpair()
    reader = FrameReader(left, max_frame_bytes=200 * 1024 * 1024)
    size = 100 * 1024 * 1024
    header = struct.pack(">hhi", 3, 1, 7)
    await right.send(struct.pack(">i", size) + header + b"x" * 200_000)
    resident_before = _resident_bytes()
    tracemalloc.start()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.next_frame)
            await trio.sleep(0.2)
            _current, peak = tracemalloc.get_traced_memory()
            resident_growth = _resident_bytes() - resident_before
            nursery.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
        left.close()
        right.close()
    assert peak < 4 * 1024 * 1024, f"{peak} bytes allocated for 200 kB received"
    # The frame's buffer is a mapping of the announced size: resident only where written.
    assert resident_growth < 16 * 1024 * 1024, f"{resident_growth} bytes resident for 200 kB"


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_a_frame_of_megabytes_arrives_whole_in_pieces() -> None:
    left, right = trio.socket.socketpair()
    reader = FrameReader(left)
    payload = struct.pack(">hhi", 0, 9, 7) + bytes(range(256)) * 12_000  # ~3 MB: mapped
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            data = struct.pack(">i", len(payload)) + payload
            for start in range(0, len(data), 100_003):
                await right.send(data[start : start + 100_003])
                await trio.sleep(0)

        nursery.start_soon(feed)
        frame = await reader.next_frame()
        second = struct.pack(">hhi", 18, 3, 8)
        await right.send(struct.pack(">i", len(second)) + second)
        after = await reader.next_frame()
    assert frame is not None and frame.readonly and bytes(frame) == payload
    assert after is not None and bytes(after) == second
    left.close()
    right.close()


async def test_the_frame_still_arrives_whole_when_it_grows() -> None:
    left, right = trio.socket.socketpair()
    reader = FrameReader(left, receive_buffer_bytes=64)
    payload = struct.pack(">hhi", 3, 1, 7) + bytes(range(256)) * 3000
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            data = struct.pack(">i", len(payload)) + payload
            for start in range(0, len(data), 70_001):
                await right.send(data[start : start + 70_001])
                await trio.sleep(0)

        nursery.start_soon(feed)
        frame = await reader.next_frame()
    assert frame is not None and bytes(frame) == payload
    left.close()
    right.close()


async def test_an_unknown_api_key_is_refused_before_the_body(start_server: StartServer) -> None:
    _, broker = await start_server()
    client = await WireClient.connect(broker.port)
    # 50 MB announced, a header naming API 999, and nothing else: closed at once.
    await client.send(struct.pack(">i", 50_000_000) + struct.pack(">hhi", 999, 0, 1))
    await client.assert_closed_by_server(timeout_s=5)
    await client.aclose()


async def test_a_peer_that_stops_reading_is_disconnected(start_server: StartServer) -> None:
    async def big_answers(ctx: RequestContext) -> Any:
        return EncodedResponse((b"\x00" * 1_000_000,))

    _, broker = await start_server(ServerConfig(connections_max_idle_ms=500), handler=big_answers)
    stalled = await trio.open_tcp_stream("127.0.0.1", broker.port)
    for correlation_id in range(40):  # 40 MB of answers, never read
        await stalled.send_all(request_frame(metadata_v1(), correlation_id))
    other = await WireClient.connect(broker.port)
    closed = False
    with trio.fail_after(20):
        while not closed:
            await trio.sleep(0.25)
            # the other client keeps being served meanwhile
            await other.send(request_frame(metadata_v1(), 1))
            assert await other.read_frame() is not None
            closed = broker_closed(stalled)
    await stalled.aclose()
    await other.aclose()


def broker_closed(stream: trio.SocketStream) -> bool:
    """Drain what arrived without blocking; True once the server closed its side."""
    sock = stream.socket
    while True:
        try:
            data = sock._sock.recv(1 << 20)  # type: ignore[attr-defined]
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        if not data:
            return True


def test_connection_knobs_have_finite_defaults() -> None:
    config = ServerConfig()
    assert config.max_connections == DEFAULT_MAX_CONNECTIONS < 2**31 - 1
    assert config.max_connections_per_ip == DEFAULT_MAX_CONNECTIONS_PER_IP < 2**31 - 1
    assert 0 < config.queued_max_request_bytes == DEFAULT_QUEUED_MAX_REQUEST_BYTES
    assert config.connections_max_idle_ms == 600_000


def test_per_ip_overrides() -> None:
    overrides = parse_connection_overrides("127.0.0.1:5, hostA:100,")
    assert overrides == (("127.0.0.1", 5), ("hostA", 100))
    config = ServerConfig(max_connections_per_ip=2, max_connections_per_ip_overrides=overrides)
    assert config.connection_limit_for("127.0.0.1") == 5
    assert config.connection_limit_for("10.0.0.1") == 2
    for bad in ("nohost", "h:x", ":5"):
        with pytest.raises(ValueError, match="overrides"):
            parse_connection_overrides(bad)


async def test_an_override_raises_the_limit_for_one_ip(start_server: StartServer) -> None:
    _, broker = await start_server(
        ServerConfig(
            max_connections_per_ip=1,
            max_connections_per_ip_overrides=(("127.0.0.1", 3),),
        )
    )
    clients = [await WireClient.connect(broker.port) for _ in range(3)]
    for client in clients:
        await client.send(request_frame(metadata_v1(), 1))
        assert await client.read_frame() is not None
    fourth = await WireClient.connect(broker.port)
    await fourth.assert_closed_by_server()
    for client in [*clients, fourth]:
        await client.aclose()


async def test_an_idle_connection_holds_a_small_buffer_that_grows_for_larger_frames() -> None:
    left, right = trio.socket.socketpair()
    reader = FrameReader(left)  # capacity 64 KiB
    tracemalloc.start()
    try:
        idle = [FrameReader(left) for _ in range(100)]
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 100 * 8 * 1024, f"{held} bytes for 100 idle readers"  # not 100 x 64 KiB
    del idle
    header = struct.pack(">hhi", 3, 1, 7)
    # frames below, at and above the initial buffer and the capacity, in one stream, split
    # at awkward places: each arrives whole and in order
    payloads = [
        header + bytes([n % 256]) * size for n, size in enumerate((1, 5000, 40_000, 3, 70_000, 9))
    ]
    data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            for start in range(0, len(data), 3001):
                await right.send(data[start : start + 3001])
                await trio.sleep(0)

        nursery.start_soon(feed)
        frames = [await reader.next_frame() for _ in payloads]
    assert [bytes(f) for f in frames if f is not None] == payloads
    left.close()
    right.close()


def _held_by_readers() -> int:
    """Bytes allocated by trafka.net.framing and still alive (tracemalloc running)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, framing.__file__)]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def test_a_reader_holds_a_buffer_only_while_bytes_are_pending() -> None:
    pairs = [trio.socket.socketpair() for _ in range(50)]
    payload = struct.pack(">hhi", 3, 1, 7) + b"abcd"
    frame = struct.pack(">i", len(payload)) + payload
    frames: list[bytes] = []

    async def read_three(reader: FrameReader) -> None:
        for _ in range(3):
            got = await reader.next_frame()
            assert got is not None
            frames.append(bytes(got))

    tracemalloc.start()
    try:
        readers = [FrameReader(left) for left, _ in pairs]
        async with trio.open_nursery() as nursery:
            for reader in readers:
                nursery.start_soon(read_three, reader)
            await trio.testing.wait_all_tasks_blocked()
            waiting = _held_by_readers()  # 50 readers waiting for a first frame
            for _, right in pairs:  # a frame and the first 6 bytes of the next
                await right.send(frame + frame[:6])
            await trio.testing.wait_all_tasks_blocked()
            pending = _held_by_readers()
            for _, right in pairs:
                await right.send(frame[6:])
            await trio.testing.wait_all_tasks_blocked()
            between = _held_by_readers()  # two frames read, waiting for the third
            for _, right in pairs:
                await right.send(frame)
    finally:
        tracemalloc.stop()
    # what a waiting reader holds is its coroutines (~1 KiB), not a 4 KiB buffer
    assert waiting < 50 * 2048, f"{waiting} bytes held by 50 readers waiting for a frame"
    assert pending >= 50 * 4096, f"{pending} bytes: the unfinished frames' buffers"
    assert between < 50 * 2048, f"{between} bytes held by 50 readers between frames"
    assert frames == [payload] * 150
    for left, right in pairs:
        left.close()
        right.close()
