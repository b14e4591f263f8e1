"""The error codes of a response, as Kafka's `AbstractResponse.errorCounts()` counts them
for RequestMetrics' ErrorsPerSec: the top-level `error_code` and those of the nested
entries (topics, partitions), NONE included."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

_MAX_DEPTH: Final = 3
_NESTED: dict[type, tuple[tuple[str, ...], bool]] = {}
"""Per response entry type: the fields holding tuples of entries, and whether it has an
`error_code` field (computed once per type)."""


def _shape(kind: type) -> tuple[tuple[str, ...], bool]:
    shape = _NESTED.get(kind)
    if shape is None:
        if dataclasses.is_dataclass(kind):
            names = [f.name for f in dataclasses.fields(kind)]
            nested = tuple(
                f.name
                for f in dataclasses.fields(kind)
                if f.name not in ("error_code", "error_message") and "tuple" in str(f.type)
            )
            shape = (nested, "error_code" in names)
        else:
            shape = ((), False)
        _NESTED[kind] = shape
    return shape


def error_codes(response: Any) -> list[int]:
    """The error codes in `response` (a kio message); [] for a response it cannot read."""
    codes: list[int] = []
    _collect(response, codes, 0)
    return codes


def _collect(entry: Any, codes: list[int], depth: int) -> None:
    nested, has_code = _shape(type(entry))
    if has_code:
        codes.append(int(entry.error_code))
    if depth >= _MAX_DEPTH:
        return
    for name in nested:
        items = getattr(entry, name)
        if items:
            for item in items:  # entries of another type have no shape: nothing to read
                _collect(item, codes, depth + 1)
