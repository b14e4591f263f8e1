"""Copying a partition dir into a `-future` dir while its log keeps serving (AlterReplicaLogDirs).

Two steps, so the bulk of the copy runs off the caller's event loop:

1. `FutureCopy.copy_bulk` (a worker thread, the log open and serving): every file of the
   partition dir is copied and fsync'ed (and the source file fsync'ed, so closing the log
   later has little to sync), its (inode, size, mtime) recorded as seen *before*
   reading it, with the log's truncation count read first. Files may change meanwhile:
   appends, rolls, retention, compaction, truncation.
2. `FutureCopy.sync_final` (the log closed, nothing else touching it): the future dir is
   made identical to the partition dir, trusting only what cannot have changed unseen:

   * a file whose (inode, size, mtime) are those recorded, and whose mtime was at least
     `RACY_MS` older than the moment it was recorded (git's "racy timestamp" rule: a write
     after the record would have moved the mtime), is kept;
   * a `.log` segment file with the recorded inode, not smaller, while the log saw no
     truncation since the record, only grew by appends: its new tail is appended;
   * anything else is copied again; files gone from the source are removed.

   What is left for the closed step is thus the active segment's tail, the index files and
   checkpoints that changed, and the small files: milliseconds, not the seconds per GB the
   whole copy takes.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

RACY_MS: Final = 2_000
_CHUNK: Final = 1 << 20
_SKIPPED_SUFFIXES: Final = (".deleted",)


@dataclass(frozen=True, slots=True)
class _Seen:
    inode: int
    size: int
    mtime_ns: int
    recorded_ns: int
    truncations: int


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_range(source: Path, target: Path, start: int, end: int) -> None:
    """Bytes [start, end) of `source` into `target` at the same offsets."""
    mode = "r+b" if start > 0 else "wb"
    with open(source, "rb") as reader, open(target, mode) as writer:
        reader.seek(start)
        writer.seek(start)
        writer.truncate(start)
        remaining = end - start
        while remaining > 0:
            chunk = reader.read(min(_CHUNK, remaining))
            if not chunk:
                break
            writer.write(chunk)
            remaining -= len(chunk)
        writer.flush()
        os.fsync(writer.fileno())


@dataclass
class FutureCopy:
    """The copy of `source` (a partition dir) into `future`."""

    source: Path
    future: Path
    truncations: Callable[[], int]
    """The log's truncation count (`PartitionLog.truncations`)."""
    seen: dict[str, _Seen] = field(default_factory=dict)

    def _names(self) -> list[str]:
        """The files to copy; none when the partition dir is gone (deleted meanwhile: the
        final step, which checks the log is still the one being moved, refuses)."""
        try:
            children = list(self.source.iterdir())
        except FileNotFoundError:
            return []
        return sorted(
            child.name
            for child in children
            if child.is_file() and not child.name.endswith(_SKIPPED_SUFFIXES)
        )

    def copy_bulk(self) -> int:
        """Step 1 (any thread, the log serving): copy every file; the bytes copied."""
        self.future.mkdir(parents=True, exist_ok=True)
        copied = 0
        for name in self._names():
            truncations = self.truncations()
            source = self.source / name
            try:
                stat = source.stat()
                recorded_ns = time.time_ns()
                _copy_range(source, self.future / name, 0, stat.st_size)
                # The source's dirty pages too, through our own descriptor (not the log's
                # lock, which the event loop's appends take): its close has little left.
                _fsync_file(source)
            except FileNotFoundError:
                continue  # deleted meanwhile (retention, compaction): the final step decides
            self.seen[name] = _Seen(
                stat.st_ino, stat.st_size, stat.st_mtime_ns, recorded_ns, truncations
            )
            copied += stat.st_size
        _fsync_file(self.future)
        return copied

    def sync_final(self) -> int:
        """Step 2 (the log closed): make `future` identical to `source`; the bytes copied."""
        self.future.mkdir(parents=True, exist_ok=True)
        names = self._names()
        truncations = self.truncations()
        copied = 0
        for name in names:
            source, target = self.source / name, self.future / name
            stat = source.stat()
            seen = self.seen.get(name)
            if seen is not None and target.exists() and seen.inode == stat.st_ino:
                stable = seen.mtime_ns <= seen.recorded_ns - RACY_MS * 1_000_000
                if stable and seen.size == stat.st_size and seen.mtime_ns == stat.st_mtime_ns:
                    continue
                if (
                    name.endswith(".log")
                    and stat.st_size >= seen.size
                    and seen.truncations == truncations
                ):
                    _copy_range(source, target, seen.size, stat.st_size)
                    copied += stat.st_size - seen.size
                    continue
            _copy_range(source, target, 0, stat.st_size)
            copied += stat.st_size
        wanted = set(names)
        for child in self.future.iterdir():
            if child.name not in wanted:
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        _fsync_file(self.future)
        return copied
