"""Child process for the crash tests: append forever, acknowledge each append on stdout.

    python tests/log/crash_child.py LOG_DIR SEED

Opens `LOG_DIR/crashy-0` (recovering whatever the previous, killed, child left), then
appends random batches. After each append returns it prints `first last digest` where
digest is the CRC-32 of the batch's values, and flushes stdout: a printed line is an
acknowledged batch. Every 7th append it flushes the log, applies retention.bytes (so
the directory stays small) and writes the
`recovery-point-offset-checkpoint` in LOG_DIR, as the LogManager would. The parent SIGKILLs
it at a random moment.
"""

from __future__ import annotations

import random
import sys
import time
import zlib
from pathlib import Path

from trafka.log.checkpoint import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from trafka.log.config import LogConfig
from trafka.log.partition_log import PartitionLog
from trafka.log.records import NewRecord, build_batch

CONFIG = LogConfig(
    segment_bytes=1024 * 1024,
    index_interval_bytes=1024,
    segment_index_bytes=1024,
    max_message_bytes=4 * 1024 * 1024,
    retention_bytes=3 * 1024 * 1024,
)


def values_for(rng: random.Random) -> list[bytes]:
    """Mostly small batches; one in four is 0.3-0.9 MB so a kill can tear a write."""
    if rng.random() < 0.25:
        return [rng.randbytes(rng.randint(300_000, 900_000))]
    count = rng.randint(1, 40)
    return [rng.randbytes(rng.randint(0, 600)) for _ in range(count)]


def main() -> None:
    log_dir = Path(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    checkpoint = log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT
    recovery_point = read_offset_checkpoint(checkpoint).get(("crashy", 0))
    now_ms = int(time.time() * 1000)
    log = PartitionLog.open(
        log_dir / "crashy-0", CONFIG, now_ms=now_ms, recovery_point=recovery_point
    )
    print("ready", flush=True)
    appends = 0
    while True:
        values = values_for(rng)
        data = build_batch([NewRecord(v, timestamp=now_ms) for v in values])
        info = log.append_as_leader(data, leader_epoch=1, now_ms=now_ms)
        digest = zlib.crc32(b"".join(values))
        sys.stdout.write(f"{info.first_offset} {info.last_offset} {digest}\n")
        sys.stdout.flush()
        appends += 1
        if appends % 7 == 0:
            log.flush()
            log.update_high_watermark(log.log_end_offset)
            log.apply_retention(now_ms)
            write_offset_checkpoint(checkpoint, {("crashy", 0): log.recovery_point})


if __name__ == "__main__":
    main()
