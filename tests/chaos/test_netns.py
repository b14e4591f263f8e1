"""The harness's network mechanism on its own (root only, ~2 s): namespaces behind a bridge,
a partition that drops node-to-node TCP while the root namespace (the clients) still
reaches every node, heal, one-way loss, and cleanup, including leftovers of a dead run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.chaos.netns import Network, Unavailable, cleanup_leftovers, ns_name

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("nft") is None,
    reason="needs root, iproute2 and nftables",
)

LISTENER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9092)); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.close()
"""
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9092), timeout=1.0).close(); print("ok")
except OSError:
    print("fail")
"""


def _listen(network: Network, node_id: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*network.exec_prefix(node_id), sys.executable, "-c", LISTENER,
         network.address(node_id)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def _connects(network: Network, source: int | None, target: int) -> bool:
    prefix = [] if source is None else network.exec_prefix(source)
    result = subprocess.run(
        [*prefix, sys.executable, "-c", CONNECT, network.address(target)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return result.stdout.strip() == "ok"


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_partition_drops_node_traffic_but_not_clients() -> None:
    try:
        network = Network.create(os.getpid(), [1, 2])
    except Unavailable as error:
        pytest.skip(str(error))
    listeners = []
    try:
        assert network.nft_reason is None
        listeners = [_listen(network, 1), _listen(network, 2)]
        assert _connects(network, 1, 2) and _connects(network, None, 2)
        network.partition([{1}, {2}])
        assert not _connects(network, 1, 2)
        assert not _connects(network, 2, 1)
        assert _connects(network, None, 1) and _connects(network, None, 2)  # clients
        network.heal()
        assert _connects(network, 1, 2) and _connects(network, 2, 1)
        network.block(1, outgoing={2})  # one-way: 1 cannot send to 2
        assert not _connects(network, 1, 2)
        network.heal()
        assert _connects(network, 1, 2)
    finally:
        for process in listeners:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
        network.close()
    assert ns_name(os.getpid(), 1) not in _namespaces()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert network.bridge not in links


def test_leftovers_of_a_dead_run_are_removed() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer exists
    try:
        Network.create(dead.pid, [1])
    except Unavailable as error:
        pytest.skip(str(error))
    assert ns_name(dead.pid, 1) in _namespaces()
    removed = cleanup_leftovers(current_run=os.getpid())
    assert f"netns {ns_name(dead.pid, 1)}" in removed
    assert f"link chb{dead.pid}" in removed
    assert ns_name(dead.pid, 1) not in _namespaces()
