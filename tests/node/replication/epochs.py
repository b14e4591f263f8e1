"""An in-memory epoch lookup for tests: Kafka's endOffsetFor over (epoch, start) entries."""

from __future__ import annotations

from dataclasses import dataclass, field

from trafka.node.replication.ids import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


@dataclass
class Epochs:
    entries: list[tuple[int, int]] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.entries[-1][0]:
            return requested_epoch, log_end_offset
        later = [e for e in self.entries if e[0] > requested_epoch]
        earlier = [e for e in self.entries if e[0] <= requested_epoch]
        if not later:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if not earlier:
            return requested_epoch, later[0][1]
        return earlier[-1][0], later[0][1]

    def assign(self, epoch: int, start_offset: int) -> None:
        """Kafka's cache.assign: a new, higher epoch; entries at or after its start go."""
        if self.entries and epoch <= self.entries[-1][0]:
            return
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        self.entries = [e for e in self.entries if e[1] < end_offset]
