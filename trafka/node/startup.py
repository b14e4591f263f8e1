"""The start-up steps of a node that can fail with one line (`StartupError`): the quorum
replica, the log directories, the listeners. The broker (`trafka.node.broker`) calls them in
order; each turns the failures it expects into a `StartupError` that knode prints and exits
on, and lets anything else through."""

from __future__ import annotations

import errno
from pathlib import Path

import trio

from trafka.log.errors import LogError
from trafka.metadata_quorum.config import QuorumConfigError
from trafka.net import server as net_server
from trafka.node.config.broker import BrokerConfig
from trafka.node.config.service import effective_log_config
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore, open_quorum_store
from trafka.node.topics import TopicManager

QUORUM_DIR_NAME = "quorum"
"""The quorum's journal lives in <first log dir>/quorum (no '-': not a partition dir)."""


class StartupError(Exception):
    """A start-up failure with a one-line explanation (busy port, unreadable dir, ...)."""


def first_os_error(raised: BaseException) -> OSError | None:
    """The first OSError in `raised` or, for an exception group, in its members."""
    if isinstance(raised, OSError):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        for inner in raised.exceptions:
            found = first_os_error(inner)
            if found is not None:
                return found
    return None


async def open_store(config: BrokerConfig, nursery: trio.Nursery) -> MetadataStore:
    """Start this node's replica of the metadata quorum and wait until it is ready."""
    first_dir = config.log_dirs[0]
    try:
        first_dir.mkdir(parents=True, exist_ok=True)
        return await open_quorum_store(
            config.quorum_properties(), config.node_id, first_dir / QUORUM_DIR_NAME, nursery
        )
    except QuorumConfigError as error:
        raise StartupError(f"invalid quorum configuration: {error}") from None
    except OSError as error:
        raise StartupError(f"cannot start the metadata quorum: {error}") from None


def open_logs(
    config: BrokerConfig, topics: TopicManager, cluster_id: str, *, now_ms: int
) -> LocalLogs:
    """Open (recover) the log directories with every known topic's effective config."""
    try:
        return LocalLogs(
            [Path(d) for d in config.log_dirs],
            effective_log_config(config, {}),
            now_ms=now_ms,
            node_id=config.node_id,
            cluster_id=cluster_id,
            topic_configs={
                name: effective_log_config(config, state.configs)
                for name, state in topics.topics.items()
            },
        )
    except (OSError, LogError) as error:
        raise StartupError(f"cannot open log directories: {error}") from None


def server_config(config: BrokerConfig, inter_broker_listener: str = "") -> net_server.ServerConfig:
    """The net server's limits from the broker's config (Kafka's socket server keys)."""
    return net_server.ServerConfig(
        max_connections_per_listener=tuple(
            sorted((name, int(limit)) for name, limit in per_listener_limits(config).items())
        ),
        inter_broker_listener=inter_broker_listener,
        socket_request_max_bytes=config.get_int("socket.request.max.bytes"),
        max_connections=config.get_int("max.connections"),
        max_connections_per_ip=config.get_int("max.connections.per.ip"),
        max_connections_per_ip_overrides=net_server.parse_connection_overrides(
            config.get("max.connections.per.ip.overrides") or ""
        ),
        queued_max_request_bytes=config.get_int("queued.max.request.bytes"),
        connections_max_idle_ms=config.get_int("connections.max.idle.ms"),
        max_in_flight_requests=min(config.get_int("queued.max.requests"), 64),
    )


def per_listener_limits(config: BrokerConfig) -> dict[str, int]:
    return {
        name: int(value)
        for name, value in config.per_listener("max.connections").items()
        if value is not None
    }


def connection_creation_rates(config: BrokerConfig) -> tuple[int | None, dict[str, int]]:
    """`max.connection.creation.rate` (None when unlimited) and the per-listener ones."""
    unlimited = 2**31 - 1
    broker = config.get_int("max.connection.creation.rate")
    listeners = {
        name: int(value)
        for name, value in config.per_listener("max.connection.creation.rate").items()
        if value is not None and int(value) < unlimited
    }
    return (None if broker >= unlimited else broker), listeners


async def serve(
    nursery: trio.Nursery,
    server: net_server.KafkaServer,
    listeners: list[net_server.Listener],
    config: BrokerConfig,
) -> list[int]:
    """Bind the listeners and serve in `nursery`; the bound ports. A busy port (or any
    other bind failure) is a StartupError naming the configured listeners."""
    try:
        bound = await nursery.start(server.serve, listeners)
    except (OSError, ExceptionGroup) as raised:
        error = first_os_error(raised)
        if error is None:
            raise
        uri = ",".join(listener.uri() for listener in config.listeners)
        if error.errno == errno.EADDRINUSE:
            raise StartupError(f"cannot listen on {uri}: address already in use") from None
        raise StartupError(f"cannot listen on {uri}: {error.strerror or error}") from None
    return [b.port for b in bound]
