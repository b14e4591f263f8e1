"""The trio bridge over real pysyncobj instances inside the test process (loopback)."""

from __future__ import annotations

import gzip
import pickle
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio
from pysyncobj.journal import FileJournal

from tests.support.ports import free_ports
from trafka.metadata_quorum.bridge import (
    MetadataQuorum,
    MultiFailedError,
    SessionEvent,
    SessionEventKind,
    open_metadata_quorum,
)
from trafka.metadata_quorum.config import (
    QuorumConfig,
    QuorumConfigError,
    Voter,
    config_from_properties,
    parse_voters,
)
from trafka.metadata_quorum.local import LocalTransport
from trafka.metadata_quorum.transport import (
    RaftTransport,
    align_journal_with_snapshot,
    load_data_dir,
)
from trafka.metadata_quorum.tree import (
    BadVersionError,
    Check,
    Create,
    CreateResult,
    EventType,
    NodeExistsError,
    NoNodeError,
    SetData,
    WatchEvent,
    ZNodeTree,
)

SECRET = "test-secret"


def make_config(
    node_id: int, voters: tuple[Voter, ...], data_dir: Path, **overrides: object
) -> QuorumConfig:
    settings: dict[str, object] = {
        "election_timeout_ms": 200,
        "session_timeout_ms": 1500,
        "heartbeat_interval_ms": 300,
        "request_timeout_ms": 10_000,
        "attempt_timeout_ms": 1000,
        "fsync_interval_ms": 200,
    }
    settings.update(overrides)
    return QuorumConfig(node_id, voters, data_dir / f"node-{node_id}", SECRET, **settings)  # type: ignore[arg-type]


async def next_event(quorum: MetadataQuorum, timeout_s: float = 5.0) -> WatchEvent | SessionEvent:
    with trio.fail_after(timeout_s):
        return await quorum.events().receive()


@pytest.fixture(params=["raft", "local"])
async def single(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MetadataQuorum]:
    """The contract suite runs against the real transport and the in-memory one."""
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100)
    factory = RaftTransport if request.param == "raft" else LocalTransport
    async with open_metadata_quorum(config, transport_factory=factory) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        yield quorum


async def test_single_voter_reads_writes_and_watches(single: MetadataQuorum) -> None:
    quorum = single
    assert await quorum.create("/brokers") == "/brokers"
    assert quorum.children_local("/brokers", watch=True) == []
    path = await quorum.create("/brokers/1", b"reg", ephemeral=True)
    assert path == "/brokers/1"
    assert await next_event(quorum) == WatchEvent(
        EventType.NODE_CHILDREN_CHANGED, "/brokers", quorum.last_zxid()
    )
    data, stat = await quorum.get("/brokers/1", watch=True)
    assert data == b"reg" and stat.ephemeral_owner == quorum.session_id
    with pytest.raises(NodeExistsError):
        await quorum.create("/brokers/1")
    with pytest.raises(BadVersionError):
        await quorum.set_data("/brokers/1", b"x", version=3)
    new_stat = await quorum.set_data("/brokers/1", b"x", version=0)
    assert new_stat.version == 1
    event = await next_event(quorum)
    assert isinstance(event, WatchEvent) and event.type == EventType.NODE_DATA_CHANGED
    with pytest.raises(NoNodeError):
        await quorum.delete("/nope")
    seq = await quorum.create("/brokers/", b"", sequential=True)
    assert seq.startswith("/brokers/0000")
    status = quorum.status()
    assert status.leader_id == 1 and status.is_leader and status.high_watermark > 0
    assert status.voters[0].status == "Leader"


async def test_multi_through_the_bridge(single: MetadataQuorum) -> None:
    quorum = single
    results = await quorum.multi([Create("/a"), Create("/a/b", b"1"), SetData("/a/b", b"2")])
    assert results[0] == CreateResult("/a")
    with pytest.raises(MultiFailedError) as failure:
        await quorum.multi([Create("/a/c"), Check("/a/b", 0)])
    assert failure.value.index == 1
    assert quorum.exists_local("/a/c") is None
    assert (await quorum.get("/a/b"))[0] == b"2"


async def test_create_recursive_and_walk(single: MetadataQuorum) -> None:
    await single.create_recursive("/x/y/z", b"leaf")
    await single.create_recursive("/x/y/z", b"leaf")
    assert [p for p, _, _ in single.walk_local("/x")] == ["/x", "/x/y", "/x/y/z"]


@pytest.mark.slow
async def test_three_voters_in_process(tmp_path: Path) -> None:
    ports = free_ports(3)
    voters = tuple(Voter(i + 1, "127.0.0.1", port) for i, port in enumerate(ports))
    async with AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(open_metadata_quorum(make_config(i, voters, tmp_path)))
            for i in (1, 2, 3)
        ]
        with trio.fail_after(15):
            for node in nodes:
                await node.wait_ready()
        await nodes[1].create("/t")
        for index in range(20):
            await nodes[index % 3].create(f"/t/n{index}", str(index).encode())
        for node in nodes:
            await node.sync()
        # Heartbeats keep committing; replicas agree whenever they applied the same prefix.
        with trio.fail_after(10):
            while len({(node.last_zxid(), node.tree_digest()) for node in nodes}) != 1:
                await trio.sleep(0.01)
        assert nodes[2].children_local("/t") == sorted(f"n{i}" for i in range(20))


async def test_a_single_voter_leads_without_waiting_for_an_election_timeout(
    tmp_path: Path,
) -> None:
    """Alone there is no vote to wait for (issue 19's T1): with a 5 s election timeout
    (randomized in [5, 10] s) the voter must lead and commit well before it, on a first
    start and on a restart from its journal."""
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=5000)
    for _ in range(2):
        started = trio.current_time()
        async with open_metadata_quorum(config) as quorum:
            with trio.fail_after(4):
                await quorum.wait_ready()
                await quorum.create_recursive("/started")
                await quorum.create("/started/", b"", sequential=True)
            assert quorum.status().is_leader
        assert trio.current_time() - started < 4


async def test_snapshot_then_restart_keeps_the_tree(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100)
    dump = config.data_dir / "quorum.dump"
    async with open_metadata_quorum(config) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        await quorum.create("/kept", b"before")
        quorum.force_snapshot()
        with trio.fail_after(10):
            while not dump.exists():
                await trio.sleep(0.02)
        await quorum.create("/kept/after", b"after")  # in the journal, after the snapshot
        expected = quorum.walk_local("/kept")
    async with open_metadata_quorum(config) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        await quorum.sync()
        assert quorum.walk_local("/kept") == expected
    assert load_data_dir(config.data_dir).snapshot_index > 0


async def test_a_full_event_channel_reports_lost_events(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(
        1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100, watch_queue_size=2
    )
    async with open_metadata_quorum(config) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        for name in ("a", "b", "c", "d"):
            assert quorum.exists_local(f"/{name}", watch=True) is None
        await quorum.multi([Create(f"/{name}") for name in ("a", "b", "c", "d")])
        received = [await next_event(quorum), await next_event(quorum)]
        assert [e.path for e in received if isinstance(e, WatchEvent)] == ["/a", "/b"]
        await quorum.create("/e")  # the next delivery first reports the loss
        assert quorum.exists_local("/f", watch=True) is None
        await quorum.create("/f")
        lost = await next_event(quorum)
        assert isinstance(lost, SessionEvent) and lost.kind == SessionEventKind.EVENTS_LOST


async def test_chroot_prefixes_every_path(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(
        1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100, chroot="/kafka/a"
    )
    async with open_metadata_quorum(config) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        assert quorum.children_local("/", watch=True) == []
        assert await quorum.create("/q", b"") == "/q"
        assert await quorum.create("/q/n-", sequential=True) == "/q/n-0000000000"
        assert await next_event(quorum) == WatchEvent(
            EventType.NODE_CHILDREN_CHANGED, "/", quorum.last_zxid() - 1
        )
        server_paths = quorum.read_local(lambda tree: [p for p, _, _ in tree.walk("/")])
        assert server_paths == ["/", "/kafka", "/kafka/a", "/kafka/a/q", "/kafka/a/q/n-0000000000"]
        with pytest.raises(NoNodeError) as missing:
            await quorum.delete("/nothing")
        assert missing.value.path == "/nothing"


@pytest.mark.slow
# pysyncobj's TcpServer leaks the socket of each failed bind attempt (closed by GC).
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_taken_quorum_port_is_retried_until_free(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path, election_timeout_ms=100)
    transport = RaftTransport(config, lambda entry, applied: None)
    try:
        assert not transport.is_bound()
        squatter.close()
        with trio.fail_after(10):
            while not (transport.is_bound() and transport.is_leader()):
                await trio.sleep(0.05)
    finally:
        squatter.close()
        transport.destroy()


def test_voters_parsing_and_secret_rules(tmp_path: Path) -> None:
    assert parse_voters("1@localhost:9093, 2@[::1]:9094") == (
        Voter(1, "localhost", 9093),
        Voter(2, "::1", 9094),
    )
    for bad in ("", "x@h:1", "1@h", "1@h:1,1@h:2", "1@h:99999"):
        with pytest.raises(QuorumConfigError):
            parse_voters(bad)
    with pytest.raises(QuorumConfigError):
        config_from_properties(
            {"controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2"},
            node_id=1,
            data_dir=tmp_path,
        )
    # A learner of a one-voter quorum cannot make up the secret: it must be the voter's.
    with pytest.raises(QuorumConfigError, match="node 2 is a learner of the quorum of voter 1"):
        config_from_properties(
            {"controller.quorum.voters": "1@127.0.0.1:1"}, node_id=2, data_dir=tmp_path / "2"
        )
    assert not (tmp_path / "2" / "quorum.secret").exists()
    learner = config_from_properties(
        {"controller.quorum.voters": "1@127.0.0.1:1", "controller.quorum.secret": "shared"},
        node_id=2,
        data_dir=tmp_path / "2",
    )
    assert learner.secret == "shared" and not learner.is_voter and learner.self_voter is None
    one = config_from_properties({}, node_id=1, data_dir=tmp_path)
    again = config_from_properties({}, node_id=1, data_dir=tmp_path)
    assert one.secret == again.secret and len(one.secret) > 20
    assert (tmp_path / "quorum.secret").stat().st_mode & 0o077 == 0
    assert one.session_timeout_ms == 9000 and one.heartbeat_interval_ms == 2000


def _write_journal(path: Path, entries: list[tuple[bytes, int, int]]) -> None:
    journal = FileJournal(str(path))
    for entry in entries:
        journal.add(*entry)
    journal._destroy()


def _read_journal(path: Path) -> list[tuple[bytes, int, int]]:
    journal = FileJournal(str(path))
    try:
        return [journal[i] for i in range(len(journal))]
    finally:
        journal._destroy()


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_an_interrupted_compaction_is_finished_before_start(tmp_path: Path) -> None:
    """The snapshot covers entries 1-3, the process died before the journal was compacted:
    pysyncobj alone would clear the journal and lose entries 4-5."""
    entries = [(bytes([1]), 1, 1)] + [(bytes([0]) + b"cmd%d" % i, i, 1) for i in range(2, 6)]
    journal_path, dump_path = tmp_path / "quorum.journal", tmp_path / "quorum.dump"
    _write_journal(journal_path, entries)
    with gzip.open(dump_path, "wb") as handle:
        pickle.dump(([{}, {"tree": ZNodeTree()}], entries[2], entries[1], set()), handle)
    assert align_journal_with_snapshot(journal_path, dump_path)
    assert _read_journal(journal_path) == entries[1:]
    assert not align_journal_with_snapshot(journal_path, dump_path)  # already aligned
    assert _read_journal(journal_path) == entries[1:]


async def test_committed_writes_report_their_latency(single: MetadataQuorum) -> None:
    latencies: list[float] = []
    single.commit_observer = latencies.append
    await single.create("/timed")
    with pytest.raises(NodeExistsError):
        await single.create("/timed")  # committed too: an answer from the tree, not a failure
    assert len(latencies) == 2
    assert all(0 <= latency < 10_000 for latency in latencies)
