"""A seeded random walk over PartitionLog operations, checked against a plain model.

Operations: leader and follower appends of random batches, forced rolls, truncation,
DeleteRecords + retention, clean reopen, "crash" reopen (no close: untrimmed indexes,
no snapshot, stale recovery point). After every step the log must read back exactly the
model's records from its log start offset, and the offsets/epochs must agree.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch, iter_batches

NOW = 1_700_000_000_000


def read_all(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    result: list[tuple[int, bytes | None]] = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        fetched = log.read(position, max_bytes=3000)
        assert fetched.regions, f"nothing at {position} below the end {log.log_end_offset}"
        for decoded in iter_batches(fetched.to_bytes()):
            result += [(r.offset, r.value) for r in decoded.records if r.offset >= position]
        position = fetched.next_offset
    return result


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(
        segment_bytes=rng.choice([700, 1500, 1 << 20]),
        index_interval_bytes=rng.choice([0, 100, 4096]),
        segment_index_bytes=rng.choice([64, 4096]),
    )
    directory = tmp_path / "model-0"
    log = PartitionLog.open(directory, config, now_ms=NOW)
    model: list[tuple[int, bytes | None]] = []  # (offset, value) from log start
    epoch = 0
    for step in range(120):
        action = rng.choices(
            ["append", "roll", "truncate", "delete_records", "reopen", "crash", "epoch"],
            weights=[60, 4, 6, 4, 3, 3, 3],
        )[0]
        end = model[-1][0] + 1 if model else log.log_start_offset
        if action == "append":
            values = [rng.randbytes(rng.randint(0, 80)) for _ in range(rng.randint(1, 6))]
            data = build_batch([NewRecord(v, timestamp=NOW + step) for v in values])
            info = log.append_as_leader(data, leader_epoch=epoch, now_ms=NOW + step)
            assert info.first_offset == end
            model += [(end + i, v) for i, v in enumerate(values)]
        elif action == "roll":
            log.roll(NOW + step)
        elif action == "epoch":
            epoch += 1
        elif action == "truncate" and model:
            # truncate at a batch boundary, as a follower does
            boundaries = sorted({o for o, _ in model} | {end})
            target = rng.choice(boundaries)
            first_batch_offsets = _batch_starts(log)
            target = max(o for o in [*first_batch_offsets, end] if o <= target)
            log.truncate_to(target)
            model = [(o, v) for o, v in model if o < target]
        elif action == "delete_records" and model:
            log.update_high_watermark(log.log_end_offset)
            target = rng.randint(log.log_start_offset, log.log_end_offset)
            log.delete_records_before(target)
            log.apply_retention(NOW + step)
            model = [(o, v) for o, v in model if o >= target]
        elif action == "reopen":
            start = log.log_start_offset
            log.close()
            log = PartitionLog.open(
                directory, config, now_ms=NOW, log_start_offset=start, had_clean_shutdown=True
            )
        elif action == "crash":
            start = log.log_start_offset
            recovery_point = rng.randint(0, log.recovery_point)
            log._close_abruptly()
            log = PartitionLog.open(
                directory, config, now_ms=NOW, log_start_offset=start, recovery_point=recovery_point
            )
        expected_end = model[-1][0] + 1 if model else log.log_end_offset
        assert log.log_end_offset == expected_end, (step, action)
        assert read_all(log) == model, (step, action)
    log.close()


def _batch_starts(log: PartitionLog) -> list[int]:
    starts = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        fetched = log.read(position, max_bytes=1 << 20)
        for decoded in iter_batches(fetched.to_bytes()):
            starts.append(decoded.base_offset)
        position = fetched.next_offset
    return starts
