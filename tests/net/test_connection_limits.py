"""Broker-wide and per-listener connection limits (KIP-306, KIP-402, KIP-612): the pure
accounting of `trafka.net.connection_limits`, and the server on several listeners."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio

from trafka.net.connection_limits import ConnectionCounts, ConnectionLimits
from trafka.net.server import BoundListener, KafkaServer, Listener, ServerConfig

from .toy import SUPPORTED, ToyBroker
from .wire import WireClient, metadata_v1, request_frame

# ---- pure accounting -------------------------------------------------------------------------


def test_listener_and_broker_slots() -> None:
    counts = ConnectionCounts(
        ConnectionLimits(max_connections=2, max_connections_per_listener={"CLIENT": 1})
    )
    for name in ("CLIENT", "OTHER"):
        counts.add_listener(name)
    assert counts.slot_available("CLIENT")
    assert counts.add("CLIENT", "10.0.0.1")
    assert not counts.slot_available("CLIENT")  # its own limit
    assert counts.slot_available("OTHER")
    assert counts.add("OTHER", "10.0.0.1")
    assert not counts.slot_available("OTHER")  # the broker's limit
    counts.remove("CLIENT", "10.0.0.1")
    assert counts.slot_available("OTHER") and counts.slot_available("CLIENT")
    assert counts.total == 1 and counts.by_ip == {"10.0.0.1": 1}


def test_the_inter_broker_listener_is_protected_only_with_other_listeners() -> None:
    limits = ConnectionLimits(
        max_connections=1,
        max_connections_per_listener={"BROKER": 2},
        inter_broker_listener="BROKER",
    )
    alone = ConnectionCounts(limits)
    alone.add_listener("BROKER")
    alone.add("BROKER", "a")
    assert not alone.protected("BROKER") and not alone.slot_available("BROKER")
    counts = ConnectionCounts(limits)
    counts.add_listener("BROKER")
    counts.add_listener("CLIENT")
    counts.add("CLIENT", "c")
    assert not counts.slot_available("CLIENT")
    assert counts.protected("BROKER") and counts.slot_available("BROKER")
    counts.add("BROKER", "b")
    assert counts.excess() == 1  # one client connection to close
    counts.add("BROKER", "b")
    assert not counts.slot_available("BROKER")  # its own listener limit still holds


def test_per_ip_limits_count_then_refuse() -> None:
    counts = ConnectionCounts(
        ConnectionLimits(max_connections_per_ip=1, max_connections_per_ip_overrides={"b": 2})
    )
    counts.add_listener("L")
    assert counts.add("L", "a")
    assert not counts.add("L", "a")  # counted, refused: the caller closes and removes it
    counts.remove("L", "a")
    assert counts.add("L", "b") and counts.add("L", "b") and not counts.add("L", "b")
    counts.update(ConnectionLimits(max_connections_per_ip=5))
    assert counts.add("L", "b")


# ---- the server ------------------------------------------------------------------------------

Start = Callable[..., Awaitable[tuple[KafkaServer, dict[str, int]]]]


@pytest.fixture
async def opened(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[WireClient]]:
    """Every WireClient connected by a test, closed at teardown."""
    clients: list[WireClient] = []
    original = WireClient.connect.__func__  # type: ignore[attr-defined]

    async def connect(cls: type[WireClient], port: int) -> WireClient:
        client: WireClient = await original(cls, port)
        clients.append(client)
        return client

    monkeypatch.setattr(WireClient, "connect", classmethod(connect))
    yield clients
    for client in clients:
        await client.aclose()


@pytest.fixture
async def start(nursery: trio.Nursery, opened: list[WireClient]) -> AsyncIterator[Start]:
    async def run(
        config: ServerConfig, names: tuple[str, ...] = ("CLIENT",), policy: object = None
    ) -> tuple[KafkaServer, dict[str, int]]:
        server = KafkaServer(ToyBroker().handle, SUPPORTED, config, policy)  # type: ignore[arg-type]
        bound: list[BoundListener] = await nursery.start(
            server.serve, [Listener(name, "127.0.0.1", 0) for name in names]
        )
        return server, {b.name: b.port for b in bound}

    yield run


async def _served(client: WireClient, correlation_id: int, timeout_s: float = 5.0) -> bool:
    await client.send(request_frame(metadata_v1(), correlation_id))
    try:
        return await client.read_frame(timeout_s=timeout_s) is not None
    except trio.TooSlowError:
        return False


async def test_a_listener_limit_holds_only_that_listener(start: Start) -> None:
    config = ServerConfig(max_connections_per_listener=(("CLIENT", 1),))
    server, ports = await start(config, ("CLIENT", "OTHER"))
    first = await WireClient.connect(ports["CLIENT"])
    assert await _served(first, 1)
    waiting = await WireClient.connect(ports["CLIENT"])
    other = await WireClient.connect(ports["OTHER"])
    assert await _served(other, 2)
    assert not await _served(waiting, 3, timeout_s=0.5)
    await first.aclose()
    assert await waiting.read_frame() is not None  # accepted once a slot freed
    assert server.connection_count == 2


async def test_the_inter_broker_listener_closes_the_least_recently_used_client(
    start: Start,
) -> None:
    config = ServerConfig(max_connections=2, inter_broker_listener="BROKER")
    server, ports = await start(config, ("CLIENT", "BROKER"))
    old = await WireClient.connect(ports["CLIENT"])
    assert await _served(old, 1)
    recent = await WireClient.connect(ports["CLIENT"])
    assert await _served(recent, 2)
    broker = await WireClient.connect(ports["BROKER"])
    assert await _served(broker, 3)  # exempt from max.connections
    await old.assert_closed_by_server()  # the least recently used client connection
    assert await _served(recent, 4)
    assert server.connection_count == 2


async def test_dynamic_limits_close_the_excess_and_wake_the_listener(start: Start) -> None:
    config = ServerConfig(max_connections=2)
    server, ports = await start(config)
    clients = [await WireClient.connect(ports["CLIENT"]) for _ in range(2)]
    for number, client in enumerate(clients):
        assert await _served(client, number)
    waiting = await WireClient.connect(ports["CLIENT"])
    assert not await _served(waiting, 9, timeout_s=0.3)
    server.reconfigure(ServerConfig(max_connections=3))
    assert await waiting.read_frame() is not None
    assert await _served(clients[1], 10)  # clients[0] is now the least recently used
    server.reconfigure(ServerConfig(max_connections=2))
    await clients[0].assert_closed_by_server()
    assert await _served(waiting, 11)


class _RatePolicy:
    """Throttles every accept by `throttle_ms` (the creation-rate path of the policy)."""

    def __init__(self, throttle_ms: int) -> None:
        self.throttle_ms = throttle_ms
        self.accepted: list[tuple[str, bool]] = []

    def throttle_accept(self, listener_name: str, protected: bool) -> int:
        self.accepted.append((listener_name, protected))
        return self.throttle_ms

    def admit(self, ip: str, listener_name: str, protected: bool) -> int:
        return 0


async def test_the_creation_rate_throttle_delays_the_next_accept(start: Start) -> None:
    policy = _RatePolicy(600)
    _server, ports = await start(ServerConfig(), ("CLIENT",), policy)
    started = trio.current_time()
    clients = [await WireClient.connect(ports["CLIENT"]) for _ in range(3)]
    for number, client in enumerate(clients):
        assert await _served(client, number)
    # Each accepted connection makes the listener wait 0.6 s before the next is served.
    assert trio.current_time() - started >= 1.2
    assert policy.accepted == [("CLIENT", False)] * 3
