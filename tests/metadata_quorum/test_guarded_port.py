"""The quorum-port wrapper (trafka.metadata_quorum.guarded_port) over real pysyncobj objects.

FrameBuffer is tested as a pure value; the connection and transport subclasses are tested
inside real SyncObj instances on loopback, with raw sockets as the hostile peer.
"""

from __future__ import annotations

import functools
import os
import pickle
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.encryptor import getEncryptor
from pysyncobj.journal import FileJournal, MetaStorer
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

from tests.support.ports import free_ports
from trafka.metadata_quorum.guarded_port import (
    FrameBuffer,
    FrameRefused,
    GuardedTcpConnection,
    GuardedTCPTransport,
    PortLimits,
)
from trafka.metadata_quorum.transport import _DurableMetaStorer, _make_meta_durable

SECRET = "guarded-port-test-secret"
LIMITS = PortLimits(
    max_unauthenticated_frame_bytes=16 * 1024,
    max_frame_bytes=8 * 1024 * 1024,
    auth_deadline_s=1.0,
    max_pending_connections=4,
)


def header(length: int) -> bytes:
    return struct.pack("i", length)


# ---- FrameBuffer (pure) ---------------------------------------------------------------------


def test_a_huge_length_is_refused_from_its_four_bytes() -> None:
    frames = FrameBuffer(LIMITS)
    with pytest.raises(FrameRefused, match="before authentication"):
        frames.feed(header(100 * 1024 * 1024))
    assert len(frames) == 4  # nothing beyond the header was ever buffered


def test_a_negative_length_is_refused() -> None:
    with pytest.raises(FrameRefused, match="negative"):
        FrameBuffer(LIMITS).feed(header(-5) + b"xxxx")


def test_the_cap_grows_after_authentication_only() -> None:
    frames = FrameBuffer(LIMITS)
    with pytest.raises(FrameRefused):
        frames.feed(header(LIMITS.max_unauthenticated_frame_bytes + 1))
    frames = FrameBuffer(LIMITS)
    frames.authenticated = True
    frames.feed(header(LIMITS.max_unauthenticated_frame_bytes + 1))  # fine now
    with pytest.raises(FrameRefused):
        FrameBuffer(LIMITS).feed(header(LIMITS.max_frame_bytes + 1))


def test_frames_split_and_joined_across_chunks() -> None:
    frames = FrameBuffer(LIMITS)
    stream = header(3) + b"abc" + header(0) + header(5) + b"hello"
    popped: list[bytes] = []
    for index in range(len(stream)):
        frames.feed(stream[index : index + 1])
        while (frame := frames.pop_frame()) is not None:
            popped.append(frame)
    assert popped == [header(3) + b"abc", header(0), header(5) + b"hello"]
    assert len(frames) == 0
    frames.feed(header(4) + b"ab")
    assert frames.wanted() == 2 and frames.pop_frame() is None


def test_accumulation_is_linear() -> None:
    """64 MiB in 64 KiB chunks: `bytes +=` (pysyncobj) copies ~32 GB, a bytearray 64 MiB."""
    limits = PortLimits(max_frame_bytes=128 * 1024 * 1024)
    frames = FrameBuffer(limits)
    frames.authenticated = True
    size = 64 * 1024 * 1024
    chunk = b"x" * 65536
    started = time.monotonic()
    frames.feed(header(size))
    for _ in range(size // len(chunk)):
        frames.feed(chunk)
    frame = frames.pop_frame()
    elapsed = time.monotonic() - started
    assert frame is not None and len(frame) == size + 4
    assert elapsed < 3.0, elapsed


# ---- the wrapper inside real SyncObj instances --------------------------------------------


class Counter(SyncObj):  # type: ignore[misc]
    def __init__(
        self,
        me: str,
        others: list[str],
        journal: Path | None = None,
        limits: PortLimits = LIMITS,
    ) -> None:
        conf = SyncObjConf(
            password=SECRET,
            bindAddress=me,
            appendEntriesUseBatch=False,
            raftMinTimeout=0.2,
            raftMaxTimeout=0.4,
            appendEntriesPeriod=0.04,
            connectionTimeout=1.0,
            connectionRetryTime=0.2,
            journalFile=str(journal) if journal else None,
        )
        transport = functools.partial(
            GuardedTCPTransport, limits=limits, before_start=_make_meta_durable
        )
        super().__init__(me, others, conf, transportClass=transport)
        self.value = 0

    @replicated  # type: ignore[untyped-decorator]
    def add(self, amount: int) -> int:
        self.value += amount
        return self.value


def _transport(node: SyncObj) -> GuardedTCPTransport:
    transport = node._SyncObj__transport
    assert isinstance(transport, GuardedTCPTransport)
    return transport


def _wait(predicate: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


@pytest.fixture
def lone() -> Iterator[tuple[Counter, int]]:
    (port,) = free_ports(1)
    node = Counter(f"127.0.0.1:{port}", [])
    try:
        _wait(node._isLeader)
        yield node, port
    finally:
        node.destroy_synchronous()


def _closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _frame(message: object, *, rand_key: bytes | None = None) -> bytes:
    """A frame as pysyncobj's TcpConnection.send builds it, encrypted with the secret."""
    if rand_key is not None:
        message = (rand_key, message)
    data = zlib.compress(pickle.dumps(message), 3)
    data = getEncryptor(SECRET).encrypt_at_time(data, int(time.monotonic()))
    return header(len(data)) + data


def test_the_wrapped_classes_still_exist_in_pysyncobj() -> None:
    """The private names the wrapper overrides: an upgrade that renames them fails here."""
    for name in (
        "_TcpConnection__tryReadBuffer",
        "_TcpConnection__processParseMessage",
        "_TcpConnection__processConnection",
    ):
        assert callable(getattr(TcpConnection, name)), name
    for name in ("_onNewIncomingConnection", "_onTick", "addNode", "_createServer"):
        assert callable(getattr(TCPTransport, name)), name
    for name in ("storeMeta", "getMeta", "getPath"):
        assert callable(getattr(MetaStorer, name)), name


def test_a_junk_length_closes_the_connection_at_once(lone: tuple[Counter, int]) -> None:
    node, port = lone
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(header(100 * 1024 * 1024) + os.urandom(4096))
        assert _closed_by_peer(sock, timeout_s=2.0)
    _wait(lambda: _transport(node).refusals.total >= 1)
    assert node.add(1, sync=True, timeout=5) == 1  # the node still commits


def test_a_frame_that_fails_authentication_closes_the_connection(lone: tuple[Counter, int]) -> None:
    node, port = lone
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(header(1000) + os.urandom(1000))
        assert _closed_by_peer(sock, timeout_s=2.0)
    assert node.add(1, sync=True, timeout=5) == 1


def test_a_silent_connection_is_closed_at_the_deadline(lone: tuple[Counter, int]) -> None:
    _node, port = lone
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.monotonic()
        assert _closed_by_peer(sock, timeout_s=LIMITS.auth_deadline_s + 3)
        assert time.monotonic() - started >= LIMITS.auth_deadline_s * 0.8


def test_a_replayed_first_frame_does_not_authenticate(lone: tuple[Counter, int]) -> None:
    """The first frame of a connection (the peer's random key) carries no fresh key of ours,
    so a captured one can be replayed: it must leave the connection at the small cap and
    under the deadline."""
    _node, port = lone
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_frame(os.urandom(32)))  # decrypts fine
        sock.settimeout(2)
        assert sock.recv(65536)  # the node answered with its own random key
        sock.sendall(header(LIMITS.max_unauthenticated_frame_bytes + 1))
        assert _closed_by_peer(sock, timeout_s=2.0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_frame(os.urandom(32)))
        started = time.monotonic()
        assert _closed_by_peer(sock, timeout_s=LIMITS.auth_deadline_s + 3)
        assert time.monotonic() - started >= LIMITS.auth_deadline_s * 0.8


def test_pending_connections_are_capped() -> None:
    limits = PortLimits(auth_deadline_s=30.0, max_pending_connections=4)
    (port,) = free_ports(1)
    node = Counter(f"127.0.0.1:{port}", [], limits=limits)
    sockets: list[socket.socket] = []
    try:
        _wait(node._isLeader)
        for _ in range(12):  # more at once than pysyncobj's listen backlog of 5 used to take
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        _wait(lambda: _transport(node).pending_connections() == limits.max_pending_connections)
        time.sleep(0.3)
        closed = sum(_closed_by_peer(sock, timeout_s=0.05) for sock in sockets)
        assert closed == len(sockets) - limits.max_pending_connections
        assert _transport(node).pending_connections() == limits.max_pending_connections
        assert node.add(1, sync=True, timeout=5) == 1
    finally:
        for sock in sockets:
            sock.close()
        node.destroy_synchronous()


def test_junk_does_not_stall_the_tick_thread(lone: tuple[Counter, int]) -> None:
    """100 MB of junk, reconnecting whenever closed, while the node keeps committing."""
    node, port = lone
    total = 100 * 1024 * 1024
    sent = 0
    done = threading.Event()

    def flood() -> None:
        nonlocal sent
        chunk = os.urandom(256 * 1024)
        while sent < total:
            try:
                with socket.create_connection(("127.0.0.1", port)) as sock:
                    sock.sendall(header(total))  # "a 100 MB frame follows"
                    while sent < total:
                        sock.sendall(chunk)
                        sent += len(chunk)
            except OSError:
                continue
        done.set()

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    worst = 0.0
    writes = 0
    while not done.is_set():
        started = time.monotonic()
        node.add(1, sync=True, timeout=5)
        worst = max(worst, time.monotonic() - started)
        writes += 1
    thread.join(timeout=60)
    assert sent >= total
    assert writes > 10
    assert worst < 1.0, worst  # the process test (test_quorum_port_junk) measures tighter


def test_two_guarded_nodes_replicate(tmp_path: Path) -> None:
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    nodes = [
        Counter(addresses[0], [addresses[1]], tmp_path / "a.journal"),
        Counter(addresses[1], [addresses[0]], tmp_path / "b.journal"),
    ]
    try:
        _wait(lambda: any(n._isLeader() for n in nodes))
        assert nodes[0].add(5, sync=True, timeout=5) == 5
        assert nodes[1].add(2, sync=True, timeout=5) == 7
        _wait(lambda: all(n.value == 7 for n in nodes))
        for node in nodes:
            for conn in _transport(node)._connections.values():
                assert isinstance(conn, GuardedTcpConnection)
                assert conn.authenticated
    finally:
        for node in nodes:
            node.destroy_synchronous()


# ---- term and vote durable before a vote is answered -------------------------------------


def test_term_and_vote_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = FileJournal(str(tmp_path / "quorum.journal"))
    try:

        class Conf:
            journalFile = str(tmp_path / "quorum.journal")

        class Fake:
            _SyncObj__raftLog = journal
            _SyncObj__conf = Conf()

        _make_meta_durable(Fake())
        assert isinstance(journal._FileJournal__metaStorer, _DurableMetaStorer)
        synced: list[str] = []
        real_fsync = os.fsync

        def recording_fsync(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", recording_fsync)
        journal.setCurrentTerm(7, "127.0.0.1:1234")
        meta = tmp_path / "quorum.journal.meta"
        assert str(meta) + ".tmp" in synced  # the content, before the rename
        assert str(tmp_path) in synced  # the rename
        synced.clear()
        journal.setRaftCommitIndex(42)  # the once-a-second commit index: no fsync needed
        journal.onOneSecondTimer()
        assert synced == []
        assert pickle.loads(meta.read_bytes())["raftCommitIndex"] == 42
        journal.setCurrentTerm(8, None)  # a new term: durable again
        assert str(meta) + ".tmp" in synced
        journal.setCurrentTerm(8, "127.0.0.1:1234")  # a vote in that term: durable again
        assert synced.count(str(meta) + ".tmp") == 2
        monkeypatch.undo()
        assert pickle.loads(meta.read_bytes())["votedForNodeId"] == "127.0.0.1:1234"
        assert pickle.loads(meta.read_bytes())["currentTerm"] == 8
        assert meta.stat().st_mode & 0o077 == 0
    finally:
        journal._destroy()


def test_a_real_node_stores_its_vote_durably(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    node = Counter(f"127.0.0.1:{port}", [], tmp_path / "quorum.journal")
    try:
        journal = node._SyncObj__raftLog
        assert isinstance(journal._FileJournal__metaStorer, _DurableMetaStorer)
        _wait(node._isLeader)
        meta = pickle.loads((tmp_path / "quorum.journal.meta").read_bytes())
        assert meta["currentTerm"] >= 1
        assert meta["votedForNodeId"] == f"127.0.0.1:{port}"
    finally:
        node.destroy_synchronous()
