"""Bounds pre-check for flexible (KIP-482) message bodies before kio's native reader sees them.

Why: kio 0.6.5's native reader reserves memory for a *compact* array from the claimed element
count before reading any element (``Vec::with_capacity``). A 20-byte request claiming
2^32-1 elements makes it allocate tens of GB and the process aborts ("memory allocation of
34359738352 bytes failed") - one bad client would kill the broker. Legacy (int32-count)
arrays, strings and bytes are checked by kio itself (tests/net/test_codec.py probes each).

What: `check_flexible(cls, buffer, offset)` walks the body exactly as the schema lays it out
(dataclass field metadata, as kio reads it) without building objects, and raises
`BoundsError` if any length or count claims more than the bytes left in the frame. Every
element of every type takes at least one byte, so after this check no count can make the
reader reserve more than (frame size) elements. Known tagged fields are walked inside their
own size; unknown tags are skipped. The walk runs only for flexible versions and costs a
few microseconds per request (docs/protocol.md).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from .headers import MalformedHeader, read_unsigned_varint

Buffer = bytes | bytearray | memoryview
Skip = Callable[[Buffer, int, int], int]
"""(buffer, offset, end) -> new offset; raises BoundsError past `end`."""

_FIXED_SIZES: Final = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE: Final = frozenset({"string", "bytes", "records"})


class BoundsError(ValueError):
    """A length or count in a flexible body runs past the end of the frame."""


def _uvarint(buffer: Buffer, offset: int, end: int) -> tuple[int, int]:
    if offset < end:
        first = buffer[offset]
        if first < 0x80:
            return first, offset + 1
    try:
        value, new_offset = read_unsigned_varint(buffer, offset)
    except MalformedHeader as error:
        raise BoundsError(str(error)) from None
    if new_offset > end:
        raise BoundsError("varint runs past the end")
    return value, new_offset


def _fixed(size: int) -> Skip:
    def skip(buffer: Buffer, offset: int, end: int) -> int:
        offset += size
        if offset > end:
            raise BoundsError("field runs past the end")
        return offset

    return skip


def _compact_bytes(buffer: Buffer, offset: int, end: int) -> int:
    length_plus_one, offset = _uvarint(buffer, offset, end)
    if length_plus_one:
        offset += length_plus_one - 1
        if offset > end:
            raise BoundsError("string/bytes length runs past the end")
    return offset


def _not_null(name: str, skip: Skip) -> Skip:
    """`skip` of a compact array that the schema does not let be null (count varint 0):
    such a request is malformed, as Kafka's generated readers say ("non-nullable field ...
    was serialized as null"); kio would read it as None and the handler fail on it."""

    def checked(buffer: Buffer, offset: int, end: int) -> int:
        if offset < end and buffer[offset] == 0:
            raise BoundsError(f"non-nullable field {name} was serialized as null")
        return skip(buffer, offset, end)

    return checked


def _compact_array(element: Skip) -> Skip:
    def skip(buffer: Buffer, offset: int, end: int) -> int:
        count_plus_one, offset = _uvarint(buffer, offset, end)
        if count_plus_one:
            count = count_plus_one - 1
            if count > end - offset:
                raise BoundsError(f"array claims {count} elements, {end - offset} bytes left")
            for _ in range(count):
                offset = element(buffer, offset, end)
        return offset

    return skip


def _nullable_entity(entity: Skip) -> Skip:
    def skip(buffer: Buffer, offset: int, end: int) -> int:
        if offset >= end:
            raise BoundsError("nullable struct marker missing")
        marker = buffer[offset]
        offset += 1
        if marker == 0xFF:  # int8 -1: null (KIP-893)
            return offset
        return entity(buffer, offset, end)

    return skip


def _unwrap(annotation: Any) -> tuple[Any, bool, bool]:
    """(inner type, is_array, is_optional) for a dataclass field annotation."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not types.NoneType]
        optional = len(args) != len(typing.get_args(annotation))
        annotation = args[0]
        origin = typing.get_origin(annotation)
    if origin is tuple:
        inner = typing.get_args(annotation)[0]
        inner_origin = typing.get_origin(inner)
        if inner_origin in (types.UnionType, typing.Union):
            inner = next(a for a in typing.get_args(inner) if a is not types.NoneType)
        return inner, True, optional
    return annotation, False, optional


def _field_skip(field: dataclasses.Field[Any], tagged: bool) -> Skip:
    inner, is_array, optional = _unwrap(field.type)
    kafka_type = field.metadata.get("kafka_type")
    if dataclasses.is_dataclass(inner):
        element = _entity_skip(typing.cast(type, inner))
        if is_array:
            array = _compact_array(element)
            return array if optional else _not_null(field.name, array)
        return _nullable_entity(element) if optional and not tagged else element
    if kafka_type in _VARIABLE:
        element = _compact_bytes  # kio itself refuses a null non-nullable string
    elif kafka_type in _FIXED_SIZES:
        element = _fixed(_FIXED_SIZES[kafka_type])
    else:
        raise TypeError(f"no bounds rule for {field.name}: {kafka_type!r}")
    if not is_array:
        return element
    array = _compact_array(element)
    return array if optional else _not_null(field.name, array)


_ENTITY_SKIPS: dict[type, Skip] = {}


def _entity_skip(cls: type) -> Skip:
    cached = _ENTITY_SKIPS.get(cls)
    if cached is not None:
        return cached
    steps: list[Skip | int] = []
    tagged: dict[int, Skip] = {}

    def skip(buffer: Buffer, offset: int, end: int) -> int:
        for step in steps:
            if isinstance(step, int):
                offset += step
                if offset > end:
                    raise BoundsError("field runs past the end")
            else:
                offset = step(buffer, offset, end)
        if offset < end and buffer[offset] == 0:  # no tagged fields: the common case
            return offset + 1
        count, offset = _uvarint(buffer, offset, end)
        if count > end - offset:
            raise BoundsError(f"{count} tagged fields, {end - offset} bytes left")
        for _ in range(count):
            tag, offset = _uvarint(buffer, offset, end)
            size, offset = _uvarint(buffer, offset, end)
            tag_end = offset + size
            if tag_end > end:
                raise BoundsError("tagged field runs past the end")
            known = tagged.get(tag)
            if known is not None:
                known(buffer, offset, tag_end)
            offset = tag_end
        return offset

    _ENTITY_SKIPS[cls] = skip  # before recursing: schemas may nest the same struct
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _field_skip(field, tagged=True)
            continue
        size = _fixed_size(field)
        if size is None:
            steps.append(_field_skip(field, tagged=False))
        elif steps and isinstance(steps[-1], int):
            steps[-1] += size
        else:
            steps.append(size)
    return skip


def _fixed_size(field: dataclasses.Field[Any]) -> int | None:
    inner, is_array, _optional = _unwrap(field.type)
    if is_array or dataclasses.is_dataclass(inner):
        return None
    return _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))


def check_flexible(cls: type, buffer: Buffer, offset: int) -> None:
    """Raise BoundsError unless every count/length in the body fits in the buffer."""
    _entity_skip(cls)(buffer, offset, len(buffer))


# ---- non-flexible bodies: nulls where the schema allows none -------------------------------

Check = Callable[[Any], None]
_NULL_CHECKS: dict[type, Check | None] = {}


def check_not_null(value: Any) -> None:
    """Raise BoundsError if a decoded non-flexible message holds None where its schema
    allows no null (an int32 count of -1 in a non-nullable array, which kio decodes to
    None; it refuses null strings itself). The flexible bodies are checked by
    `check_flexible` on the bytes; this walk visits only arrays and structs."""
    check = _null_check(type(value))
    if check is not None:
        check(value)


def _null_check(cls: type) -> Check | None:
    if cls in _NULL_CHECKS:
        return _NULL_CHECKS[cls]
    _NULL_CHECKS[cls] = None  # before recursing: schemas may nest the same struct
    steps: list[tuple[str, bool, bool, Check | None]] = []
    for field in dataclasses.fields(cls):
        inner, is_array, optional = _unwrap(field.type)
        kafka_type = field.metadata.get("kafka_type")
        is_struct = dataclasses.is_dataclass(inner)
        if not (is_array or is_struct):
            continue  # kio refuses a null non-nullable string; numbers are never null
        nested = _null_check(typing.cast(type, inner)) if is_struct else None
        nullable = optional
        if nullable and nested is None:
            continue  # nothing to check, here or below
        steps.append((field.name, is_array, nullable, nested))
    if not steps:
        return None

    def check(value: Any) -> None:
        for name, is_array, optional, nested in steps:
            item = getattr(value, name)
            if item is None:
                if not optional:
                    raise BoundsError(f"non-nullable field {name} was serialized as null")
                continue
            if nested is not None:
                if is_array:
                    for element in item:
                        nested(element)
                else:
                    nested(item)

    _NULL_CHECKS[cls] = check
    return check
