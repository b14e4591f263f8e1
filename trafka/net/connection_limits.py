"""Connection counts and limits, as Kafka's `ConnectionQuotas` keeps them (KIP-306, KIP-402).

Pure accounting: the server asks, counts and forgets; no clock, no sockets.

* ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections`` (per
  listener): a listener at its own limit, or (unless protected) a broker at its limit, takes
  no new connection: the server stops accepting on that listener until a slot frees (Kafka's
  acceptor blocks in `waitForConnectionSlot`; further clients wait in the listen backlog).
* The inter-broker listener is *protected* when the broker has more than one listener
  (KIP-402): it is exempt from the broker-wide limit; when a connection on it takes the
  broker over the limit, the least recently used connection of another listener is closed
  (Kafka's `maxConnectionsExceeded`). Its own per-listener limit still applies.
* ``max.connections.per.ip`` with ``max.connections.per.ip.overrides``: a connection beyond
  its IP's limit is counted, then closed at once (Kafka's TooManyConnectionsException).

Limits may change at runtime (dynamic broker configs): `update` replaces them; a lower
broker-wide limit closes least recently used connections until the count fits (as Kafka's
processors do, one per poll) - `excess` says how many.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

UNLIMITED: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_connections_per_listener: Mapping[str, int] = field(default_factory=dict)
    max_connections_per_ip: int = UNLIMITED
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    inter_broker_listener: str = ""

    def listener_limit(self, listener: str) -> int:
        return self.max_connections_per_listener.get(listener, UNLIMITED)

    def ip_limit(self, ip: str) -> int:
        return self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)


class ConnectionCounts:
    """Open connections by listener and IP, against `ConnectionLimits`."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_listener: dict[str, int] = {}
        self.by_ip: dict[str, int] = {}
        self.listeners: set[str] = set()

    def add_listener(self, listener: str) -> None:
        self.listeners.add(listener)
        self.by_listener.setdefault(listener, 0)

    def update(self, limits: ConnectionLimits) -> None:
        self.limits = limits

    def protected(self, listener: str) -> bool:
        """Kafka's `protectedListener`: the inter-broker listener, when there are others."""
        return listener == self.limits.inter_broker_listener and len(self.listeners) > 1

    def slot_available(self, listener: str) -> bool:
        """May `listener` take one more connection now (Kafka's `connectionSlotAvailable`)?"""
        if self.by_listener.get(listener, 0) >= self.limits.listener_limit(listener):
            return False
        if self.protected(listener):
            return True
        return self.total < self.limits.max_connections

    def add(self, listener: str, ip: str) -> bool:
        """Count a new connection; False when it is over its IP's limit (the caller closes
        it and `remove`s it, as Kafka counts it before refusing)."""
        before = self.by_ip.get(ip, 0)
        self.by_ip[ip] = before + 1
        self.by_listener[listener] = self.by_listener.get(listener, 0) + 1
        self.total += 1
        return before < self.limits.ip_limit(ip)

    def remove(self, listener: str, ip: str) -> None:
        remaining = self.by_ip[ip] - 1
        if remaining:
            self.by_ip[ip] = remaining
        else:
            del self.by_ip[ip]
        self.by_listener[listener] -= 1
        self.total -= 1

    def excess(self) -> int:
        """Connections over the broker-wide limit (to close, least recently used first,
        never on the protected listener)."""
        return max(self.total - self.limits.max_connections, 0)
