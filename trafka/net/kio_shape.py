"""Build kio message dataclasses of any version from plain, version-independent data.

A handler computes one answer (topics, partitions, error codes as ints, times in ms) and
`build(ResponseClass, data)` turns it into the kio dataclass of the version the client asked
for: fields the version lacks are dropped (a name that no struct of any version of the API
has raises `UnknownField`: a misspelt field fails at once instead of being sent as zero),
fields the data lacks take the dataclass default or the type's zero value, and Kafka's wire
types are converted (ms -> `timedelta` for `timedelta_i32/64`, ms -> aware `datetime` for
`datetime_i64` with -1 -> None where nullable, int -> `ErrorCode`). This keeps one handler
per API instead of one per version (STYLE §2) without hand-parsing anything (STYLE §3).

`response_class(request)` finds the kio response class paired with a decoded request.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import pkgutil
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.static.primitive import i32Timedelta, i64Timedelta

from trafka.net import codec
from trafka.net.messages import DECLARED_REQUESTS, DECLARED_RESPONSES

_UTC = datetime.UTC
_ZERO_UUID = uuid.UUID(int=0)
_API_KEYS_BY_NAME = {name: key for key, name in api_key_map.items()}


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
    """An instance of kio dataclass `cls` from `data` (nested mappings for nested structs).

    A key that is a field of no struct of any version of the message's API (a misspelt
    field) raises `UnknownField` at once, instead of being dropped and its field sent as
    zero; a key that only other versions or structs have is dropped (one handler answers
    every version)."""
    unknown = data.keys() - _known_names(cls)
    if unknown:
        raise UnknownField(f"{cls.__name__}: no version has the field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, convert, required, zero in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = value if convert is None else convert(value)
        elif required:
            kwargs[name] = zero
    return cls(**kwargs)


Converter = Callable[[Any], Any]


class UnknownField(KeyError):
    """`build` got a key no version of the message has (a programming error)."""


@cache
def _known_names(cls: Any) -> frozenset[str]:
    """Every field name of every struct of every version of `cls`'s API, requests and
    responses (`api_field_names`). Wide on purpose: one handler answers every version, and
    handlers share one mapping between structs (FindCoordinator's v0-3 response takes the
    fields of v4's `Coordinator` entry, its `key` dropped), so only a name the API has
    nowhere is an error. A class of no known API is checked against its own fields."""
    api_key = _api_key_of(cls)
    if api_key is None:
        return frozenset(f.name for f in dataclasses.fields(cls))
    return api_field_names(api_key) | {f.name for f in dataclasses.fields(cls)}


def api_field_names(api_key: int) -> frozenset[str]:
    """Every field name of every struct of every version of an API (requests and responses):
    what a handler's literal field names are checked against (tests/node/test_handler_fields)."""
    return frozenset(
        f.name for klass in _api_dataclasses(api_key) for f in dataclasses.fields(klass)
    )


@cache
def _api_dataclasses(api_key: int | None) -> tuple[type, ...]:
    """Every dataclass of every version of an API, requests and responses."""
    classes: list[type] = []
    name = api_key_map.get(api_key) if api_key is not None else None
    if name is not None:
        package = importlib.import_module(f"kio.schema.{name}")
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("v"):
                for direction in ("request", "response"):
                    module = importlib.import_module(f"{package.__name__}.{info.name}.{direction}")
                    classes.extend(_dataclasses_of(module))
    for declared in (DECLARED_REQUESTS, DECLARED_RESPONSES):
        for (key, _version), declared_class in declared.items():
            if key == api_key:
                classes.extend(_dataclasses_of(sys.modules[declared_class.__module__]))
    return tuple(dict.fromkeys(classes))


def _api_key_of(cls: Any) -> int | None:
    """The API a kio or declared message or entity class belongs to (None: unknown)."""
    parts = cls.__module__.split(".")
    if len(parts) == 5 and parts[:2] == ["kio", "schema"] and parts[3].startswith("v"):
        return _API_KEYS_BY_NAME.get(parts[2])
    for declared in (DECLARED_REQUESTS, DECLARED_RESPONSES):
        for (key, _version), declared_class in declared.items():
            if declared_class.__module__ == cls.__module__:
                return key
    return None


def _dataclasses_of(module: types.ModuleType) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == module.__name__
    ]


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
