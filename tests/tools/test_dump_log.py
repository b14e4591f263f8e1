"""`ktool dump-log`: Kafka's kafka-dump-log.sh output for segments and indexes."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from typer.testing import CliRunner

from tests.log.test_legacy import message, wrapper
from trafka.log.batch import CompressionType, TimestampType, parse_header
from trafka.log.control import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from trafka.log.records import NewRecord, RecordHeader, build_batch
from trafka.tools.dump_log import run
from trafka.tools.ktool import app

BASE = 100


def _segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    batches = [
        build_batch(
            [
                NewRecord(b"v1", key=b"k1", timestamp=1000, headers=(RecordHeader("a", b"x"),)),
                NewRecord(None, key=b"gone", timestamp=1001, headers=(RecordHeader("b", None),)),
            ],
            base_offset=BASE,
            partition_leader_epoch=3,
            producer_id=7,
            producer_epoch=1,
            base_sequence=0,
        ),
        build_batch(
            [NewRecord(b"zipped", timestamp=5)],
            base_offset=BASE + 2,
            compression=CompressionType.GZIP,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            now_ms=2000,
        ),
        build_end_transaction_batch(
            EndTransactionMarker(ControlRecordType.ABORT, coordinator_epoch=4),
            producer_id=7,
            producer_epoch=1,
            now_ms=3000,
            base_offset=BASE + 3,
        ),
        build_batch(
            [NewRecord(b"cleaned", timestamp=6)], base_offset=BASE + 4, delete_horizon_ms=9000
        ),
        message(BASE + 5, 1, b"old", b"v1 message", timestamp=4000),
    ]
    path = tmp_path / f"{BASE:020d}.log"
    path.write_bytes(b"".join(batches) + b"\x00\x00\x00")
    return path, batches


def _run(*args: str | Path, **flags: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([Path(a) for a in args], out, err, **flags)
    return code, out.getvalue(), err.getvalue()


def test_batch_lines_are_kafkas(tmp_path: Path) -> None:
    path, batches = _segment(tmp_path)
    code, out, err = _run(path)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == f"Log starting offset: {BASE}"
    crc = parse_header(batches[0]).crc
    assert lines[2] == (
        "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: 0 lastSequence: 1"
        " producerId: 7 producerEpoch: 1 partitionLeaderEpoch: 3 isTransactional: false"
        " isControl: false deleteHorizonMs: OptionalLong.empty position: 0"
        f" CreateTime: 1001 size: {len(batches[0])} magic: 2 compresscodec: none crc: {crc}"
        " isvalid: true"
    )
    assert f"position: {len(batches[0])} LogAppendTime: 2000" in lines[3]
    assert "compresscodec: gzip" in lines[3]
    assert "isTransactional: true isControl: true" in lines[4]
    assert "deleteHorizonMs: OptionalLong[9000]" in lines[5]
    position = sum(len(b) for b in batches[:4])
    assert lines[6].startswith(f"offset: 105 position: {position} CreateTime: 4000 size: ")
    legacy_crc = struct.unpack_from(">I", batches[4], 12)[0]
    assert lines[6].endswith(f"magic: 1 compresscodec: none crc: {legacy_crc} isvalid: true")
    assert lines[7] == f"Found 3 invalid bytes at the end of {path.name}"
    assert len(lines) == 8
    assert err == ""


def test_records_with_print_data_log(tmp_path: Path) -> None:
    path, _ = _segment(tmp_path)
    code, out, _ = _run(path, print_data=True)
    assert code == 0
    legacy_crc = struct.unpack_from(">I", message(0, 1, b"old", b"v1 message", timestamp=4000), 12)[
        0
    ]
    records = [line for line in out.splitlines() if line.startswith("|")]
    assert records == [
        "| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [a]"
        " key: k1 payload: v1",
        "| offset: 101 CreateTime: 1001 keySize: 4 valueSize: -1 sequence: 1 headerKeys: [b]"
        " key: gone",
        "| offset: 102 LogAppendTime: 2000 keySize: -1 valueSize: 6 sequence: -1 headerKeys: []"
        " payload: zipped",
        "| offset: 103 CreateTime: 3000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: []"
        " endTxnMarker: ABORT coordinatorEpoch: 4",
        "| offset: 104 CreateTime: 6 keySize: -1 valueSize: 7 sequence: -1 headerKeys: []"
        " payload: cleaned",
        "| offset: 105 CreateTime: 4000 keySize: 3 valueSize: 10 isValid: true"
        f" crc: {legacy_crc} key: old payload: v1 message",
    ]
    _, deep, _ = _run(path, deep=True)
    assert "payload" not in deep and deep.count("| offset:") == 6


def test_legacy_wrappers_and_non_consecutive_offsets(tmp_path: Path) -> None:
    inner = b"".join(message(i, 1, None, b"m%d" % i, timestamp=i) for i in range(3))
    entry = wrapper(2, 1, inner, CompressionType.SNAPPY, timestamp=2)
    v0 = message(10, 0, None, b"zero")
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(entry + v0)
    code, out, err = _run(path, print_data=True)
    assert code == 0
    lines = out.splitlines()
    assert lines[2].startswith("offset: 2 position: 0 CreateTime: 2 size: ")
    assert "magic: 1 compresscodec: snappy" in lines[2]
    assert lines[3].startswith("| offset: 0 CreateTime: 0 keySize: -1 valueSize: 2 isValid: true")
    assert lines[6].startswith(f"offset: 10 position: {len(entry)} NoTimestampType: -1 size: ")
    assert lines[7].startswith("| offset: 10 NoTimestampType: -1 keySize: -1 valueSize: 4")
    assert err.splitlines() == [
        f"Non-consecutive offsets in {path.absolute()}",
        "  2 is followed by 10",
    ]


def test_corrupt_batch_is_reported_invalid(tmp_path: Path) -> None:
    raw = bytearray(build_batch([NewRecord(b"abc")], now_ms=1))
    raw[-1] ^= 0xFF
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(bytes(raw))
    code, out, _ = _run(path)
    assert code == 0 and "isvalid: false" in out


def _write_indexes(tmp_path: Path, log_path: Path, batches: list[bytes]) -> tuple[Path, Path]:
    positions = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    index = tmp_path / f"{BASE:020d}.index"
    # entries: (relative last offset of batch, position); then preallocated zeros
    index.write_bytes(
        struct.pack(">ii", 1, positions[0]) + struct.pack(">ii", 3, positions[2]) + bytes(8 * 5)
    )
    time_index = tmp_path / f"{BASE:020d}.timeindex"
    time_index.write_bytes(
        struct.pack(">qi", 1001, 1) + struct.pack(">qi", 2000, 2) + bytes(12 * 4)
    )
    return index, time_index


def test_index_files(tmp_path: Path) -> None:
    log_path, batches = _segment(tmp_path)
    index, time_index = _write_indexes(tmp_path, log_path, batches)
    code, out, err = _run(index, time_index)
    assert code == 0
    assert out.splitlines() == [
        f"Dumping {index}",
        "offset: 101 position: 0",
        f"offset: 103 position: {len(batches[0]) + len(batches[1])}",
        f"Dumping {time_index}",
        "timestamp: 1001 offset: 101",
        "timestamp: 2000 offset: 102",
    ]
    assert err == ""
    code, out, _ = _run(index, time_index, sanity_only=True)
    assert code == 0
    assert out.splitlines()[1] == f"{index} passed sanity check."
    assert out.splitlines()[3] == f"{time_index} passed sanity check."


def test_index_mismatches_and_failed_sanity_check(tmp_path: Path) -> None:
    _, batches = _segment(tmp_path)
    index = tmp_path / f"{BASE:020d}.index"
    index.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, len(batches[0])))
    code, _, err = _run(index)
    assert code == 0
    assert err.splitlines() == [
        f"Mismatches in :{index.absolute()}",
        "  Index offset: 105, log offset: 102",
        "  Index offset: 100, log offset: 101",
    ]
    index.write_bytes(bytes(12))
    code, _, err = _run(index, sanity_only=True)
    assert code == 1 and "neither positive nor a multiple of 8" in err
    time_index = tmp_path / f"{BASE:020d}.timeindex"
    time_index.write_bytes(struct.pack(">qi", 5000, 1) + struct.pack(">qi", 10, 2))
    code, _, err = _run(time_index, sanity_only=True)
    assert code == 1 and "less than the first timestamp" in err


def test_cli_errors_and_golden_segment(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / f"{0:020d}.log"
    result = runner.invoke(app, ["dump-log", str(missing)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"Error: {missing}: No such file or directory"]
    golden = Path(__file__).parent.parent / "data" / "golden" / "confluent-kafka-zstd.bin"
    segment = tmp_path / f"{0:020d}.log"
    segment.write_bytes(golden.read_bytes())
    result = runner.invoke(app, ["dump-log", "--print-data-log", str(segment)])
    assert result.exit_code == 0, result.output
    assert "compresscodec: zstd" in result.stdout
    assert "| offset: 19 CreateTime: 1700000000019 keySize: 6" in result.stdout
    unknown = tmp_path / "notes.txt"
    unknown.write_text("x")
    result = runner.invoke(app, ["dump-log", str(unknown)])
    assert result.exit_code == 0 and f"Ignoring unknown file {unknown}" in result.stderr


def test_arbitrary_and_mutated_files_never_crash(tmp_path: Path) -> None:
    """dump-log is the tool for corrupt segments: any bytes give output, never a traceback."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    valid = b"".join(_segment(tmp_path)[1])

    @settings(max_examples=60, deadline=None)
    @given(
        st.binary(max_size=200)
        | st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=6).map(
            lambda edits: _mutate(valid, edits)
        )
    )
    def check(data: bytes) -> None:
        for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            path = tmp_path / f"{BASE:020d}{suffix}"
            path.write_bytes(data)
            for flags in ({"print_data": True}, {"sanity_only": True}):
                code, _, _ = _run(path, **flags)
                assert code in (0, 1)

    check()


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    mutated = bytearray(data)
    for position, byte in edits:
        mutated[position % len(mutated)] = byte
    return bytes(mutated)


def test_txn_index_and_producer_snapshot(tmp_path: Path) -> None:
    """A real partition log with an aborted and an open transaction: its `.txnindex` and
    `.snapshot` print as Kafka's DumpLogSegments prints them."""
    from trafka.log.config import LogConfig
    from trafka.log.partition_log import PartitionLog

    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=1_700_000_000_000)

    def txn(pid: int) -> bytes:
        return build_batch(
            [NewRecord(b"v", timestamp=1_700_000_000_000)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )

    log.append_as_leader(txn(7), leader_epoch=0, now_ms=1_700_000_000_000)  # 0
    log.append_as_leader(txn(8), leader_epoch=0, now_ms=1_700_000_000_000)  # 1, left open
    log.append_end_transaction_marker(
        producer_id=7,
        producer_epoch=0,
        coordinator_epoch=4,
        committed=False,
        leader_epoch=0,
        now_ms=1_700_000_000_000,
    )  # 2
    log.close()
    code, out, _ = _run(tmp_path / "t-0" / f"{0:020d}.txnindex")
    assert code == 0
    assert out.splitlines()[1:] == [
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 1"
    ]
    code, out, _ = _run(tmp_path / "t-0" / f"{3:020d}.snapshot")
    assert code == 0
    lines = sorted(out.splitlines()[1:])
    assert lines[0].startswith(
        "producerId: 7 producerEpoch: 0 coordinatorEpoch: 4 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000000 firstSequence: 0 lastSequence: 0"
    )
    assert "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: " in lines[1]
    assert "OptionalLong[1]" in lines[1]
    code, out, _ = _run(tmp_path / "t-0" / f"{0:020d}.log", deep=True)
    assert "endTxnMarker: ABORT coordinatorEpoch: 4" in out
