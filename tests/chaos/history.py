"""What a chaos run records: every write with its outcome, every polled record, every fault.

The history is plain data (no clients, no processes) so the checker (`tests.chaos.checker`)
can be unit-tested on hand-made histories. Times are seconds on the harness's monotonic
clock, relative to the run's start.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Write:
    """One produce call: a unique value, and what the producer learned about it."""

    value: str
    producer: str
    idempotent: bool
    partition: int
    """The partition the value was sent to (explicit partitioning)."""
    sent: float
    acked: float | None = None
    offset: int | None = None
    """The offset in the acknowledgement (None until acknowledged)."""
    failed: float | None = None
    error: str | None = None
    """A failed write is indefinite: it may or may not be in the log."""


@dataclass(frozen=True)
class Read:
    """One record returned by a consumer's poll."""

    consumer: str
    assignment: int
    """Identifies an unbroken assignment of this consumer: a group consumer's number of
    assignments so far, a manually assigned consumer's number of (re)assignments."""
    time: float
    partition: int
    offset: int
    value: str


@dataclass
class Fault:
    """One nemesis application: injected at `start`, healed at `heal`, over at `end` (the
    cluster answered again: every node accepting connections)."""

    nemesis: str
    detail: str
    start: float
    heal: float | None = None
    end: float | None = None
    nodes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ClientError:
    """A client-side error event (produce failure, consumer error, fatal producer error)."""

    time: float
    client: str
    error: str
    fatal: bool = False


@dataclass
class History:
    topic: str
    partitions: int
    duration: float = 0.0
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    errors: list[ClientError] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """nemesis -> why it could not run (a mechanism unavailable)."""
    final_reads_complete: bool = True
    """False when the final read did not reach every partition's high watermark."""
    meta_ops: list[dict[str, Any]] = field(default_factory=list)
    """Metadata changes (topic creations, config changes) and whether they were acked."""

    def to_json_object(self) -> dict[str, Any]:
        return asdict(self)


def history_from_json_object(data: dict[str, Any]) -> History:
    """The inverse of `History.to_json_object` (to re-check a run's history.json offline)."""
    return History(
        topic=data["topic"],
        partitions=data["partitions"],
        duration=data["duration"],
        writes=[Write(**w) for w in data["writes"]],
        reads=[Read(**r) for r in data["reads"]],
        faults=[Fault(**f) for f in data["faults"]],
        errors=[ClientError(**e) for e in data["errors"]],
        skipped=dict(data["skipped"]),
        final_reads_complete=data["final_reads_complete"],
        meta_ops=list(data["meta_ops"]),
    )
