"""ktool's machine-readable output and progress lines, shared by every command (docs/ktool.md).

JSON (`--json`, `JsonFlag`)
    A describe/list command given `--json` prints exactly one JSON document on stdout through
    `emit_json` and nothing else there: two-space indentation, keys sorted (so two runs and two
    versions of ktool print keys in the same order), ASCII only (other characters as `\\uXXXX`),
    one trailing newline. Notes and warnings go to stderr; an error is one line on stderr and a
    non-zero exit code, with nothing on stdout.

    Rules every document follows:

    * Where Kafka's tool prints JSON, the document keeps Kafka's shape (its key names and
      nesting): `ktool log-dirs --json` is kafka-log-dirs' report, `ktool reassign generate`
      prints kafka-reassign-partitions' plan format. Kafka's camelCase stays there.
    * Everything else uses snake_case keys. A tabular command (Kafka's tool prints columns)
      gives a list of objects, one per row, whose keys are the column headers in snake_case
      (`table_document`: `CurrentTransactionStartOffset` -> `current_transaction_start_offset`).
    * A value Kafka prints as absent (`None`, `-`, `null`) is JSON `null`; numbers are numbers.

Progress (`Progress`, `QuietFlag`)
    A long operation (`ktool reassign execute|verify --wait`, `ktool audit export`) redraws one
    status line on stderr, and only when stderr is a terminal and `--quiet` was not given: a
    pipe, a file or a test harness never receives progress lines. The texts are built by pure
    functions (`reassignment_progress`). The audit's progress is Spark's own stage bar (tasks
    done / total), switched by the same rule (`trafka.spark.commands.progress_conf`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Annotated, Any, TextIO

import typer

JsonFlag = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document (keys sorted; docs/ktool.md)."),
]
QuietFlag = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress line on stderr (off anyway when not a tty)."),
]

ABSENT_TEXTS = frozenset({"None", "-", "null"})
"""Cells Kafka's tables print for a value that is absent; JSON null in a document."""


def json_text(document: Any) -> str:
    """The one serialisation of every ktool JSON document (no trailing newline)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True)


def emit_json(document: Any, stream: TextIO | None = None) -> None:
    """Print `document` as ktool's JSON output on stdout (or `stream`)."""
    target = stream if stream is not None else sys.stdout
    target.write(json_text(document) + "\n")
    target.flush()


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(header: str) -> str:
    """A column header as a JSON key: `ProducerId` -> `producer_id`, `LOG-END-OFFSET` ->
    `log_end_offset`, `Duration(min)` -> `duration_min`."""
    spaced = _CAMEL_BOUNDARY.sub("_", header.strip())
    key = re.sub(r"[^0-9A-Za-z]+", "_", spaced).strip("_").lower()
    return re.sub(r"_+", "_", key)


def cell_value(value: object) -> object:
    """A table cell as a JSON value: absent markers to null, everything else unchanged."""
    if isinstance(value, str) and value in ABSENT_TEXTS:
        return None
    return value


def table_document(
    headers: Sequence[str], rows: Sequence[Sequence[object]]
) -> list[dict[str, object]]:
    """Rows of a table as objects keyed by the snake_case column headers."""
    keys = [snake_case(h) for h in headers]
    assert len(set(keys)) == len(keys), f"two columns share a JSON key: {keys}"
    document = []
    for row in rows:
        assert len(row) == len(keys), f"row {row!r} does not match {headers!r}"
        document.append({k: cell_value(v) for k, v in zip(keys, row, strict=True)})
    return document


# ---------------------------------------------------------------------------------------
# Progress


def human_bytes(count: int) -> str:
    """`1234567` -> `1.2 MB` (decimal units, as the audit's other figures)."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def reassignment_progress(
    done: int, total: int, bytes_copied: int | None = None, bytes_total: int | None = None
) -> str:
    """`Reassignment: 2/6 partition(s) done, 1.5 MB of 4.0 MB copied to new replicas`; the
    byte figures only when the brokers reported them (DescribeLogDirs)."""
    text = f"Reassignment: {done}/{total} partition(s) done"
    if bytes_copied is not None and bytes_total is not None and bytes_total > 0:
        text += (
            f", {human_bytes(bytes_copied)} of {human_bytes(bytes_total)} copied to new replicas"
        )
    return text


class Progress:
    """One status line on stderr, redrawn in place (`\\r`), shown only on a terminal.

    `enabled` is decided once: not `quiet` and the stream `isatty()`. A disabled Progress
    writes nothing at all, so scripts and pipes see only the command's own output."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = not quiet and _is_terminal(self._stream)
        self._width = 0

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        padding = " " * max(0, self._width - len(text))
        self._stream.write("\r" + text + padding)
        self._stream.flush()
        self._width = len(text)

    def finish(self, text: str | None = None) -> None:
        """The last line (if any) stays on screen, followed by a newline."""
        if not self.enabled:
            return
        if text is not None:
            self.update(text)
        if self._width:
            self._stream.write("\n")
            self._stream.flush()
        self._width = 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
