"""Build kio message dataclasses of any version from plain, version-independent data.

A handler computes one answer (topics, partitions, error codes as ints, times in ms) and
`build(ResponseClass, data)` turns it into the kio dataclass of the version the client asked
for: fields the version lacks are dropped, fields the data lacks take the dataclass default
or the type's zero value, and Kafka's wire types are converted (ms -> `timedelta` for
`timedelta_i32/64`, ms -> aware `datetime` for `datetime_i64` with -1 -> None where nullable,
int -> `ErrorCode`). This keeps one handler per API instead of one per version (STYLE §2)
without hand-parsing anything (STYLE §3).

`response_class(request)` finds the kio response class paired with a decoded request.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

from trafka.net import codec

_UTC = datetime.UTC
_ZERO_UUID = uuid.UUID(int=0)


def response_class(request: Any) -> type[Any]:
    """The kio response class of the same API and version as a decoded kio request."""
    return _response_class(int(request.__api_key__), int(request.__version__))


@cache
def _response_class(api_key: int, version: int) -> type[Any]:
    declared = codec.response_class(api_key, version)
    if declared is not None:
        return declared
    return typing.cast(type[Any], load_response_schema(api_key, version))


@cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _fields(cls: Any) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.init)


def has_field(cls_or_obj: Any, name: str) -> bool:
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    return any(f.name == name for f in _fields(cls))


def build(cls: Any, data: Mapping[str, Any]) -> Any:
    """An instance of kio dataclass `cls` from `data` (nested mappings for nested structs)."""
    kwargs: dict[str, Any] = {}
    for name, convert, required, zero in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = value if convert is None else convert(value)
        elif required:
            kwargs[name] = zero
    return cls(**kwargs)


Converter = Callable[[Any], Any]


@cache
def _plan(cls: Any) -> tuple[tuple[str, Converter | None, bool, Any], ...]:
    """Per field: (name, converter or None for identity, required, zero value)."""
    hints = _hints(cls)
    plan = []
    for f in _fields(cls):
        tp = hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, _converter(tp), required, _zero(tp) if required else None))
    return tuple(plan)


def _optional_inner(tp: Any) -> Any | None:
    """X for `X | None`, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def _converter(tp: Any) -> Converter | None:
    inner = _optional_inner(tp)
    if inner is not None:
        strict = _strict_converter(inner, nullable=True)
        if strict is None:
            return None

        def convert_optional(value: Any) -> Any:
            return None if value is None else strict(value)

        return convert_optional
    return _strict_converter(tp, nullable=False)


def _strict_converter(tp: Any, *, nullable: bool) -> Converter | None:
    if typing.get_origin(tp) is tuple:
        (item_type, *_rest) = typing.get_args(tp)
        item = _converter(item_type)
        if item is None:
            return tuple
        return lambda values: tuple(item(v) for v in values)
    if not isinstance(tp, type):
        return None
    if dataclasses.is_dataclass(tp):
        nested: type[Any] = tp

        def convert_nested(value: Any) -> Any:
            return value if isinstance(value, nested) else build(nested, value)

        return convert_nested
    if issubclass(tp, (i32Timedelta, i64Timedelta)) or tp is datetime.timedelta:
        return lambda value: (
            value
            if isinstance(value, datetime.timedelta)
            else datetime.timedelta(milliseconds=int(value))
        )
    if issubclass(tp, datetime.datetime):

        def convert_datetime(value: Any) -> Any:
            if isinstance(value, datetime.datetime):
                return value
            if int(value) < 0:
                return None if nullable else datetime.datetime.fromtimestamp(0, _UTC)
            return datetime.datetime.fromtimestamp(int(value) / 1000, _UTC)

        return convert_datetime
    if issubclass(tp, ErrorCode):
        return lambda value: ErrorCode(int(value))
    return None


def _zero(tp: Any) -> Any:
    if _optional_inner(tp) is not None:
        return None
    if typing.get_origin(tp) is tuple:
        return ()
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return build(tp, {})
        if issubclass(tp, ErrorCode):
            return ErrorCode.none
        if issubclass(tp, bool):
            return False
        if issubclass(tp, int):
            return 0
        if issubclass(tp, float):
            return 0.0
        if issubclass(tp, str):
            return ""
        if issubclass(tp, bytes):
            return b""
        if issubclass(tp, uuid.UUID):
            return _ZERO_UUID
        if issubclass(tp, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(tp, datetime.datetime):
            return datetime.datetime.fromtimestamp(0, _UTC)
    raise AssertionError(f"no zero value for {tp!r}")


def ms(value: Any) -> int:
    """Milliseconds of a kio timedelta field (or an int already in ms)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def epoch_ms(value: Any) -> int:
    """Milliseconds since the epoch of a kio datetime field; -1 for None."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)
