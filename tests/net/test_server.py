"""The trio server in-process with a toy handler: pipelining, limits, bad input."""

from __future__ import annotations

import dataclasses
import os
import random
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from trafka.net import codec, headers
from trafka.net.framing import FileRegion
from trafka.net.server import (
    EncodedResponse,
    KafkaServer,
    Listener,
    RequestContext,
    ServerConfig,
)

from .toy import SUPPORTED, ToyBroker
from .wire import WireClient, metadata_v1, produce_v3, raw_frame, request_frame

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


Connect = Callable[[int], Awaitable[WireClient]]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    """Open raw connections; every one is closed at teardown."""
    opened: list[WireClient] = []

    async def open_client(port: int) -> WireClient:
        client = await WireClient.connect(port)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        await client.aclose()


async def _metadata_round_trip(connect: Connect, port: int, correlation_id: int = 7) -> None:
    client = await connect(port)
    await client.send(request_frame(metadata_v1(), correlation_id))
    frame = await client.read_frame()
    assert frame is not None
    assert headers.parse_response_header(frame, 0)[0] == correlation_id


async def test_pipelined_responses_come_back_in_request_order(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    # Earlier requests are slower: the handler finishes them last, the writer still
    # answers in request order.
    delays = [120, 90, 60, 30, 0]
    await client.send(
        b"".join(
            request_frame(produce_v3(f"slow-{delay}"), correlation_id)
            for correlation_id, delay in enumerate(delays, start=100)
        )
    )
    seen = []
    for _ in delays:
        frame = await client.read_frame()
        assert frame is not None
        seen.append(headers.parse_response_header(frame, 0)[0])
    assert seen == [100, 101, 102, 103, 104]
    # All five were read before the first was answered (pipelining, not one at a time).
    assert [c for _, _, c in broker.seen] == seen


async def test_acks_zero_produce_gets_no_response(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    await client.send(request_frame(produce_v3("t", acks=0), 1) + request_frame(metadata_v1(), 2))
    frame = await client.read_frame()
    assert frame is not None and headers.parse_response_header(frame, 0)[0] == 2


async def test_oversize_length_prefix_closes_before_allocating(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server(ServerConfig(socket_request_max_bytes=1000))
    client = await connect(broker.port)
    await client.send(struct.pack(">i", 1001))
    await client.assert_closed_by_server()
    client = await connect(broker.port)
    await client.send(b"\x7f\xff\xff\xff")
    await client.assert_closed_by_server()
    client = await connect(broker.port)
    await client.send(b"\xff\xff\xff\xfe")  # negative size
    await client.assert_closed_by_server()
    await _metadata_round_trip(connect, broker.port)


async def test_frame_larger_than_receive_buffer(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server(ServerConfig(receive_buffer_bytes=64))
    client = await connect(broker.port)
    await client.send(request_frame(produce_v3("t" * 300), 5))
    frame = await client.read_frame()
    assert frame is not None and headers.parse_response_header(frame, 0)[0] == 5


async def test_truncated_frame_closes_only_that_connection(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    full = request_frame(metadata_v1(), 1)
    await client.send(full[: len(full) - 3])
    await client.stream.send_eof()
    await client.assert_closed_by_server()
    await _metadata_round_trip(connect, broker.port)


async def test_random_bytes_close_the_connection(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server(ServerConfig(socket_request_max_bytes=4096))
    rng = __import__("random").Random(1234)
    for _ in range(20):
        client = await connect(broker.port)
        await client.send(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        await client.stream.send_eof()
        await client.assert_closed_by_server()
    await _metadata_round_trip(connect, broker.port)


async def test_malformed_body_closes_the_connection(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    # Metadata v1 header + a topics array claiming 1000 entries with nothing behind it.
    header = headers.encode_request_header(3, 1, 9, "x", 1)
    await client.send(raw_frame(header + struct.pack(">i", 1000)))
    await client.assert_closed_by_server()


async def test_unknown_api_key_and_unsupported_version_close(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    await client.send(raw_frame(headers.encode_request_header(999, 0, 1, "x", 1)))
    await client.assert_closed_by_server()
    client = await connect(broker.port)
    await client.send(request_frame(metadata_v1(), 1, api_version=1)[:4])  # size only...
    await client.aclose()
    client = await connect(broker.port)
    await client.send(raw_frame(headers.encode_request_header(3, 0, 1, "x", 1) + b"\xff" * 4))
    await client.assert_closed_by_server()  # Metadata v0 is below our minimum (1)
    await _metadata_round_trip(connect, broker.port)


async def test_api_versions_above_our_max_gets_v0_error_body(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    # kafka-python opens with v4 (we support 0-3); the body is never parsed.
    request = ApiVersionsRequestV3(client_software_name="x", client_software_version="1")
    await client.send(
        request_frame(request, 42, api_version=3).replace(b"\x00\x03", b"\x00\x04", 1)
    )
    frame = await client.read_frame()
    assert frame is not None
    correlation_id, offset = headers.parse_response_header(frame, 0)  # header v0
    assert correlation_id == 42
    response = codec.decode_response(18, 0, frame, offset)
    assert response.error_code == ErrorCode.unsupported_version
    ranges = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    assert ranges[18] == (0, 3)
    assert ranges[0] == (0, 9)  # Produce advertised from v0 (KAFKA-18659)
    # The connection stays open: the retry with v3 works.
    await client.send(request_frame(request, 43))
    frame = await client.read_frame()
    assert frame is not None
    correlation_id, offset = headers.parse_response_header(frame, 0)
    assert correlation_id == 43
    assert codec.decode_response(18, 3, frame, offset).error_code == ErrorCode.none


async def test_idle_connection_is_closed(start_server: StartServer, connect: Connect) -> None:
    _, broker = await start_server(ServerConfig(connections_max_idle_ms=150))
    client = await connect(broker.port)
    await client.send(request_frame(ApiVersionsRequestV0(), 1))
    assert await client.read_frame() is not None
    start = trio.current_time()
    await client.assert_closed_by_server(timeout_s=3)
    assert trio.current_time() - start >= 0.1


async def test_idle_expiry_spares_busy_and_active_connections_and_closes_each_on_time(
    start_server: StartServer, connect: Connect
) -> None:
    """One sweep for the whole server: a request handled for longer than the idle time
    keeps its connection open until answered; a client sending requests more often than
    the idle time keeps its own; each is closed once it has been idle that long."""
    _, broker = await start_server(ServerConfig(connections_max_idle_ms=300))
    busy = await connect(broker.port)
    active = await connect(broker.port)
    quiet = await connect(broker.port)
    start = trio.current_time()
    closed: dict[str, float] = {}

    async def wait_busy() -> None:
        await busy.send(request_frame(produce_v3("slow-700"), 1))
        frame = await busy.read_frame()  # answered after 700 ms, not closed at 300 ms
        assert frame is not None and headers.parse_response_header(frame, 0)[0] == 1
        closed["busy answered"] = trio.current_time() - start
        await busy.assert_closed_by_server(timeout_s=3)
        closed["busy"] = trio.current_time() - start

    async def keep_active() -> None:
        for correlation_id in range(6):  # 0.9 s of requests 150 ms apart
            await active.send(request_frame(ApiVersionsRequestV0(), correlation_id))
            assert await active.read_frame() is not None
            await trio.sleep(0.15)
        closed["active last request"] = trio.current_time() - start
        await active.assert_closed_by_server(timeout_s=3)
        closed["active"] = trio.current_time() - start

    async def wait_quiet() -> None:
        await quiet.assert_closed_by_server(timeout_s=3)
        closed["quiet"] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        for task in (wait_busy, keep_active, wait_quiet):
            nursery.start_soon(task)
    assert 0.25 <= closed["quiet"] < 0.6, closed
    assert closed["busy answered"] >= 0.65, closed
    assert closed["busy"] - closed["busy answered"] >= 0.25, closed
    assert closed["active"] - closed["active last request"] >= 0.1, closed
    assert closed["active"] > 0.9, closed


async def test_a_never_finished_request_is_closed_when_idle(
    start_server: StartServer, connect: Connect
) -> None:
    """A frame's size and half its header, then nothing: the connection holds no request
    in flight and is closed after the idle time, while another client is served."""
    _, broker = await start_server(ServerConfig(connections_max_idle_ms=300))
    stalled = await connect(broker.port)
    frame = request_frame(metadata_v1(), 1)
    start = trio.current_time()
    await stalled.send(frame[:7])
    other = await connect(broker.port)
    await other.send(request_frame(metadata_v1(), 2))
    assert await other.read_frame() is not None
    await stalled.assert_closed_by_server(timeout_s=3)
    assert trio.current_time() - start >= 0.25


async def test_per_ip_connection_limit(start_server: StartServer, connect: Connect) -> None:
    server, broker = await start_server(ServerConfig(max_connections_per_ip=2))
    first = await connect(broker.port)
    second = await connect(broker.port)
    for client in (first, second):  # both served
        await client.send(request_frame(metadata_v1(), 1))
        assert await client.read_frame() is not None
    third = await connect(broker.port)
    await third.assert_closed_by_server()
    await first.aclose()
    with trio.fail_after(5):
        while server.connection_count > 1:
            await trio.sleep(0.01)
    await _metadata_round_trip(connect, broker.port)


async def test_one_bad_client_does_not_affect_another(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    good = await connect(broker.port)

    async def misbehave() -> None:
        for _ in range(10):
            bad = await connect(broker.port)
            await bad.send(b"\x00\x00\x00\x0a\x00\x12\x00")  # truncated, then garbage
            await bad.send(os.urandom(64))
            await bad.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(misbehave)
        for correlation_id in range(50):
            await good.send(request_frame(metadata_v1(), correlation_id))
            frame = await good.read_frame()
            assert frame is not None
            assert headers.parse_response_header(frame, 0)[0] == correlation_id


async def test_handler_failure_closes_only_its_connection(
    start_server: StartServer, connect: Connect
) -> None:
    _, broker = await start_server()
    client = await connect(broker.port)
    await client.send(request_frame(produce_v3("explode"), 1))
    await client.assert_closed_by_server()
    await _metadata_round_trip(connect, broker.port)


async def test_encoded_response_with_file_region(
    start_server: StartServer, tmp_path: Path, connect: Connect
) -> None:
    broker = ToyBroker()
    body_file = tmp_path / "body.bin"

    async def handler(ctx: RequestContext) -> Any:
        response = await broker.handle(ctx)
        body = codec.encode_response(response)
        # Serve the body's tail from a file, as a Fetch handler serves segment bytes.
        body_file.write_bytes(b"JUNK" + body[10:] + b"MORE")
        return EncodedResponse((body[:10], FileRegion(str(body_file), 4, len(body) - 10)))

    _, toy = await start_server(handler=handler)
    broker.port = toy.port
    client = await connect(toy.port)
    await client.send(request_frame(metadata_v1(), 11))
    frame = await client.read_frame()
    assert frame is not None
    correlation_id, offset = headers.parse_response_header(frame, 0)
    assert correlation_id == 11
    response = codec.decode_response(3, 1, frame, offset)
    assert response.brokers[0].port == toy.port


class _GatedBroker(ToyBroker):
    """Holds every Produce to topic "gate" until `gate` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()

    async def handle(self, ctx: RequestContext) -> Any:
        if ctx.api_key == 0 and ctx.request.topic_data[0].name == "gate":
            self.seen.append((ctx.api_key, ctx.api_version, ctx.correlation_id))
            await self.gate.wait()
            return None if ctx.request.acks == 0 else await super().handle(ctx)
        return await super().handle(ctx)


async def _read_count_when_quiet(broker: ToyBroker) -> int:
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
    return len(broker.seen)


async def test_request_bytes_in_flight_are_bounded_per_connection(
    start_server: StartServer, connect: Connect
) -> None:
    gated = _GatedBroker()
    _, toy = await start_server(ServerConfig(socket_request_max_bytes=2000), handler=gated.handle)
    client = await connect(toy.port)
    # Each frame carries ~1560 bytes: with 2000 bytes per connection only one is read
    # before the first is answered.
    padded = [request_frame(_produce_with_records("gate", 1500), c) for c in range(6)]
    with trio.fail_after(5):
        await client.send(b"".join(padded))
    assert await _read_count_when_quiet(gated) == 1
    gated.gate.set()
    for correlation_id in range(6):
        response = await client.read_frame()
        assert response is not None
        assert headers.parse_response_header(response, 0)[0] == correlation_id


async def test_queued_max_request_bytes_bounds_all_connections(
    start_server: StartServer, connect: Connect
) -> None:
    gated = _GatedBroker()
    _, toy = await start_server(ServerConfig(queued_max_request_bytes=3000), handler=gated.handle)
    clients = [await connect(toy.port) for _ in range(3)]
    for client in clients:
        await client.send(
            b"".join(request_frame(_produce_with_records("gate", 1500), c) for c in range(2))
        )
    # ~1560-byte frames: only one fits the 3000-byte budget at a time... two would need 3120.
    assert await _read_count_when_quiet(gated) == 1
    gated.gate.set()
    for client in clients:
        for _ in range(2):
            assert await client.read_frame() is not None


async def test_max_connections(start_server: StartServer, connect: Connect) -> None:
    """At max.connections the listener stops accepting (Kafka's acceptor blocks): the next
    client is served once a connection closes."""
    server, broker = await start_server(ServerConfig(max_connections=1))
    first = await connect(broker.port)
    await first.send(request_frame(metadata_v1(), 1))
    assert await first.read_frame() is not None
    second = await connect(broker.port)
    await second.send(request_frame(metadata_v1(), 2))
    with pytest.raises(trio.TooSlowError):
        await second.read_frame(timeout_s=0.5)
    assert server.connection_count == 1
    await first.aclose()
    assert await second.read_frame() is not None
    assert server.connection_count == 1


def _produce_with_records(topic: str, size: int) -> Any:
    request = produce_v3(topic)
    data = request.topic_data[0]
    partition = data.partition_data[0]
    return dataclasses.replace(
        request,
        topic_data=(
            dataclasses.replace(
                data,
                partition_data=(dataclasses.replace(partition, records=Records(b"r" * size)),),
            ),
        ),
    )


class _EffectBroker(ToyBroker):
    """Records each Produce's "side effect" after a random delay; topic "release" lets the
    next request start at once and then waits for `gate` before answering."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.effects: list[int] = []
        self.random = random.Random(seed)
        self.gate = trio.Event()

    async def handle(self, ctx: RequestContext) -> Any:
        if ctx.api_key == 0:
            topic = str(ctx.request.topic_data[0].name)
            if topic == "release":
                self.effects.append(ctx.correlation_id)
                ctx.turn.release()
                await self.gate.wait()
                return await super().handle(ctx)
            await trio.sleep(self.random.random() / 100)
            self.effects.append(ctx.correlation_id)
        return await super().handle(ctx)


@pytest.mark.parametrize("seed", range(3))
async def test_side_effects_happen_in_arrival_order(
    start_server: StartServer, connect: Connect, seed: int
) -> None:
    # Handlers that take random time would finish in random order; each one starts only
    # when the one before it on the connection is done (MSG-05: per-partition order).
    effects = _EffectBroker(seed)
    _, toy = await start_server(handler=effects.handle)
    client = await connect(toy.port)
    await client.send(b"".join(request_frame(produce_v3("t"), c) for c in range(20)))
    for _ in range(20):
        assert await client.read_frame() is not None
    assert effects.effects == list(range(20))


async def test_a_released_turn_lets_the_next_request_start(
    start_server: StartServer, connect: Connect
) -> None:
    effects = _EffectBroker(0)
    _, toy = await start_server(handler=effects.handle)
    client = await connect(toy.port)
    await client.send(request_frame(produce_v3("release"), 1) + request_frame(produce_v3("t"), 2))
    with trio.fail_after(5):
        while effects.effects != [1, 2]:
            await trio.sleep(0.01)
    effects.gate.set()
    seen = []
    for _ in range(2):
        frame = await client.read_frame()
        assert frame is not None
        seen.append(headers.parse_response_header(frame, 0)[0])
    assert seen == [1, 2]


async def test_a_muted_connection_answers_at_once_then_holds_its_next_request(
    start_server: StartServer, connect: Connect
) -> None:
    """KIP-219: the handler answers at once and mutes the channel; the pipelined request
    after it starts only once the mute has passed (trafka.net.server.ChannelThrottle)."""
    started: list[tuple[int, float]] = []
    toy = ToyBroker()

    async def handler(ctx: RequestContext) -> Any:
        started.append((ctx.correlation_id, trio.current_time()))
        response = await toy.handle(ctx)
        if ctx.correlation_id == 1:
            assert ctx.channel is not None and ctx.size > 0
            ctx.channel.mute_for(300)
        return response

    _, broker = await start_server(handler=handler)
    client = await connect(broker.port)
    await client.send(request_frame(metadata_v1(), 1) + request_frame(metadata_v1(), 2))
    first = await client.read_frame()
    answered = trio.current_time()
    assert first is not None and headers.parse_response_header(first, 0)[0] == 1
    second = await client.read_frame()
    assert second is not None and headers.parse_response_header(second, 0)[0] == 2
    assert [c for c, _ in started] == [1, 2]
    assert started[1][1] - started[0][1] >= 0.29
    assert answered - started[0][1] < 0.29  # the throttled answer itself was not held


async def test_a_connection_policy_refuses_with_a_delayed_close(
    nursery: trio.Nursery, connect: Connect
) -> None:
    class EverySecondRefused:
        def __init__(self) -> None:
            self.seen: list[tuple[str, str]] = []

        def throttle_accept(self, listener_name: str, protected: bool) -> int:
            return 0

        def admit(self, ip: str, listener_name: str, protected: bool) -> int:
            self.seen.append((ip, listener_name))
            return 0 if len(self.seen) % 2 else 200

    policy = EverySecondRefused()
    toy = ToyBroker()
    server = KafkaServer(toy.handle, SUPPORTED, connection_policy=policy)
    bound = await nursery.start(server.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
    accepted = await connect(bound[0].port)
    await accepted.send(request_frame(metadata_v1(), 7))
    assert await accepted.read_frame() is not None
    refused = await connect(bound[0].port)
    opened = trio.current_time()
    await refused.send(request_frame(metadata_v1(), 8))
    await refused.assert_closed_by_server()
    assert trio.current_time() - opened >= 0.15
    assert policy.seen == [("127.0.0.1", "PLAINTEXT")] * 2
    assert server.connection_count == 1
