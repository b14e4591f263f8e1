"""The leader-epoch cache and its `leader-epoch-checkpoint` file (SEEDS REP-25, KIP-101).

Entries are `(epoch, start_offset)`: the first offset written by the leader of `epoch`,
strictly increasing in both fields. A leader appends an entry on its first write in a new
epoch; a follower appends one whenever a fetched batch carries a higher
`partitionLeaderEpoch`. The cache is truncated with the log: from the end on
`truncate_to`, from the start when the log start offset moves. Every change is written
through to `leader-epoch-checkpoint` (see `checkpoint.py` for the file format).

`end_offset_for_epoch` answers OffsetForLeaderEpoch (KIP-101/KIP-279): the largest epoch
<= the requested one and the start offset of the next higher epoch (or the log end offset
when the requested epoch is the latest), exactly as Kafka's `LeaderEpochFileCache`.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from trafka.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger(__name__)


class LeaderEpochCache:
    """Ordered `(epoch, start_offset)` entries, persisted on every change."""

    def __init__(self, directory: Path | None) -> None:
        self._path = directory / LEADER_EPOCH_CHECKPOINT if directory is not None else None
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        if self._path is not None:
            try:
                entries = read_epoch_checkpoint(self._path)
            except CheckpointError as error:
                logger.warning(
                    "%s unreadable (%s): starting with an empty cache", self._path, error
                )
                entries = []
            for epoch, start_offset in entries:
                self._add(epoch, start_offset)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._start_offsets[0]) if self._epochs else None

    def _add(self, epoch: int, start_offset: int) -> bool:
        if self._epochs and epoch <= self._epochs[-1]:
            return False
        # A new epoch starting below an existing entry supersedes it (Kafka removes
        # entries with start offsets >= the new one: they were never really written).
        while self._start_offsets and self._start_offsets[-1] >= start_offset:
            self._epochs.pop()
            self._start_offsets.pop()
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` if it is a new (higher) epoch."""
        if epoch < 0:
            return
        if self._add(epoch, start_offset):
            self._persist()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset`."""
        slot = bisect_right(self._start_offsets, offset) - 1
        return self._epochs[slot] if slot >= 0 else None

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per Kafka's `LeaderEpochFileCache.endOffsetFor`."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        changed = False
        while self._start_offsets and self._start_offsets[-1] >= end_offset:
            self._epochs.pop()
            self._start_offsets.pop()
            changed = True
        if changed:
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below `start_offset`; the one covering it starts there."""
        slot = bisect_right(self._start_offsets, start_offset) - 1
        if slot < 0 or (slot == 0 and self._start_offsets[0] == start_offset):
            return
        del self._epochs[:slot]
        del self._start_offsets[:slot]
        self._start_offsets[0] = start_offset
        self._persist()

    def clear(self) -> None:
        self._epochs.clear()
        self._start_offsets.clear()
        self._persist()

    def _persist(self) -> None:
        if self._path is not None:
            write_epoch_checkpoint(self._path, self.entries())
