"""The Raft transport: the ONLY module that imports pysyncobj (PLATFORM.md §1).

One `SyncObj` per node replicates one `ZNodeTree` (held by a `SyncObjConsumer`, so the
tree is the only thing pickled into snapshots). Every committed `Entry` is applied on
pysyncobj's tick thread, in log order, under `RaftTransport.lock`; the apply listener (the
bridge) is called right there, so watch registration and reads, which take the same lock,
are atomic with respect to applies.

Settings, and why (PLATFORM.md §1.7, "Recommendations"):

* `password=` always (Fernet over every frame): pysyncobj unpickles what arrives on its port,
  so without it the port is remote code execution and its admin commands are open.
* `transportClass=` guarded_port.GuardedTCPTransport: frame lengths checked before
  buffering, linear accumulation, a deadline for authentication, a cap on pending
  connections (pysyncobj's own reader stalls its tick thread on one 100 MB junk frame).
* `bindAddress` = the voter's own host: never 0.0.0.0.
* `appendEntriesUseBatch=False`: sub-millisecond commits instead of ~100 ms.
* `appendEntriesBatchSizeBytes` above every entry's size (`APPEND_ENTRIES_BATCH_BYTES`):
  pysyncobj's chunked transfer of one entry larger than it is broken (a follower unpickles
  a truncated entry).
* election timeout randomized in [t, 2t] with t = `controller.quorum.election.timeout.ms`,
  heartbeats every t/5, `leaderFallbackTimeout` = 4t (a leader cut off from the majority
  steps down after that instead of pysyncobj's 30 s), `connectionRetryTime` 0.3 s.
* journal `<data dir>/quorum.journal` (+ `.meta`) and snapshots `<data dir>/quorum.dump`.
* a voter is `SyncObj("host:port", other voters)`; a learner (not in the voters list) is
  `SyncObj(None, voters)`: it applies everything, never votes, and forwards its writes.

Durability (pysyncobj never fsyncs, §1.4): the journal is an mmap'ed file, so every
appended entry is in the page cache the moment it is written and **survives SIGKILL of the
process (and of every voter at once)**. A tick callback msyncs the journal and fsyncs the
journal, its `.meta`, the snapshot and the data directory every
`controller.quorum.fsync.interval.ms` (1 s). **On power loss or a kernel crash, up to that
interval of acknowledged commits can be lost**, and because a follower acknowledges an
AppendEntries before its fsync, a correlated power loss of a majority can lose a committed
entry. Fsyncing before every acknowledgement would need a patched pysyncobj; we do not.
Term and vote, however, are fsynced before a vote is sent or granted (`_DurableMetaStorer`,
installed before the tick thread starts), so a power loss cannot make a node vote twice in
a term.

Before pysyncobj opens the data dir, `datafiles.check_data_dir` checks the journal, its
meta and the snapshot: a damaged one raises `QuorumDataError` (an OSError) with one line
naming the file and the recovery in docs/metadata-quorum.md.

A voter whose port is taken keeps retrying the bind every second (pysyncobj's
`maxBindRetries=0`; each failed attempt leaks one socket until GC) and stays passive
meanwhile; `is_bound()` tells, and the bridge logs it every 5 s while not ready.

Not implemented: dynamic voter changes (`addNodeToCluster`), leadership transfer, TLS on the
quorum port (Fernet with a PBKDF2 key from the secret, pysyncobj's own scheme).
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
import pickle
import struct
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.journal import FileJournal, MetaStorer

from trafka.log.storage_failure import storage_failed
from trafka.metadata_quorum.config import QuorumConfig
from trafka.metadata_quorum.datafiles import DumpHead, check_data_dir
from trafka.metadata_quorum.guarded_port import GuardedTCPTransport, PortLimits
from trafka.metadata_quorum.port import ApplyListener, ProposalCallback, ProposalFailure
from trafka.metadata_quorum.status import ReplicaState
from trafka.metadata_quorum.tree import (
    MAX_ENTRY_BYTES,
    Entry,
    ErrorCode,
    ErrorResult,
    Result,
    ZNodeTree,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
JOURNAL_FILE = "quorum.journal"
DUMP_FILE = "quorum.dump"
APPEND_ENTRIES_BATCH_BYTES = 2 * MAX_ENTRY_BYTES
"""pysyncobj sends an entry at least this long (its command, pickled) in chunks, and marks
the last chunk by the command's length although it sends the pickled entry (longer: bytes
above 0x7f take two bytes in protocol 2), so the follower unpickles a truncated entry
(EOFError in `_onTick`) and never appends it: every node stalled on such a write. The bridge
proposes nothing longer than MAX_ENTRY_BYTES (the command adds a few bytes to the entry), so
the chunked path is never taken. One AppendEntries message carries up to this many bytes of
entries."""


for _failure in ProposalFailure:  # our enum mirrors pysyncobj's FAIL_REASON values
    assert getattr(FAIL_REASON, _failure.name) == _failure.value, _failure


class _TreeConsumer(SyncObjConsumer):  # type: ignore[misc]
    """Holds the tree. Attributes set before `SyncObjConsumer.__init__` are not snapshotted."""

    def __init__(self, lock: threading.Lock, listener: ApplyListener) -> None:
        self._tree_lock = lock
        self._listener = listener
        super().__init__()
        self.tree = ZNodeTree()  # the replicated state: the only snapshotted attribute

    @replicated  # type: ignore[untyped-decorator]
    def apply_entry(self, entry: object) -> Result:
        with self._tree_lock:
            if not isinstance(entry, Entry):
                return ErrorResult(ErrorCode.MARSHALLING_ERROR, "")
            applied = self.tree.apply(entry)
            try:
                self._listener(entry, applied)
            except Exception:  # the tick thread must survive a listener bug
                logger.exception("metadata quorum apply listener failed")
            return applied.result


class RaftTransport:
    """One node's pysyncobj instance. Construct it on the trio main thread (§1.7 #7)."""

    def __init__(
        self,
        config: QuorumConfig,
        listener: ApplyListener,
        *,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.lock = threading.Lock()
        self._consumer = _TreeConsumer(self.lock, listener)
        self._journal_path = str(config.data_dir / JOURNAL_FILE)
        self._dump_path = str(config.data_dir / DUMP_FILE)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        # A damaged journal, meta or snapshot: one line naming the file (QuorumDataError).
        head = check_data_dir(
            Path(self._journal_path), Path(self._journal_path + ".meta"), Path(self._dump_path)
        )
        _write_voters_file(config)
        align_journal_with_snapshot(Path(self._journal_path), Path(self._dump_path), head)
        self._fsync_interval_s = config.fsync_interval_ms / 1000
        self._next_fsync = 0.0
        self._caught_up_monotonic: dict[str, float] = {}
        self._started_monotonic = time.monotonic()
        self._single_voter = len(config.voters) == 1 and config.is_voter
        election_s = config.election_timeout_ms / 1000
        me = config.self_voter
        conf = SyncObjConf(
            password=config.secret,
            bindAddress=me.address if me else None,
            appendEntriesUseBatch=False,
            # Above any entry the bridge proposes (tree.MAX_ENTRY_BYTES): pysyncobj's chunked
            # transfer of one large entry truncates it on the follower (EOFError).
            appendEntriesBatchSizeBytes=APPEND_ENTRIES_BATCH_BYTES,
            raftMinTimeout=election_s,
            raftMaxTimeout=2 * election_s,
            appendEntriesPeriod=election_s / 5,
            connectionTimeout=max(2 * election_s, 1.0),
            connectionRetryTime=config.connection_retry_ms / 1000,
            leaderFallbackTimeout=4 * election_s,
            journalFile=self._journal_path,
            fullDumpFile=self._dump_path,
            commandsQueueSize=10_000,
            onReady=on_ready,
            dynamicMembershipChange=False,
        )
        others = [v.address for v in config.voters if v is not me]
        self.port_limits = PortLimits(auth_deadline_s=conf.connectionTimeout)
        transport_class = functools.partial(
            GuardedTCPTransport, limits=self.port_limits, before_start=_make_meta_durable
        )
        with warnings.catch_warnings():
            # pysyncobj's MetaStorer.getMeta reads `.meta` with an unclosed open(): on a
            # restart that raises a ResourceWarning right here (refcount-freed file).
            warnings.simplefilter("ignore", ResourceWarning)
            self._syncobj = SyncObj(
                me.address if me else None,
                others,
                conf,
                consumers=[self._consumer],
                transportClass=transport_class,
            )
        if self._single_voter:
            # Alone there is no vote to wait for: stand at the first tick, not after an
            # election timeout (1-2 s of every one-node start, issue 19's T1). Kafka's sole
            # voter also elects itself at once.
            self._syncobj._SyncObj__raftElectionDeadline = 0.0
        self._syncobj.addOnTickCallback(self._on_tick)

    # -- writes and reads --------------------------------------------------------------

    def propose(self, entry: Entry, callback: ProposalCallback) -> None:
        """Queue an entry; `callback` runs later on the tick thread (never on the caller's)."""

        def on_done(result: Any, error: int) -> None:
            if error == FAIL_REASON.SUCCESS:
                callback(result, None)
            else:
                callback(None, ProposalFailure(error))

        self._consumer.apply_entry(entry, callback=on_done)

    def read(self, reader: Callable[[ZNodeTree], T]) -> T:
        """Run `reader` on the local replica, atomically with respect to applies."""
        with self.lock:
            return reader(self._consumer.tree)

    # -- state -------------------------------------------------------------------------

    def is_ready(self) -> bool:
        return bool(self._syncobj.isReady())

    def is_leader(self) -> bool:
        return bool(self._syncobj._isLeader())

    def is_bound(self) -> bool:
        """False while a voter's quorum port is not bound yet (pysyncobj retries every 1 s)."""
        try:
            return bool(self._syncobj._SyncObj__transport.ready)
        except AttributeError:
            return True

    def has_quorum(self) -> bool:
        return bool(self._syncobj.hasQuorum)

    def leader_id(self) -> int:
        leader = self._syncobj._getLeader()
        if leader is None:
            return -1
        voter = self.config.voter_for_address(getattr(leader, "address", str(leader)))
        return voter.node_id if voter else -1

    def term(self) -> int:
        return int(self._syncobj.raftCurrentTerm)

    def commit_index(self) -> int:
        return int(self._syncobj.raftCommitIndex)

    def last_applied(self) -> int:
        return int(self._syncobj.raftLastApplied)

    def raw_status(self) -> dict[str, Any]:
        return dict(self._syncobj.getStatus())

    def voter_states(self, now_ms: int) -> tuple[ReplicaState, ...]:
        """Per-voter log end offsets and fetch times; known only on the leader (-1 elsewhere)."""
        leader_id = self.leader_id()
        is_leader = self.is_leader()
        mono_now = time.monotonic()
        try:
            match = dict(self._syncobj._SyncObj__raftMatchIndex)
            response = dict(self._syncobj._SyncObj__lastResponseTime)
            own_end = int(self._syncobj._SyncObj__getCurrentLogIndex())
        except (AttributeError, RuntimeError):
            match, response, own_end = {}, {}, -1
        by_address = {getattr(node, "address", str(node)): node for node in match}
        caught_up = dict(self._caught_up_monotonic)

        def wall(mono: float | None) -> int:
            return -1 if mono is None else int(now_ms - (mono_now - mono) * 1000)

        states: list[ReplicaState] = []
        me = self.config.self_voter
        for voter in self.config.voters:
            status = "Leader" if voter.node_id == leader_id else "Follower"
            if voter is me and is_leader:
                states.append(ReplicaState(voter.node_id, own_end, now_ms, now_ms, status))
                continue
            node = by_address.get(voter.address)
            if not is_leader or node is None:
                states.append(ReplicaState(voter.node_id, -1, -1, -1, status))
                continue
            states.append(
                ReplicaState(
                    voter.node_id,
                    int(match.get(node, -1)),
                    wall(response.get(node)),
                    wall(caught_up.get(voter.address)),
                    status,
                )
            )
        return tuple(states)

    # -- tick thread: fsync policy and caught-up times -------------------------------------

    def _on_tick(self) -> None:
        now = time.monotonic()
        if self._single_voter and self.is_leader():
            # Alone, nobody's reply wakes the poller: a new entry would wait for the next
            # tick (autoTickPeriod, 50 ms) to commit. Wake it now while entries are pending.
            try:
                if self._syncobj.raftCommitIndex < self._syncobj._SyncObj__getCurrentLogIndex():
                    self._syncobj._SyncObj__pipeNotifier.notify()
            except (AttributeError, OSError):
                pass
        if self.is_leader():
            try:
                commit = int(self._syncobj.raftCommitIndex)
                for node, index in list(self._syncobj._SyncObj__raftMatchIndex.items()):
                    if index >= commit:
                        self._caught_up_monotonic[getattr(node, "address", str(node))] = now
            except (AttributeError, RuntimeError):
                pass
        if now >= self._next_fsync:
            self._next_fsync = now + self._fsync_interval_s
            self.sync_to_disk()

    def sync_to_disk(self) -> None:
        """msync the journal, then fsync the journal, its meta, the snapshot and the dir."""
        try:
            self._syncobj._SyncObj__raftLog.flush()
        except (AttributeError, ValueError, OSError):
            pass
        for path in (self._journal_path, self._journal_path + ".meta", self._dump_path):
            _fsync_path(path, os.O_RDONLY)
        _fsync_path(str(self.config.data_dir), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def force_snapshot(self) -> None:
        """Ask pysyncobj to write `quorum.dump` and compact the journal at its next tick."""
        self._syncobj.forceLogCompaction()

    def destroy(self) -> None:
        """Stop the tick thread and close the port; the final state is synced to disk."""
        self._syncobj.destroy_synchronous()
        self.sync_to_disk()


class _DurableMetaStorer(MetaStorer):  # type: ignore[misc]
    """pysyncobj's `.meta` writer (tmp file + rename) with the fsyncs it lacks.

    `FileJournal.setCurrentTerm` stores term and vote synchronously before a vote request or
    grant is sent, but without fsync: after a power loss the node could forget its vote and
    grant a second one in the same term (two leaders). When term or vote differ from the
    last stored ones, this storer fsyncs the tmp file and the directory before returning, so
    the vote is on disk before it is answered. pysyncobj's once-a-second commit-index store
    (same term and vote) is written as before, without fsync on the tick thread: the commit
    index is recomputed after a restart, and `sync_to_disk` fsyncs the file every interval.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._durable: tuple[object, object] | None = None

    def storeMeta(self, meta: dict[str, Any]) -> None:
        path = self.getPath()
        tmp = path + ".tmp"
        vote = (meta.get("currentTerm"), meta.get("votedForNodeId"))
        durable = vote != self._durable
        data = pickle.dumps(meta)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as error:
            # a vote that cannot be stored must not be answered: the node halts (Kafka halts
            # when its metadata log dir fails); in-process the error propagates
            storage_failed(f"Shutdown broker because the metadata quorum's dir failed: {error}")
            raise
        if durable:
            _fsync_path(os.path.dirname(path) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            self._durable = vote


class _PreallocatedJournalFile:
    """pysyncobj's journal file (`ResizableFile`: an mmap grown with `mmap.resize`) with its
    disk blocks allocated before they are mapped.

    `mmap.resize` extends the file sparsely, so on a full file system the first store into a
    new page raised SIGBUS and killed the node without a word. Here every growth is first
    allocated with `posix_fallocate` (the same size `ResizableFile` is about to map), and so
    is an existing file's whole length when the journal opens: a full disk becomes an
    OSError (ENOSPC) before anything is mapped, and the node halts with one line (Kafka
    halts when its metadata log dir fails); run in-process, the OSError propagates.
    """

    def __init__(self, inner: Any, path: str) -> None:
        self._inner = inner
        self._path = path
        self._fd = os.open(path, os.O_RDWR)
        self._allocated = 0
        self._allocate(self._mapped_size())

    def _mapped_size(self) -> int:
        return len(self._inner._ResizableFile__mm)  # the mapping (mmap.size() is the file's)

    def _allocate(self, size: int) -> None:
        if size <= self._allocated:
            return
        try:
            os.posix_fallocate(self._fd, 0, size)
        except OSError as error:
            storage_failed(
                f"Shutdown broker because the metadata quorum's journal {self._path} cannot "
                f"grow to {size} bytes: {error}"
            )
            raise
        self._allocated = size

    def write(self, offset: int, values: bytes) -> None:
        end = offset + len(values)
        mapped = self._mapped_size()
        if end > mapped:
            size = max(int(mapped * 2.0), end)  # ResizableFile's resizeFactor
            self._allocate(size)
            # map the allocated size now: ResizableFile grows the mapping only when the
            # *file* is too short, and the allocation made it long enough already
            self._inner._ResizableFile__mm.resize(size)
        self._inner.write(offset, values)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self._inner.read(offset, size))

    def flush(self) -> None:
        self._inner.flush()

    def _destroy(self) -> None:
        try:
            self._inner._destroy()
        finally:
            os.close(self._fd)


def _make_meta_durable(syncobj: Any) -> None:
    """Called inside `SyncObj.__init__` (after the journal opened, before the tick thread
    starts, so before any vote): swap the journal's meta storer for the durable one, and its
    file for one whose blocks are allocated before they are mapped (no SIGBUS on a full
    disk)."""
    journal = syncobj._SyncObj__raftLog
    if isinstance(journal, FileJournal):
        plain = journal._FileJournal__metaStorer
        journal._FileJournal__metaStorer = _DurableMetaStorer(plain.getPath())
        journal._FileJournal__journalFile = _PreallocatedJournalFile(
            journal._FileJournal__journalFile, syncobj._SyncObj__conf.journalFile
        )


def _fsync_path(path: str, flags: int) -> None:
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------
# Offline, read-only access to a data dir (ktool quorum ... --data-dir)

VOTERS_FILE = "quorum.voters"


def align_journal_with_snapshot(
    journal_path: Path, dump_path: Path, head: DumpHead | None = None
) -> bool:
    """Make the journal start at the snapshot's last two entries, keeping what follows.

    pysyncobj writes `quorum.dump` and only on a later tick drops the journal entries it
    covers. If the process stops in between, the next start finds a journal that does not
    begin with the snapshot's (previous, last) entries, and pysyncobj then *clears the whole
    journal* (`__loadDumpFile`): every committed entry after the snapshot is gone (a lone
    voter loses acknowledged writes). We finish the interrupted compaction first. Returns
    True if the journal was rewritten.
    """
    if not journal_path.exists() or not dump_path.exists():
        return False
    if head is not None:
        last, previous = head.last, head.previous
    else:
        try:
            with gzip.open(dump_path, "rb") as handle:
                data = pickle.load(handle)
            last, previous = data[1], data[2]
        except (OSError, EOFError, pickle.UnpicklingError, IndexError, TypeError) as error:
            logger.warning("cannot read %s (%s); pysyncobj will decide", dump_path, error)
            return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # pysyncobj's unclosed .meta read
        journal = FileJournal(str(journal_path))
    try:
        count = len(journal)
        if count >= 2 and journal[0] == previous and journal[1] == last:
            return False
        for index in range(count - 1):
            if journal[index] == previous and journal[index + 1] == last:
                journal.deleteEntriesTo(index)
                journal.flush()
                logger.warning(
                    "finished an interrupted journal compaction: dropped %d entries covered "
                    "by the snapshot, kept %d after it",
                    index,
                    count - index - 2,
                )
                return True
        logger.warning(
            "the journal does not contain the snapshot's last entries: pysyncobj will reset "
            "it to the snapshot (entries after it come back from the other voters, if any)"
        )
        return False
    finally:
        journal._destroy()


def _write_voters_file(config: QuorumConfig) -> None:
    """`<data dir>/quorum.voters`: the voters this node ran with, for offline tools."""
    text = ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in config.voters) + "\n"
    path = config.data_dir / VOTERS_FILE
    try:
        if path.exists() and path.read_text() == text:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        logger.warning("cannot write %s", path)


_JOURNAL_FIRST_RECORD_OFFSET = 24 + 8 + 4 + 4  # app name, app version, format, last offset
_COMMAND_REGULAR = 0


@dataclass(frozen=True, slots=True)
class DataDirState:
    tree: ZNodeTree
    term: int
    commit_index: int
    snapshot_index: int
    voters: str  # `1@host:port,...` as the node last ran with, "" if unknown


def load_data_dir(data_dir: Path) -> DataDirState:
    """Rebuild a node's tree from its snapshot + journal without starting pysyncobj.

    Read-only: nothing is written, no port is opened. Entries are applied up to the commit
    index stored in `quorum.journal.meta` (written once a second, so the last second of
    commits may be missing). The files are unpickled: point this only at a data dir you
    trust (it is the node's own state, which the node itself unpickles at start).
    Journal layout (pysyncobj 0.3.17 FileJournal): a 40-byte header whose last 4 bytes are
    the end offset (u32 LE), then records `size u32 | idx u64 | term u64 | command | size`.
    """
    # a damaged file is one line (QuorumDataError, an OSError: ktool prints it as such)
    check_data_dir(
        data_dir / JOURNAL_FILE, data_dir / (JOURNAL_FILE + ".meta"), data_dir / DUMP_FILE
    )
    tree = ZNodeTree()
    snapshot_index = 0
    dump = data_dir / DUMP_FILE
    if dump.exists():
        with gzip.open(dump, "rb") as handle:
            data = pickle.load(handle)
        consumer_state = data[0][1]
        tree = consumer_state["tree"]
        snapshot_index = int(data[1][1])
    meta: dict[str, Any] = {}
    meta_path = data_dir / (JOURNAL_FILE + ".meta")
    if meta_path.exists():
        meta = pickle.loads(meta_path.read_bytes())
    commit_index = int(meta.get("raftCommitIndex", 0))
    journal_path = data_dir / JOURNAL_FILE
    if journal_path.exists():
        raw = journal_path.read_bytes()
        end = struct.unpack_from("<I", raw, _JOURNAL_FIRST_RECORD_OFFSET - 4)[0]
        offset = _JOURNAL_FIRST_RECORD_OFFSET
        while offset < min(end, len(raw)):
            (size,) = struct.unpack_from("<I", raw, offset)
            idx, _term = struct.unpack_from("<QQ", raw, offset + 4)
            command = raw[offset + 20 : offset + 4 + size]
            offset += size + 8
            if idx <= snapshot_index or idx > commit_index or not command:
                continue
            if command[0] != _COMMAND_REGULAR:
                continue
            call = pickle.loads(command[1:])
            if isinstance(call, tuple) and len(call) >= 2 and call[1]:
                entry = call[1][0]
                if isinstance(entry, Entry):
                    tree.apply(entry)
    voters_path = data_dir / VOTERS_FILE
    voters = voters_path.read_text().strip() if voters_path.exists() else ""
    return DataDirState(
        tree=tree,
        term=int(meta.get("currentTerm", 0)),
        commit_index=commit_index,
        snapshot_index=snapshot_index,
        voters=voters,
    )
