"""Loopback ports for tests: below 32768, outside Linux's ephemeral range.

An outgoing connection can take a port in the ephemeral range (32768-60999) as its local
port, and a server that later binds it fails (PLATFORM.md §1.7 #8). Ports are drawn at random
from 20000-32000 per process and checked by binding, so parallel test runs rarely collide.
"""

from __future__ import annotations

import os
import random
import socket

_LOW, _HIGH = 20000, 32000
_rng = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "big"))
_handed_out: set[int] = set()


def _is_free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM,):
        with socket.socket(socket.AF_INET, kind) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A loopback TCP port below 32768 that is free now and not handed out before."""
    for _ in range(2000):
        port = _rng.randrange(_LOW, _HIGH)
        if port not in _handed_out and _is_free(port):
            _handed_out.add(port)
            return port
    raise RuntimeError("no free loopback port found in 20000-32000")


def free_ports(count: int) -> list[int]:
    return [free_port() for _ in range(count)]


def free_port_range(count: int) -> int:
    """The first of `count` consecutive free loopback ports (for `knode cluster up --port`)."""
    for _ in range(2000):
        first = free_port()
        others = range(first + 1, first + count)
        if all(p < _HIGH and p not in _handed_out and _is_free(p) for p in others):
            _handed_out.update(others)
            return first
    raise RuntimeError(f"no {count} consecutive free loopback ports found in 20000-32000")
