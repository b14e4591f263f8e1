"""`ktool dump-log FILE...`: what Kafka's `kafka-dump-log.sh` (DumpLogSegments) prints.

Works on trafka's segments and on a real Kafka log dir alike (same format). Per file:

* `.log`: `Dumping <file>`, `Log starting offset: <base offset>`, then one line per batch::

      baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1
      producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
      deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 70
      magic: 2 compresscodec: none crc: 123456789 isvalid: true

  (one line in reality). Legacy (magic 0/1) entries print `offset: <last offset>` instead of
  the v2 fields, and `NoTimestampType: -1` for magic 0. With `--deep-iteration` or
  `--print-data-log` every record follows its batch::

      | offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: []

  (`isValid: true crc: N` instead of sequence/headerKeys for legacy messages,
  `endTxnMarker: COMMIT coordinatorEpoch: 0` for markers), and `--print-data-log` adds
  ` key: <utf-8> payload: <utf-8>` to non-control records. Bytes after the last whole batch:
  `Found N invalid bytes at the end of <name>`; offsets that do not follow each other are
  listed on stderr at the end (`Non-consecutive offsets in <path>`), as Kafka does.
* `.index`: `offset: N position: P` per entry (4-byte relative offset + 4-byte position),
  `.timeindex`: `timestamp: T offset: N` (8-byte timestamp + 4-byte relative offset), both
  big-endian, stopping at the first zero entry after the first (preallocated space). Entries
  are checked against the segment's `.log` when it exists (mismatches on stderr, as Kafka).
  `--index-sanity-check` only runs Kafka's index sanity check and prints
  `<file> passed sanity check.`, or the failure on stderr with exit code 1.

A missing or unreadable file, or a name without a numeric base offset: one line on stderr,
exit code 1 (the other files are still dumped). Unknown suffixes: `Ignoring unknown file`.

* `.txnindex` (aborted transactions): `version: 0 producerId: P firstOffset: F lastOffset: L
  lastStableOffset: S` per entry. `.snapshot` (producer state): `producerId: P
  producerEpoch: E coordinatorEpoch: C currentTxnFirstOffset: OptionalLong[N] lastTimestamp:
  T firstSequence: .. lastSequence: .. lastOffset: .. offsetDelta: .. timestamp: ..` per
  producer (`OptionalLong.empty` with no open transaction), as Kafka prints them.

Not implemented: Kafka's `--offsets-decoder`, `--transaction-log-decoder` and
`--cluster-metadata-decoder` parsers, and the JSON rendering of KRaft control records (we
print `controlType: <TYPE>(<id>)` for those).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, TextIO

import typer

from trafka.log.batch import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    CompressionType,
    crc_is_valid,
    parse_header,
)
from trafka.log.control import ControlRecordType, decode_control_key, decode_end_transaction_marker
from trafka.log.errors import CorruptRecordError, LogError
from trafka.log.legacy import V0_HEADER_SIZE, LegacyMessage, decode_legacy_messages, read_message
from trafka.log.producer_state import decode_snapshot
from trafka.log.records import Record, decode_batch
from trafka.log.txn_index import TXN_INDEX_VERSION, decode_entries

OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TIME_INDEX_ENTRY = struct.Struct(">qi")

Buffer = bytes | memoryview


class DumpError(Exception):
    """A file that cannot be dumped: reported as one line, exit code 1."""


@dataclass
class DumpReport:
    """What Kafka prints to stderr after all files: verification findings."""

    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def print(self, err: TextIO) -> None:
        for name, mismatches in self.index_mismatches.items():
            print(f"Mismatches in :{name}", file=err)
            for index_offset, log_offset in sorted(mismatches, reverse=True):
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for name, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=err)
            for index_ts, log_ts in pairs:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for name, pairs in self.time_out_of_order.items():
            print(f"Found out of order timestamp in :{name}", file=err)
            for index_ts, previous in pairs:
                print(
                    f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}",
                    file=err,
                )
        for pairs in self.time_not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for index_offset, log_offset in pairs:
                print(f"Indexed offset: {index_offset}, found log offset: {log_offset}", file=err)
        for name, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {name}", file=err)
            for previous, following in pairs:
                print(f"  {previous} is followed by {following}", file=err)


# ---------------------------------------------------------------------- formatting


def timestamp_type_name(magic: int, attributes: int) -> str:
    """Kafka's `TimestampType.toString()` for a batch."""
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & 0x08 else "CreateTime"


def codec_name(attributes: int) -> str:
    codec_id = attributes & 0x07
    return CompressionType(codec_id).name.lower() if codec_id <= 4 else f"unknown({codec_id})"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def format_v2_batch(header: BatchHeader, position: int, valid: bool) -> str:
    horizon = (
        f"OptionalLong[{header.base_timestamp}]"
        if header.has_delete_horizon
        else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset}"
        f" count: {header.records_count} baseSequence: {header.base_sequence}"
        f" lastSequence: {header.last_sequence} producerId: {header.producer_id}"
        f" producerEpoch: {header.producer_epoch}"
        f" partitionLeaderEpoch: {header.partition_leader_epoch}"
        f" isTransactional: {_bool(header.is_transactional)}"
        f" isControl: {_bool(header.is_control)} deleteHorizonMs: {horizon}"
        f" position: {position}"
        f" {timestamp_type_name(2, header.attributes)}: {header.max_timestamp}"
        f" size: {header.size} magic: 2 compresscodec: {codec_name(header.attributes)}"
        f" crc: {header.crc} isvalid: {_bool(valid)}"
    )


def format_legacy_entry(message: LegacyMessage, position: int) -> str:
    return (
        f"offset: {message.offset} position: {position}"
        f" {timestamp_type_name(message.magic, message.attributes)}: {message.timestamp}"
        f" size: {message.size + LOG_OVERHEAD} magic: {message.magic}"
        f" compresscodec: {codec_name(message.attributes)} crc: {message.crc}"
        f" isvalid: {_bool(message.crc_valid)}"
    )


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def format_record(
    record: Record,
    timestamp_type: str,
    *,
    magic: int,
    is_control: bool,
    print_data: bool,
    legacy_message: LegacyMessage | None = None,
) -> str:
    line = (
        f"| offset: {record.offset} {timestamp_type}: {record.timestamp}"
        f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
    )
    if magic >= 2:
        keys = ",".join(h.key for h in record.headers)
        line += f" sequence: {record.sequence} headerKeys: [{keys}]"
    if legacy_message is not None:
        line += f" isValid: {_bool(legacy_message.crc_valid)} crc: {legacy_message.crc}"
    if is_control:
        line += _format_control(record)
    elif print_data:
        if record.key is not None:
            line += f" key: {_text(record.key)}"
        if record.value is not None:
            line += f" payload: {_text(record.value)}"
    return line


def _format_control(record: Record) -> str:
    try:
        key = decode_control_key(record.key)
        if key.type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            marker = decode_end_transaction_marker(record)
            return f" endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
        name = key.type.name if key.type is not None else "UNKNOWN"
        return f" controlType: {name}({key.type_id})"
    except CorruptRecordError as error:
        return f" controlRecordError: {error}"


# ---------------------------------------------------------------------- files


def base_offset_of(path: Path) -> int:
    """Kafka's `UnifiedLog.offsetFromFile`: the digits before the first dot."""
    stem = path.name.split(".")[0]
    if not stem.isdigit():
        raise DumpError(f"{path}: file name does not start with a base offset")
    return int(stem)


@contextmanager
def open_readonly(path: Path) -> Iterator[Buffer]:
    """The file's bytes, memory-mapped (segments can be 1 GiB)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                yield b""
                return
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    yield view
                finally:
                    view.release()
    except OSError as error:
        raise DumpError(f"{path}: {error.strerror or error}") from None


@dataclass(frozen=True, slots=True)
class ShallowEntry:
    """One batch (v2) or shallow message (v0/v1) as found in a segment file."""

    position: int
    size: int
    magic: int
    last_offset: int
    max_timestamp: int


def iter_shallow_entries(data: Buffer) -> Iterator[ShallowEntry]:
    """Every whole entry, stopping (like Kafka's FileLogInputStream) at a partial one or at
    bytes that cannot be framed; the caller reports what remains as invalid bytes."""
    position = 0
    end = len(data)
    while end - position >= LOG_OVERHEAD + V0_HEADER_SIZE:
        offset, length = struct.unpack_from(">qi", data, position)
        magic = data[position + MAGIC_OFFSET]
        if length < V0_HEADER_SIZE or position + LOG_OVERHEAD + length > end:
            return
        if magic == 2:
            try:
                header = parse_header(data, position)
            except CorruptRecordError:
                return
            yield ShallowEntry(position, header.size, 2, header.last_offset, header.max_timestamp)
        elif magic in (0, 1):
            try:
                message = read_message(data, position)
            except CorruptRecordError:
                return
            yield ShallowEntry(
                position, message.size + LOG_OVERHEAD, magic, offset, message.timestamp
            )
        else:
            return
        position += LOG_OVERHEAD + length


def dump_log_segment(
    path: Path,
    data: Buffer,
    out: TextIO,
    err: TextIO,
    report: DumpReport,
    *,
    deep: bool,
    print_data: bool,
) -> None:
    print(f"Log starting offset: {base_offset_of(path)}", file=out)
    valid_bytes = 0
    last_offset = -1
    non_consecutive: list[tuple[int, int]] = []
    for entry in iter_shallow_entries(data):
        records = _dump_entry(entry, data, out, err, deep=deep, print_data=print_data)
        for record in records:
            if record.offset != last_offset + 1:
                non_consecutive.append((last_offset, record.offset))
            last_offset = record.offset
        valid_bytes = entry.position + entry.size
    if non_consecutive:
        report.non_consecutive[str(path.absolute())] = non_consecutive
    trailing = len(data) - valid_bytes
    if trailing > 0:
        print(f"Found {trailing} invalid bytes at the end of {path.name}", file=out)


def _dump_entry(
    entry: ShallowEntry, data: Buffer, out: TextIO, err: TextIO, *, deep: bool, print_data: bool
) -> list[Record]:
    position = entry.position
    if entry.magic == 2:
        header = parse_header(data, position)
        print(format_v2_batch(header, position, crc_is_valid(data, position, header)), file=out)
        if not deep:
            return []
        try:
            batch = decode_batch(data, position, check_crc=False)
        except CorruptRecordError as error:
            print(f"Cannot read the records of the batch at position {position}: {error}", file=err)
            return []
        type_name = timestamp_type_name(2, header.attributes)
        for record in batch.records:
            line = format_record(
                record, type_name, magic=2, is_control=header.is_control, print_data=print_data
            )
            print(line, file=out)
        return list(batch.records)
    message = read_message(data, position)
    print(format_legacy_entry(message, position), file=out)
    if not deep:
        return []
    try:
        _, pairs = decode_legacy_messages(data, position, check_crc=False)
    except CorruptRecordError as error:
        print(f"Cannot read the messages of the entry at position {position}: {error}", file=err)
        return []
    type_name = timestamp_type_name(message.magic, message.attributes)
    for record, inner in pairs:
        line = format_record(
            record,
            type_name,
            magic=message.magic,
            is_control=False,
            print_data=print_data,
            legacy_message=inner,
        )
        print(line, file=out)
    return [record for record, _ in pairs]


def read_index_entries(data: Buffer, entry: struct.Struct) -> list[tuple[int, int]]:
    """Whole entries of an index file, stopping at the first all-zero-offset entry after the
    first (preallocated space), as Kafka's dump tool does."""
    count = len(data) // entry.size
    entries: list[tuple[int, int]] = []
    for index in range(count):
        first, second = entry.unpack_from(data, index * entry.size)
        relative_offset = second if entry is TIME_INDEX_ENTRY else first
        if index > 0 and relative_offset == 0:
            break
        entries.append((first, second))
    return entries


def _index_sanity_check(path: Path, data: Buffer, entry: struct.Struct, base: int) -> str | None:
    """Kafka's `OffsetIndex.sanityCheck` / `TimeIndex.sanityCheck`; the failure, or None."""
    kind = "Time index" if entry is TIME_INDEX_ENTRY else "Index"
    if len(data) % entry.size != 0:
        return (
            f"{kind} file {path.name} is corrupt, found {len(data)} bytes which is neither"
            f" positive nor a multiple of {entry.size}."
        )
    entries = read_index_entries(data, entry)
    if not entries:
        return None
    if entry is TIME_INDEX_ENTRY:
        first_timestamp, _ = entries[0]
        last_timestamp, last_relative = entries[-1]
        if last_timestamp < first_timestamp:
            return (
                f"Corrupt time index found, time index file ({path}) has non-zero size but the"
                f" last timestamp is {last_timestamp} which is less than the first timestamp"
                f" {first_timestamp}"
            )
    else:
        last_relative, _ = entries[-1]
    if base + last_relative < base:
        return (
            f"Corrupt index found, index file ({path}) has non-zero size but the last offset"
            f" is {base + last_relative} which is less than the base offset {base}."
        )
    return None


def dump_offset_index(
    path: Path,
    data: Buffer,
    out: TextIO,
    report: DumpReport,
    *,
    sanity_only: bool,
    verify_only: bool,
) -> None:
    base = base_offset_of(path)
    if len(data) < OFFSET_INDEX_ENTRY.size:
        print(f"{path} is empty.", file=out)
        return
    if sanity_only:
        failure = _index_sanity_check(path, data, OFFSET_INDEX_ENTRY, base)
        if failure is not None:
            raise DumpError(failure)
        print(f"{path} passed sanity check.", file=out)
        return
    last_offset_at = _log_last_offsets_by_position(path)
    mismatches: list[tuple[int, int]] = []
    for relative_offset, position in read_index_entries(data, OFFSET_INDEX_ENTRY):
        offset = base + relative_offset
        if last_offset_at is not None:
            found = last_offset_at.get(position, -1)
            if found != offset:
                mismatches.append((offset, found))
        if not verify_only:
            print(f"offset: {offset} position: {position}", file=out)
    if mismatches:
        report.index_mismatches[str(path.absolute())] = mismatches


def dump_time_index(
    path: Path,
    data: Buffer,
    out: TextIO,
    report: DumpReport,
    *,
    sanity_only: bool,
    verify_only: bool,
) -> None:
    base = base_offset_of(path)
    if sanity_only:
        failure = _index_sanity_check(path, data, TIME_INDEX_ENTRY, base)
        if failure is not None:
            raise DumpError(failure)
        print(f"{path} passed sanity check.", file=out)
        return
    entries = _log_entries(path)
    name = str(path.absolute())
    previous_timestamp = -1
    for timestamp, relative_offset in read_index_entries(data, TIME_INDEX_ENTRY):
        offset = base + relative_offset
        if entries is not None:
            match = next((e for e in entries if e.last_offset >= offset), None)
            if match is None:
                report.time_not_found.setdefault(name, []).append((offset, -1))
            elif match.last_offset != offset:
                report.time_not_found.setdefault(name, []).append((offset, match.last_offset))
            else:
                if match.max_timestamp != timestamp:
                    report.time_mismatches.setdefault(name, []).append(
                        (timestamp, match.max_timestamp)
                    )
                if previous_timestamp >= timestamp:
                    report.time_out_of_order.setdefault(name, []).append(
                        (timestamp, previous_timestamp)
                    )
        if not verify_only:
            print(f"timestamp: {timestamp} offset: {offset}", file=out)
        previous_timestamp = timestamp


def _segment_log(path: Path) -> Path:
    return path.with_name(path.name.split(".")[0] + ".log")


def _log_entries(index_path: Path) -> list[ShallowEntry] | None:
    """The shallow entries of the index's segment, or None when there is no `.log` to check."""
    log_path = _segment_log(index_path)
    if not log_path.is_file():
        return None
    with open_readonly(log_path) as data:
        return list(iter_shallow_entries(data))


def _log_last_offsets_by_position(index_path: Path) -> dict[int, int] | None:
    entries = _log_entries(index_path)
    if entries is None:
        return None
    return {entry.position: entry.last_offset for entry in entries}


def dump_txn_index(data: bytes, out: TextIO) -> None:
    """Kafka's `dumpTxnIndex`: one line per aborted transaction."""
    try:
        entries = decode_entries(data)
    except LogError as error:
        raise DumpError(str(error)) from error
    for entry in entries:
        print(
            f"version: {TXN_INDEX_VERSION} producerId: {entry.producer_id}"
            f" firstOffset: {entry.first_offset} lastOffset: {entry.last_offset}"
            f" lastStableOffset: {entry.last_stable_offset}",
            file=out,
        )


def dump_producer_snapshot(data: bytes, out: TextIO) -> None:
    """Kafka's `dumpProducerIdSnapshot`: one line per producer."""
    try:
        entries = decode_snapshot(data)
    except LogError as error:
        raise DumpError(str(error)) from error
    for entry in entries:
        first = entry.current_txn_first_offset
        txn_first = f"OptionalLong[{first}]" if first >= 0 else "OptionalLong.empty"
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
            f" coordinatorEpoch: {entry.coordinator_epoch}"
            f" currentTxnFirstOffset: {txn_first}"
            f" lastTimestamp: {entry.last_timestamp} "
        )
        if entry.batches:
            batch = entry.batches[-1]
            line += (
                f"firstSequence: {batch.first_sequence} lastSequence: {batch.last_sequence}"
                f" lastOffset: {batch.last_offset} offsetDelta: {batch.offset_delta}"
                f" timestamp: {batch.timestamp}"
            )
        print(line, file=out)


def dump_file(
    path: Path,
    out: TextIO,
    err: TextIO,
    report: DumpReport,
    *,
    deep: bool,
    print_data: bool,
    sanity_only: bool,
    verify_only: bool,
) -> None:
    print(f"Dumping {path}", file=out)
    suffix = path.suffix
    if suffix not in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        print(f"Ignoring unknown file {path}", file=err)
        return
    base_offset_of(path)
    if suffix in (".txnindex", ".snapshot"):
        try:
            data_bytes = path.read_bytes()
        except OSError as error:
            raise DumpError(f"cannot read {path}: {error}") from error
        if suffix == ".txnindex":
            dump_txn_index(data_bytes, out)
        else:
            dump_producer_snapshot(data_bytes, out)
        return
    with open_readonly(path) as data:
        if suffix == ".log":
            dump_log_segment(path, data, out, err, report, deep=deep, print_data=print_data)
        elif suffix == ".index":
            dump_offset_index(
                path, data, out, report, sanity_only=sanity_only, verify_only=verify_only
            )
        else:
            dump_time_index(
                path, data, out, report, sanity_only=sanity_only, verify_only=verify_only
            )


def run(
    files: list[Path],
    out: TextIO,
    err: TextIO,
    *,
    deep: bool = False,
    print_data: bool = False,
    sanity_only: bool = False,
    verify_only: bool = False,
) -> int:
    """Dump every file; the exit code (1 if any file could not be dumped)."""
    report = DumpReport()
    exit_code = 0
    for path in files:
        try:
            dump_file(
                path,
                out,
                err,
                report,
                deep=deep or print_data,
                print_data=print_data,
                sanity_only=sanity_only,
                verify_only=verify_only,
            )
        except DumpError as error:
            print(f"Error: {error}", file=err)
            exit_code = 1
    report.print(err)
    return exit_code


dump_log_app = typer.Typer(
    name="dump-log",
    add_completion=False,
    pretty_exceptions_enable=False,
    # A group with only this callback: `ktool dump-log FILE...` whatever else ktool has.
    invoke_without_command=True,
    no_args_is_help=True,
)


@dump_log_app.callback()
def dump_log_command(
    files: Annotated[
        list[Path], typer.Argument(help="Segment (.log), .index or .timeindex files.")
    ],
    print_data_log: Annotated[
        bool, typer.Option("--print-data-log", help="Print each record's key and payload.")
    ] = False,
    deep_iteration: Annotated[
        bool, typer.Option("--deep-iteration", help="Print every record, not just batches.")
    ] = False,
    index_sanity_check: Annotated[
        bool, typer.Option("--index-sanity-check", help="Only run the index sanity check.")
    ] = False,
    verify_index_only: Annotated[
        bool, typer.Option("--verify-index-only", help="Check index entries, print nothing.")
    ] = False,
) -> None:
    """Print the batches, records and index entries of log segment files, as Kafka's
    kafka-dump-log.sh does."""
    exit_code = run(
        files,
        sys.stdout,
        sys.stderr,
        deep=deep_iteration,
        print_data=print_data_log,
        sanity_only=index_sanity_check,
        verify_only=verify_index_only,
    )
    if exit_code:
        raise typer.Exit(exit_code)
