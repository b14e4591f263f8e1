"""Kafka's small text files in a log dir, written atomically (tmp file + fsync + rename).

Offset checkpoints (`replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint`), one per log dir::

    0                      version
    2                      number of entries
    orders 0 1234          topic partition offset
    orders 1 17

The leader-epoch checkpoint (`<topic>-<partition>/leader-epoch-checkpoint`) has the same
shape with `epoch startOffset` lines (SEEDS LOG-33, REP-25).

`partition.metadata` (in each partition dir, KIP-516) names the topic id::

    version: 0
    topic_id: <the topic's Uuid in URL-safe base64>

`meta.properties` (KRaft mode, version 1) is a Java properties file::

    #
    #Sat Nov 21 11:00:00 UTC 2026
    cluster.id=...
    directory.id=...
    node.id=1
    version=1

Every writer goes through `write_atomically`: the content lands in `<name>.tmp`, is fsynced,
renamed over the target and the directory is fsynced, so a crash leaves either the old file
or the new one, never a torn one (Kafka's `CheckpointFile`).

Reading is forgiving line by line: a bad entry line (a wrong field count, a number that is
not a non-negative integer, an illegal topic name such as one holding a newline) is skipped
with a warning and costs only that entry; the others are kept. Only a missing or unknown
version line makes the whole file unreadable (CheckpointError; callers log and start empty).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from trafka.log.errors import LogError
from trafka.log.names import topic_name_error

logger = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"

MAX_CHECKPOINT_ENTRIES = 10_000_000
"""A bound on what we are willing to read back: lines past this many are ignored."""
MAX_LINE_WARNINGS = 20
"""Bad lines logged one by one; past this many, one summary line."""


class CheckpointError(LogError):
    """A checkpoint file that does not parse."""


TopicPartition = tuple[str, int]


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or create in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, content: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `content` via tmp file + fsync + rename + fsync of the dir
    (`durable=False`: without the two fsyncs, which the caller then owes)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def fsync_path(path: Path) -> bool:
    """fsync the file at `path` through a fresh descriptor; False if it is gone (a roll's
    deferred fsync may come after retention or a deletion removed the file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def format_lines(version: int, lines: Iterable[str]) -> bytes:
    body = list(lines)
    return ("\n".join([str(version), str(len(body)), *body]) + "\n").encode()


def parse_lines(
    path: Path, *, fields: int, check: Callable[[list[str]], str | None] | None = None
) -> list[list[str]]:
    """The entry lines of a version-0 checkpoint, each split into `fields` fields.

    A bad entry line (wrong field count, or refused by `check`, which returns a reason) is
    skipped with a warning: it costs that line, not the file. A count line that disagrees
    with the entries found is a warning too. Only a file that is not text, or whose version
    line is missing or unknown, raises CheckpointError (its lines cannot be interpreted).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = path.read_bytes().decode("utf-8", errors="replace")
        if not text.startswith(f"{CHECKPOINT_VERSION}\n"):
            raise CheckpointError(f"{path}: not text") from None
        logger.warning("%s: bytes that are not UTF-8; the lines holding them are skipped", path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if len(lines) < 1 or not lines[0].strip():
        raise CheckpointError(f"{path}: missing version line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0][:40]!r}")
    count: int | None = None
    if len(lines) >= 2:
        try:
            count = int(lines[1])
        except ValueError:
            count = None
    if count is None or not 0 <= count <= MAX_CHECKPOINT_ENTRIES:
        logger.warning(
            "%s: bad entry count line %r; reading the entries anyway",
            path,
            (lines[1][:40] if len(lines) >= 2 else ""),
        )
    entries: list[list[str]] = []
    skipped = 0
    for number, line in enumerate(lines[2 : 2 + MAX_CHECKPOINT_ENTRIES], start=3):
        parts = line.split()  # Kafka splits on whitespace (\\s+)
        reason = (
            f"expected {fields} space-separated fields"
            if len(parts) != fields
            else (check(parts) if check is not None else None)
        )
        if reason is not None:
            skipped += 1
            if skipped <= MAX_LINE_WARNINGS:
                logger.warning("%s: line %d %r skipped: %s", path, number, line[:80], reason)
            continue
        entries.append(parts)
    if skipped > MAX_LINE_WARNINGS:
        logger.warning("%s: %d bad lines skipped in all", path, skipped)
    if count is not None and count != len(entries) + skipped:
        logger.warning(
            "%s: the count line says %d entries, %d lines found",
            path,
            count,
            len(entries) + skipped,
        )
    return entries


def _non_negative_int(text: str) -> int | None:
    if not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _offset_line_error(parts: list[str]) -> str | None:
    topic, partition, offset = parts
    name_error = topic_name_error(topic)
    if name_error is not None:
        return name_error
    if _non_negative_int(partition) is None or _non_negative_int(offset) is None:
        return "partition and offset must be non-negative integers"
    return None


def _epoch_line_error(parts: list[str]) -> str | None:
    if any(_non_negative_int(part) is None for part in parts):
        return "epoch and start offset must be non-negative integers"
    return None


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write a `topic partition offset` checkpoint, sorted for stable output."""
    lines = (
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    )
    write_atomically(path, format_lines(CHECKPOINT_VERSION, lines))


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a `topic partition offset` checkpoint; a missing file is empty, a bad line is
    skipped (with a warning)."""
    if not path.exists():
        return {}
    result: dict[TopicPartition, int] = {}
    for topic, partition, offset in parse_lines(path, fields=3, check=_offset_line_error):
        result[(topic, int(partition))] = int(offset)
    return result


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    """Write `leader-epoch-checkpoint`: `epoch startOffset` lines."""
    lines = (f"{epoch} {start_offset}" for epoch, start_offset in entries)
    write_atomically(path, format_lines(CHECKPOINT_VERSION, lines))


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """Read `leader-epoch-checkpoint`; a missing file is empty, a bad line is skipped."""
    if not path.exists():
        return []
    return [
        (int(epoch), int(start_offset))
        for epoch, start_offset in parse_lines(path, fields=2, check=_epoch_line_error)
    ]


def write_meta_properties(path: Path, properties: Mapping[str, str], *, now_ms: int) -> None:
    """Write `meta.properties` the way Java's `Properties.store` does (date comment, sorted)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now_ms / 1000))
    lines = ["#", f"#{stamp}"]
    lines += [f"{key}={_escape(value)}" for key, value in sorted(properties.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_meta_properties(path: Path) -> dict[str, str]:
    """Read a Java properties file (comments `#`/`!`, `key=value` or `key:value`)."""
    result: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep_index, char in enumerate(line):
            if char in "=:":
                key, value = line[:sep_index].strip(), line[sep_index + 1 :].strip()
                break
        else:
            key, value = line, ""
        result[key] = value.replace("\\:", ":").replace("\\=", "=").replace("\\\\", "\\")
    return result


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")


def write_partition_metadata(path: Path, topic_id: str) -> None:
    """Write `partition.metadata` (version 0) for a partition dir."""
    write_atomically(path, f"version: 0\ntopic_id: {topic_id}\n".encode())


def read_partition_metadata(path: Path) -> str | None:
    """The topic id in `partition.metadata`, or None if the file is missing."""
    if not path.exists():
        return None
    fields = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: expected version 0 and a topic_id")
    return fields["topic_id"]
