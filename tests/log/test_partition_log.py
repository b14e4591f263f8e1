"""PartitionLog: appends, reads, rolls, truncation, epochs, ListOffsets, idempotence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from trafka.log import batch as batch_format
from trafka.log.config import LogConfig
from trafka.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch, iter_batches

NOW = 1_700_000_000_000


def batch(
    values: list[bytes] | int = 1,
    *,
    timestamp: int = NOW,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    key: bytes | None = None,
) -> bytes:
    if isinstance(values, int):
        values = [b"v%d" % i for i in range(values)]
    return build_batch(
        [NewRecord(value, key=key, timestamp=timestamp) for value in values],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def open_log(tmp_path: Path, config: LogConfig | None = None, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(
        tmp_path / "orders-0",
        config or LogConfig(),
        now_ms=NOW,
        **kwargs,  # type: ignore[arg-type]
    )


def all_offsets(log: PartitionLog, start: int | None = None) -> list[int]:
    offsets: list[int] = []
    position = log.log_start_offset if start is None else start
    while position < log.log_end_offset:
        data = log.read(position, max_bytes=1 << 20).to_bytes()
        assert data
        for decoded in iter_batches(data):
            offsets += [record.offset for record in decoded.records if record.offset >= position]
        position = offsets[-1] + 1
    return offsets


def test_append_assigns_offsets_and_stamps_the_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.topic, log.partition) == ("orders", 0)
    first = log.append_as_leader(batch(3), leader_epoch=4, now_ms=NOW)
    second = log.append_as_leader(batch(2), leader_epoch=5, now_ms=NOW)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, max_bytes=10_000).to_bytes()
    headers = batch_format.validate_batches(data)
    assert [h.base_offset for _, h in headers] == [0, 3]
    assert [h.partition_leader_epoch for _, h in headers] == [4, 5]
    assert log.leader_epoch_cache.entries() == [(4, 0), (5, 3)]
    assert log.latest_epoch == 5
    log.close()


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = [
        log.append_as_leader(batch(10), leader_epoch=0, now_ms=NOW).size_bytes for _ in range(5)
    ]
    one = sizes[0]
    assert log.read(0, max_bytes=one * 2 + 5).size == one * 2
    assert log.read(0, max_bytes=one * 2 + 5).next_offset == 20
    assert log.read(0, max_bytes=1).next_offset == 10
    assert log.read(30, max_bytes=1 << 20).next_offset == 50
    assert log.read(12, max_bytes=one).regions[0].position == one
    assert log.read(0, max_bytes=1).size == one  # min_one_batch (KIP-74)
    assert log.read(0, max_bytes=1, min_one_batch=False).size == 0
    assert log.read(0, max_bytes=1 << 20, max_offset=20).size == one * 2
    assert log.read(0, max_bytes=1 << 20, max_offset=25).size == one * 2  # 25 is mid-batch
    assert log.read(50, max_bytes=100).size == 0
    eager = log.read(0, max_bytes=one * 3, with_bytes=True)
    assert eager.data is not None and eager.data == eager.regions[0].read()
    region = log.read(0, max_bytes=1 << 20).regions[0]
    assert region.path.name == "00000000000000000000.log"
    with pytest.raises(OffsetOutOfRangeError):
        log.read(51, max_bytes=100)
    log.close()


def test_rejects_corrupt_and_oversized_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=500))
    good = bytearray(batch(1))
    good[-1] ^= 0x55
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(good), leader_epoch=0, now_ms=NOW)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch([b"x" * 1000]), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_log_append_time_stamps_the_broker_clock(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(2, timestamp=5), leader_epoch=0, now_ms=NOW + 7)
    assert info.log_append_time_ms == NOW + 7
    header = batch_format.parse_header(log.read(0, max_bytes=1000).to_bytes())
    assert header.timestamp_type is batch_format.TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == NOW + 7
    log.close()


def test_rolls_on_size_and_reopens_cleanly(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=700, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    for _ in range(30):
        log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)
    segments = log.segments()
    assert len(segments) > 3
    assert all(s.size <= 700 for s in segments)
    assert [s.base_offset for s in segments] == sorted(s.base_offset for s in segments)
    assert all_offsets(log) == list(range(150))
    log.close()
    names = sorted(p.name for p in (tmp_path / "orders-0").iterdir())
    assert "00000000000000000000.index" in names and "00000000000000000000.timeindex" in names
    reopened = open_log(tmp_path, config, had_clean_shutdown=True)
    assert reopened.log_end_offset == 150
    assert all_offsets(reopened) == list(range(150))
    assert reopened.append_as_leader(batch(1), leader_epoch=1, now_ms=NOW).first_offset == 150
    reopened.close()


def test_rolls_on_segment_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append_as_leader(batch(1, timestamp=NOW), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(batch(1, timestamp=NOW + 500), leader_epoch=0, now_ms=NOW + 500)
    assert len(log.segments()) == 1
    log.append_as_leader(batch(1, timestamp=NOW + 1500), leader_epoch=0, now_ms=NOW + 1500)
    assert [s.base_offset for s in log.segments()] == [0, 2]
    log.close()


def test_index_files_are_preallocated_and_trimmed_on_roll(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=1, segment_index_bytes=4096)
    log = open_log(tmp_path, config)
    index = tmp_path / "orders-0" / "00000000000000000000.index"
    assert index.stat().st_size == 4096
    for _ in range(20):
        log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert len(log.segments()) > 1
    assert 0 < index.stat().st_size < 4096 and index.stat().st_size % 8 == 0
    timeindex = tmp_path / "orders-0" / "00000000000000000000.timeindex"
    assert timeindex.stat().st_size % 12 == 0
    log.close()


def test_rolls_when_the_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0, segment_index_bytes=8 * 3))
    for _ in range(10):
        log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert len(log.segments()) >= 3
    assert all_offsets(log) == list(range(10))
    log.close()


def test_follower_append_keeps_offsets_and_learns_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    for epoch in (0, 0, 2, 3):
        leader.append_as_leader(batch(2), leader_epoch=epoch, now_ms=NOW)
    follower = open_log(tmp_path / "follower")
    data = leader.read(0, max_bytes=1 << 20).to_bytes()
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 7)
    assert follower.leader_epoch_cache.entries() == [(0, 0), (2, 4), (3, 6)]
    assert follower.read(0, max_bytes=1 << 20).to_bytes() == data
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    leader.close()
    follower.close()


def test_end_offset_for_epoch_follows_kip_101(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (1, 1, 3, 5):
        log.append_as_leader(batch(1), leader_epoch=epoch, now_ms=NOW)
    assert log.end_offset_for_epoch(5) == (5, 4)
    assert log.end_offset_for_epoch(3) == (3, 3)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    log.close()


def test_truncate_to_drops_batches_epochs_and_moves_offsets(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500)
    log = open_log(tmp_path, config)
    for epoch in range(8):
        log.append_as_leader(batch(2), leader_epoch=epoch, now_ms=NOW)
    log.update_high_watermark(16)
    assert log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    assert log.latest_epoch == 2
    assert all_offsets(log) == list(range(6))
    assert log.append_as_leader(batch(1), leader_epoch=9, now_ms=NOW).first_offset == 6
    assert not log.truncate_to(100)
    log.close()
    reopened = open_log(tmp_path, config)
    assert all_offsets(reopened) == list(range(7))
    assert reopened.leader_epoch_cache.entries()[-1] == (9, 6)
    reopened.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.append_as_leader(batch(1), leader_epoch=1, now_ms=NOW).first_offset == 100
    assert [s.base_offset for s in log.segments()] == [100]
    log.close()


def test_delete_records_moves_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=200))
    for _ in range(10):
        log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(5)  # above the high watermark (0)
    log.update_high_watermark(20)
    assert log.delete_records_before(7) == 7
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, max_bytes=100)
    assert all_offsets(log)[0] == 7
    deleted = log.apply_retention(NOW)
    assert deleted > 0
    assert log.segments()[0].base_offset <= 7
    log.close()


def test_list_offsets_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    log.append_as_leader(batch(2, timestamp=NOW), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(batch(2, timestamp=NOW + 100), leader_epoch=1, now_ms=NOW)
    log.append_as_leader(batch(2, timestamp=NOW + 50), leader_epoch=1, now_ms=NOW)
    earliest = log.offset_for_timestamp(-2)
    latest = log.offset_for_timestamp(-1)
    assert earliest is not None and (earliest.offset, earliest.leader_epoch) == (0, 0)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (6, 1)
    found = log.offset_for_timestamp(NOW + 1)
    assert found is not None and (found.offset, found.timestamp) == (2, NOW + 100)
    first = log.offset_for_timestamp(0)
    assert first is not None and first.offset == 0
    assert log.offset_for_timestamp(NOW + 101) is None
    maximum = log.offset_for_timestamp(-3)
    assert maximum is not None and (maximum.offset, maximum.timestamp) == (2, NOW + 100)
    log.close()


def idempotent(seq: int, count: int = 2, epoch: int = 0) -> bytes:
    return batch(count, producer_id=77, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_duplicate_returns_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    first = log.append_as_leader(idempotent(0), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(idempotent(2), leader_epoch=0, now_ms=NOW)
    again = log.append_as_leader(idempotent(0), leader_epoch=0, now_ms=NOW)
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 7
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(9), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(idempotent(0, epoch=1), leader_epoch=0, now_ms=NOW)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idempotent(6, epoch=0), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 9
    log.close()


def test_idempotence_survives_restart_with_and_without_snapshots(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for seq in range(0, 10, 2):
        log.append_as_leader(idempotent(seq), leader_epoch=0, now_ms=NOW)
    log.close()
    snapshots = list((tmp_path / "orders-0").glob("*.snapshot"))
    assert [p.name for p in snapshots] == ["00000000000000000010.snapshot"]
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    assert reopened.append_as_leader(idempotent(8), leader_epoch=0, now_ms=NOW).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(idempotent(11), leader_epoch=0, now_ms=NOW)
    reopened.close()
    for snapshot in (tmp_path / "orders-0").glob("*.snapshot"):
        snapshot.unlink()
    rebuilt = open_log(tmp_path)  # no snapshot: replayed from the log, all five batches
    assert rebuilt.append_as_leader(idempotent(2), leader_epoch=0, now_ms=NOW).duplicate
    assert rebuilt.append_as_leader(idempotent(10), leader_epoch=0, now_ms=NOW).first_offset == 10
    rebuilt.close()


def test_flush_messages_policy_advances_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(flush_messages=4, flush_ms=1000))
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 0
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 4
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert not log.flush_if_due(NOW + 999)
    assert log.flush_if_due(NOW + 1000)
    assert log.recovery_point == 5
    log.close()


def test_recovery_logs_what_it_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    log.close()
    segment = tmp_path / "orders-0" / "00000000000000000000.log"
    with segment.open("ab") as handle:
        handle.write(b"\x00" * 100)
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, recovery_point=0)
    assert "dropped 100 bytes" in caplog.text
    assert reopened.log_end_offset == 3
    reopened.close()


def test_file_regions_work_with_sendfile(tmp_path: Path) -> None:
    import os
    import socket

    log = open_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(batch(4), leader_epoch=0, now_ms=NOW)
    fetched = log.read(4, max_bytes=1 << 20)
    region = fetched.regions[0]
    sender, receiver = socket.socketpair()
    with sender, receiver:
        fd = region.open_fd()
        try:
            sent = os.sendfile(sender.fileno(), fd, region.position, region.length)
        finally:
            os.close(fd)
        received = b""
        while len(received) < sent:
            received += receiver.recv(1 << 16)
    assert sent == region.length
    assert received == fetched.to_bytes()
    assert [h.base_offset for _, h in batch_format.validate_batches(received)] == [4, 8]
    log.close()


def test_old_message_formats_are_not_appended(tmp_path: Path) -> None:
    from trafka.log.errors import UnsupportedForMessageFormatError

    log = open_log(tmp_path)
    legacy = bytearray(batch(1))
    legacy[16] = 1  # magic 1
    with pytest.raises(UnsupportedForMessageFormatError):
        log.append_as_leader(bytes(legacy), leader_epoch=0, now_ms=NOW)
    log.close()


def test_last_stable_offset_stops_at_an_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    transactional = build_batch(
        [NewRecord(b"t", timestamp=NOW)],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(transactional, leader_epoch=0, now_ms=NOW)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(4)
    assert log.first_unstable_offset() == 2
    assert log.last_stable_offset == 2
    log.append_end_transaction_marker(
        producer_id=5,
        producer_epoch=0,
        coordinator_epoch=0,
        committed=True,
        leader_epoch=0,
        now_ms=NOW,
    )
    log.update_high_watermark(5)
    assert log.last_stable_offset == 5
    log.close()


def test_rolls_when_offsets_outgrow_the_32_bit_relative_offset(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    first = leader.read(0, max_bytes=1 << 20).to_bytes()
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(first)
    far = bytearray(batch(1))
    batch_format.set_base_offset(far, 0, 3_000_000_000)
    follower.append_as_follower(bytes(far))
    assert [s.base_offset for s in follower.segments()] == [0, 3_000_000_000]
    assert follower.log_end_offset == 3_000_000_001
    assert follower.read(3_000_000_000, max_bytes=1000).to_bytes() == bytes(far)
    leader.close()
    follower.close()
    reopened = open_log(tmp_path / "follower", recovery_point=0)
    assert reopened.log_end_offset == 3_000_000_001
    reopened.close()


def test_an_empty_active_segment_is_replaced_not_kept_on_a_jump(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    far = bytearray(batch(1))
    batch_format.set_base_offset(far, 0, 5_000_000_000)
    follower.append_as_follower(bytes(far))
    assert [s.base_offset for s in follower.segments()] == [5_000_000_000]
    assert follower.log_start_offset == 5_000_000_000
    follower.close()


def test_segment_files_parse_with_kafka_pythons_own_reader(tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import MemoryRecords

    log = open_log(tmp_path, LogConfig(segment_bytes=600))
    for epoch in range(6):
        values = [b"e%d-%d" % (epoch, i) for i in range(3)]
        log.append_as_leader(batch(values, key=b"k"), leader_epoch=epoch, now_ms=NOW)
    log.close()
    seen: list[tuple[int, bytes, int]] = []
    for segment in sorted((tmp_path / "orders-0").glob("*.log")):
        records = MemoryRecords(segment.read_bytes())
        while (parsed := records.next_batch()) is not None:
            assert parsed.validate_crc()
            for record in parsed:
                seen.append((record.offset, record.value, parsed.leader_epoch))
    assert [offset for offset, _, _ in seen] == list(range(18))
    assert seen[4] == (4, b"e1-1", 1)


class _Deferred:
    """A background worker that runs its jobs only when told (`BackgroundWorker`'s submit)."""

    def __init__(self) -> None:
        self.jobs: list[object] = []

    def submit(self, job: object) -> None:
        self.jobs.append(job)

    def run_all(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            job()  # type: ignore[operator]


def test_a_roll_leaves_its_fsyncs_to_the_background_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from trafka.log import checkpoint, index, partition_log

    fsynced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsynced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)  # the os module every log module uses
    assert checkpoint.os is index.os is partition_log.os is os
    worker = _Deferred()
    log = PartitionLog.open(
        tmp_path / "orders-0",
        LogConfig(segment_bytes=700),
        now_ms=NOW,
        background=worker,  # type: ignore[arg-type]
    )
    log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)  # writes the epoch checkpoint
    fsynced.clear()
    while len(log.segments()) < 2:
        log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)
    rolled_at = log.segments()[1].base_offset
    # Rolled: no fsync on the appending thread, the recovery point still before the roll.
    assert fsynced == [] and worker.jobs
    assert log.recovery_point == 0
    worker.run_all()
    # segment, offset index, time index, producer snapshot, the directory
    assert len(fsynced) >= 5
    assert log.recovery_point == rolled_at
    log.close()


def test_a_deferred_roll_flush_after_a_truncation_leaves_the_recovery_point(
    tmp_path: Path,
) -> None:
    worker = _Deferred()
    log = PartitionLog.open(
        tmp_path / "orders-0",
        LogConfig(segment_bytes=700),
        now_ms=NOW,
        background=worker,  # type: ignore[arg-type]
    )
    while len(log.segments()) < 2:
        log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)
    log.truncate_to(3)
    worker.run_all()
    assert log.recovery_point <= 3
    log.close()


def _reads(log: PartitionLog) -> list[object]:
    """Every read a fetcher could make of the log now: each offset, several byte budgets,
    bounded by every offset above it (a consumer's HW, a follower's log end) or not."""
    end = log.log_end_offset
    answers: list[object] = []
    for start in range(max(log.log_start_offset, end - 12), end + 1):
        for max_bytes in (0, 1, 90, 300, 1 << 20):
            for max_offset in (None, *range(start, min(end, start + 6) + 1)):
                answer = log.read(
                    start,
                    max_bytes=max_bytes,
                    max_offset=max_offset,
                    min_one_batch=max_bytes != 0,
                    bytes_up_to=200,
                )
                if answer.regions:
                    offsets = [
                        record.offset
                        for decoded in iter_batches(answer.to_bytes())
                        for record in decoded.records
                    ]
                    assert offsets[0] <= start <= offsets[-1]
                    assert max_offset is None or offsets[-1] < max_offset
                    assert answer.next_offset == offsets[-1] + 1
                answers.append(answer)
    return answers


def test_reads_at_the_tail_answer_as_reads_that_walk_the_headers(tmp_path: Path) -> None:
    """The segment remembers the batch this process appended last (its tail) and reads at
    the log end skip the header reads; every answer must be the one the header walk gives
    (the log's own segments with the tail forgotten), through rolls and truncations."""
    import random

    rng = random.Random(7)
    log = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=150))

    def check() -> None:
        remembered = _reads(log)
        for segment in log._segments:  # the header walk: as after a restart
            segment._tail = None
        assert _reads(log) == remembered

    for step in range(30):
        values = [b"x" * rng.randrange(0, 40) for _ in range(rng.randrange(1, 4))]
        log.append_as_leader(batch(values), leader_epoch=0, now_ms=NOW)
        check()
        if step % 13 == 12:
            log.truncate_to(log.log_end_offset - rng.randrange(1, 4))
            check()
    assert len(log.segments()) > 2
    small = log.read(log.log_end_offset - 1, max_bytes=1 << 20, bytes_up_to=1 << 20)
    assert small.data is not None and small.data == small.regions[0].read()
    log.close()
