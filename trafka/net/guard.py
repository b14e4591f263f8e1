"""Bounds pre-check of message bodies before kio's native reader sees them.

Why: kio 0.6.5's native reader reserves memory for a *compact* array from the claimed element
count before reading any element (``Vec::with_capacity``). A 20-byte request claiming
2^32-1 elements makes it allocate tens of GB and the process aborts ("memory allocation of
34359738352 bytes failed") - one bad client would kill the broker. It also reads a null
count (int32 -1, compact 0) of a non-nullable array as None, which Kafka refuses as a
malformed request; and it decodes a whole body in one call that holds the GIL, so a
100 MB frame of millions of tiny elements would hold the event loop for many seconds.

What: `check(cls, buffer, offset, max_elements)` walks the body exactly as the schema lays it
out (dataclass field metadata, as kio reads it; compact or legacy encoding by the class's
`__flexible__`) without building objects, and raises `BoundsError` if any length or count
claims more than the bytes left in the frame, a non-nullable array is null, or the body
holds more than `max_elements` array elements (requests: `MAX_REQUEST_ELEMENTS`). Every
element of every type takes at least one byte, so after this check no count can make the
reader reserve more than (frame size) elements. Known tagged fields are walked inside their
own size; unknown tags are skipped. It costs a few microseconds per request
(docs/protocol.md).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from .headers import MalformedHeader, read_unsigned_varint

Buffer = bytes | bytearray | memoryview

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
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


class BoundsError(ValueError):
    """A length or count in a body runs past the end of the frame (or over the caps)."""


MAX_REQUEST_ELEMENTS: Final = 1_000_000
"""Array elements one request may hold in all (every array, every level), checked on the
bytes before anything is decoded. kio decodes a body in one native call that holds the
GIL, so without a cap a 100 MB frame of tiny elements (tens of millions of them) would hold
the event loop for many seconds and take gigabytes. No client sends a million elements:
Metadata of 200,000 topics is decoded in slices (trafka.net.large_requests) and not counted
here. Kafka itself has no such cap (it decodes on its many request threads)."""


class _Budget:
    __slots__ = ("cap", "left")

    def __init__(self, cap: int) -> None:
        self.cap = self.left = cap

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise BoundsError(f"more than {self.cap:,} array elements in one body")


Skip = Callable[[Buffer, int, int, _Budget], int]
"""(buffer, offset, end, budget) -> new offset; raises BoundsError past `end`."""


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
    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        offset += size
        if offset > end:
            raise BoundsError("field runs past the end")
        return offset

    return skip


def _compact_bytes(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
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

    def checked(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        if offset < end and buffer[offset] == 0:
            raise BoundsError(f"non-nullable field {name} was serialized as null")
        return skip(buffer, offset, end, budget)

    return checked


def _compact_array(element: Skip, size: int | None) -> Skip:
    """`size`: the elements' fixed size, skipped in one step (int32 partition indexes...)."""

    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        count_plus_one, offset = _uvarint(buffer, offset, end)
        if count_plus_one:
            count = count_plus_one - 1
            if count > end - offset:
                raise BoundsError(f"array claims {count} elements, {end - offset} bytes left")
            budget.spend(count)
            if size is not None:
                offset += count * size
                if offset > end:
                    raise BoundsError("array runs past the end")
                return offset
            for _ in range(count):
                offset = element(buffer, offset, end, budget)
        return offset

    return skip


def _legacy_length(width: int) -> Skip:
    """An int16 (strings) or int32 (bytes, records) length, -1 for null."""
    unpack = _INT16.unpack_from if width == 2 else _INT32.unpack_from

    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        if offset + width > end:
            raise BoundsError("length runs past the end")
        (length,) = unpack(buffer, offset)
        offset += width
        if length < -1:
            raise BoundsError(f"negative length {length}")
        if length > 0:
            offset += length
            if offset > end:
                raise BoundsError("string/bytes length runs past the end")
        return offset

    return skip


def _legacy_array(element: Skip, size: int | None, name: str, nullable: bool) -> Skip:
    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        if offset + 4 > end:
            raise BoundsError("array count runs past the end")
        (count,) = _INT32.unpack_from(buffer, offset)
        offset += 4
        if count < 0:
            if count == -1 and nullable:
                return offset
            if count == -1:
                raise BoundsError(f"non-nullable field {name} was serialized as null")
            raise BoundsError(f"negative array count {count}")
        if count > end - offset:
            raise BoundsError(f"array claims {count} elements, {end - offset} bytes left")
        budget.spend(count)
        if size is not None:
            offset += count * size
            if offset > end:
                raise BoundsError("array runs past the end")
            return offset
        for _ in range(count):
            offset = element(buffer, offset, end, budget)
        return offset

    return skip


def _nullable_entity(entity: Skip) -> Skip:
    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        if offset >= end:
            raise BoundsError("nullable struct marker missing")
        marker = buffer[offset]
        offset += 1
        if marker == 0xFF:  # int8 -1: null (KIP-893)
            return offset
        return entity(buffer, offset, end, budget)

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


def _field_skip(field: dataclasses.Field[Any], tagged: bool, flexible: bool) -> Skip:
    inner, is_array, optional = _unwrap(field.type)
    kafka_type = field.metadata.get("kafka_type")
    if dataclasses.is_dataclass(inner):
        element = _entity_skip(typing.cast(type, inner), flexible)
        if not is_array:
            return _nullable_entity(element) if optional and not tagged else element
    elif kafka_type in _VARIABLE:
        # kio itself refuses a null non-nullable string; int16 length for legacy strings
        width = 2 if kafka_type == "string" else 4
        element = _compact_bytes if flexible else _legacy_length(width)
    elif kafka_type in _FIXED_SIZES:
        element = _fixed(_FIXED_SIZES[kafka_type])
    else:
        raise TypeError(f"no bounds rule for {field.name}: {kafka_type!r}")
    if not is_array:
        return element
    size = None if dataclasses.is_dataclass(inner) else _FIXED_SIZES.get(kafka_type or "")
    if not flexible:
        return _legacy_array(element, size, field.name, optional)
    array = _compact_array(element, size)
    return array if optional else _not_null(field.name, array)


_ENTITY_SKIPS: dict[tuple[type, bool], Skip] = {}


def _entity_skip(cls: type, flexible: bool = True) -> Skip:
    cached = _ENTITY_SKIPS.get((cls, flexible))
    if cached is not None:
        return cached
    steps: list[Skip | int] = []
    tagged: dict[int, Skip] = {}

    def skip(buffer: Buffer, offset: int, end: int, budget: _Budget) -> int:
        for step in steps:
            if isinstance(step, int):
                offset += step
                if offset > end:
                    raise BoundsError("field runs past the end")
            else:
                offset = step(buffer, offset, end, budget)
        if not flexible:
            return offset
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
                known(buffer, offset, tag_end, budget)
            offset = tag_end
        return offset

    _ENTITY_SKIPS[(cls, flexible)] = skip  # before recursing: schemas may nest the same struct
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            if flexible:
                tagged[int(tag)] = _field_skip(field, tagged=True, flexible=True)
            continue
        size = _fixed_size(field)
        if size is None:
            steps.append(_field_skip(field, tagged=False, flexible=flexible))
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


def check(cls: type, buffer: Buffer, offset: int, max_elements: int | None = None) -> None:
    """Raise BoundsError unless every count and length of the body fits in the buffer, no
    non-nullable array is null and (when `max_elements` is given) the body holds at most
    that many array elements."""
    budget = _Budget(len(buffer) if max_elements is None else max_elements)
    flexible: bool = cls.__flexible__  # type: ignore[attr-defined]
    _entity_skip(cls, flexible)(buffer, offset, len(buffer), budget)


def check_flexible(cls: type, buffer: Buffer, offset: int) -> None:
    """`check` of a flexible body, capped at MAX_REQUEST_ELEMENTS."""
    _entity_skip(cls)(buffer, offset, len(buffer), _Budget(MAX_REQUEST_ELEMENTS))
