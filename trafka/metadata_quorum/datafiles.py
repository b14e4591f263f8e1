"""Start-up checks of a quorum data dir: a damaged file is one line naming it, not a traceback.

pysyncobj 0.3.17 reads its files without checking them: a truncated or garbled
`quorum.journal` dies in `struct.unpack` (a traceback) or, worse, loads garbage; a garbled
`quorum.journal.meta` is silently read as empty (term 0, no vote: the node may vote twice in
a term); a garbled `quorum.dump` is logged and skipped, after which the node runs on a journal
that no longer holds what the snapshot covered. `check_data_dir` reads all three before
pysyncobj does and raises `QuorumDataError` with one line: which file, what is wrong, where
the recovery is documented (docs/metadata-quorum.md, "Recovering a damaged quorum data
dir"). `QuorumDataError` is an `OSError`, so `knode` reports it as
`knode: error: cannot start the metadata quorum: damaged ...` and exits with status 2.

Formats (pysyncobj 0.3.17):

* journal: a 40-byte header (`PYSYNCOBJ` padded to 24 bytes, the version in 8, format u32 LE
  = 1, end offset u32 LE), then records `size u32 | idx u64 | term u64 | command | size u32`
  up to the end offset; indexes are consecutive, terms never decrease; a command is one type
  byte (0 = regular: a pickled call) and its payload.
* meta: a pickled dict (`currentTerm` int, `votedForNodeId` str or None,
  `raftCommitIndex` int).
* dump: gzip of a pickled `(state, last entry, previous entry, cluster)`, the entries being
  `(command, idx, term)`.

The files are unpickled: they are the node's own state, which pysyncobj unpickles anyway.
"""

from __future__ import annotations

import gzip
import pickle
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECOVERY = 'see docs/metadata-quorum.md, "Recovering a damaged quorum data dir"'

JOURNAL_HEADER_SIZE = 24 + 8 + 4 + 4
_JOURNAL_NAME = b"PYSYNCOBJ"
_JOURNAL_FORMAT = 1
_RECORD_HEAD = struct.Struct("<IQQ")  # size, idx, term
_SIZE = struct.Struct("<I")
_COMMAND_REGULAR = 0
_COMMAND_TYPES = frozenset(
    range(4)
)  # pysyncobj's _COMMAND_TYPE: REGULAR, NO_OP, MEMBERSHIP, VERSION


class QuorumDataError(OSError):
    """A quorum data file that cannot be used; the message is one line."""


def _damaged(kind: str, path: Path, problem: str) -> QuorumDataError:
    return QuorumDataError(f"damaged quorum {kind} {path}: {problem}; {RECOVERY}")


@dataclass(frozen=True, slots=True)
class DumpHead:
    """What the snapshot covers: its last two entries `(command, idx, term)`."""

    last: tuple[Any, ...]
    previous: tuple[Any, ...]


def check_meta(path: Path) -> dict[str, Any]:
    """The meta dict, or QuorumDataError. A missing file is an empty dict (a new node)."""
    if not path.exists():
        return {}
    try:
        raw = path.read_bytes()
        meta = pickle.loads(raw)
    except (
        OSError,
        EOFError,
        ValueError,
        TypeError,
        pickle.UnpicklingError,
        AttributeError,
        ImportError,
        IndexError,
        KeyError,
        MemoryError,
    ) as error:
        raise _damaged("meta file", path, f"not readable ({type(error).__name__})") from None
    if not isinstance(meta, dict):
        raise _damaged("meta file", path, f"holds a {type(meta).__name__}, not a dict")
    term = meta.get("currentTerm", 0)
    voted = meta.get("votedForNodeId")
    commit = meta.get("raftCommitIndex", 1)
    if not isinstance(term, int) or term < 0:
        raise _damaged("meta file", path, f"bad currentTerm {term!r}"[:200])
    if voted is not None and not isinstance(voted, str):
        raise _damaged("meta file", path, f"bad votedForNodeId {voted!r}"[:200])
    if not isinstance(commit, int) or commit < 0:
        raise _damaged("meta file", path, f"bad raftCommitIndex {commit!r}"[:200])
    return meta


@dataclass(frozen=True, slots=True)
class JournalSummary:
    entries: int
    first_index: int  # 0 when empty


def check_journal(path: Path) -> JournalSummary:
    """Walk every record, or raise QuorumDataError."""
    if not path.exists():
        return JournalSummary(0, 0)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise _damaged("journal", path, f"not readable ({error.strerror})") from None
    if len(raw) < JOURNAL_HEADER_SIZE:
        raise _damaged("journal", path, f"{len(raw)} bytes, shorter than its header")
    if not raw.startswith(_JOURNAL_NAME):
        raise _damaged("journal", path, "no PYSYNCOBJ header")
    fmt, end = struct.unpack_from("<II", raw, 24 + 8)
    if fmt != _JOURNAL_FORMAT:
        raise _damaged("journal", path, f"unknown format {fmt}")
    if not JOURNAL_HEADER_SIZE <= end <= len(raw):
        raise _damaged("journal", path, f"end offset {end} outside the file ({len(raw)} bytes)")
    offset = JOURNAL_HEADER_SIZE
    count = 0
    first_index = 0
    previous: tuple[int, int] | None = None
    while offset < end:
        where = f"record {count + 1} at byte {offset}"
        if offset + _RECORD_HEAD.size > end:
            raise _damaged("journal", path, f"{where} is cut short")
        size, idx, term = _RECORD_HEAD.unpack_from(raw, offset)
        if size < 16 or offset + 4 + size + 4 > end:
            raise _damaged("journal", path, f"{where} runs past the end ({size} bytes)")
        (trailer,) = _SIZE.unpack_from(raw, offset + 4 + size)
        if trailer != size:
            raise _damaged("journal", path, f"{where}: its two size fields differ")
        if previous is not None and (idx != previous[0] + 1 or term < previous[1]):
            raise _damaged(
                "journal",
                path,
                f"{where}: entry {idx} term {term} after entry {previous[0]} term {previous[1]}",
            )
        command = raw[offset + 20 : offset + 4 + size]
        if not command or command[0] not in _COMMAND_TYPES:
            raise _damaged("journal", path, f"{where}: unknown command type")
        if command[0] == _COMMAND_REGULAR:
            try:
                pickle.loads(command[1:])
            except Exception as error:  # any unpickling failure is damage
                raise _damaged(
                    "journal",
                    path,
                    f"{where}: entry {idx} does not decode ({type(error).__name__})",
                ) from None
        previous = (idx, term)
        first_index = first_index or idx
        offset += size + 8
        count += 1
    return JournalSummary(count, first_index)


def check_dump(path: Path) -> DumpHead | None:
    """The snapshot's last two entries, or QuorumDataError; None if there is no snapshot."""
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rb") as handle:
            data = pickle.load(handle)
    except (
        OSError,
        EOFError,
        zlib.error,
        ValueError,
        TypeError,
        pickle.UnpicklingError,
        AttributeError,
        ImportError,
        IndexError,
        KeyError,
        MemoryError,
    ) as error:
        raise _damaged("snapshot", path, f"not readable ({type(error).__name__})") from None
    if not (isinstance(data, tuple) and len(data) == 4):
        raise _damaged("snapshot", path, "not a (state, last, previous, cluster) tuple")
    state, last, previous, _cluster = data
    for name, entry in (("last", last), ("previous", previous)):
        if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[1], int)):
            raise _damaged("snapshot", path, f"bad {name} entry")
    if not (
        isinstance(state, list)
        and len(state) >= 2
        and isinstance(state[1], dict)
        and "tree" in state[1]
    ):
        raise _damaged("snapshot", path, "holds no tree")
    return DumpHead(last=last, previous=previous)


def check_data_dir(journal: Path, meta: Path, dump: Path) -> DumpHead | None:
    """Check the three files (meta, journal, snapshot); returns the snapshot's head."""
    check_meta(meta)
    summary = check_journal(journal)
    head = check_dump(dump)
    if head is None and summary.first_index > 1:
        # compacted, and the snapshot holding entries 1..first-1 is gone: pysyncobj would
        # apply the journal onto an empty tree and run with a tree missing those entries
        raise _damaged(
            "snapshot",
            dump,
            f"missing, but the journal starts at entry {summary.first_index} "
            "(the entries before it are only in the snapshot)",
        )
    return head
