"""Message bodies: (api_key, api_version) -> class, decode and encode (pure, no I/O).

One serializer for kio's generated classes and the classes declared in
`trafka.net.messages`: kio's native ``entity_reader`` and its ``entity_writer`` both work
from dataclass field metadata (``kafka_type``, ``tag``) and the class's ``__flexible__``.

Speed (measured, docs/protocol.md): kio's native reader decodes a Produce request in 2-8 us
(records stay opaque bytes), so Produce needs no specialised decoder. kio's pure-Python
writer takes ~8-14 us per partition for a Fetch response; `trafka.net.fetch_encoding` has
the specialised Fetch encoder that also emits `FileRegion` chunks for sendfile.

Errors: any failure to decode becomes `MalformedMessage`; a version neither kio nor
`trafka.net.messages` knows is `UnknownMessage`. Trailing bytes after a body are ignored,
as Kafka does.
"""

from __future__ import annotations

import functools
import io
from typing import Any, Final

import kio.index
import kio.serial
from kio.schema.index import api_key_map

from . import guard
from .messages import DECLARED_API_NAMES, DECLARED_REQUESTS, DECLARED_RESPONSES

#: Largest version number we look up (Kafka's highest today is < 20).
_MAX_VERSION_LOOKUP: Final = 64


class CodecError(ValueError):
    """Base class of codec failures."""


class UnknownMessage(CodecError):
    """No class is known for this (api_key, api_version)."""


class MalformedMessage(CodecError):
    """The bytes do not decode as the expected message."""


def api_name(api_key: int) -> str:
    """Kafka's name of an API ("Produce", "LeaderAndIsr", ...) or "Unknown(<key>)"."""
    if api_key in DECLARED_API_NAMES:
        return DECLARED_API_NAMES[api_key]
    name = api_key_map.get(api_key)
    if name is None:
        return f"Unknown({api_key})"
    return "".join(part.capitalize() for part in name.split("_"))


@functools.cache
def request_class(api_key: int, api_version: int) -> type[Any] | None:
    """The request class of (api_key, api_version), declared or from kio; None if unknown."""
    declared = DECLARED_REQUESTS.get((api_key, api_version))
    if declared is not None:
        return declared
    try:
        return kio.index.load_request_schema(api_key, api_version)
    except kio.index.KioIndexError:
        return None


@functools.cache
def response_class(api_key: int, api_version: int) -> type[Any] | None:
    """The response class of (api_key, api_version), declared or from kio; None if unknown."""
    declared = DECLARED_RESPONSES.get((api_key, api_version))
    if declared is not None:
        return declared
    try:
        return kio.index.load_response_schema(api_key, api_version)
    except kio.index.KioIndexError:
        return None


@functools.cache
def known_versions(api_key: int) -> tuple[int, ...]:
    """Every version of `api_key` for which both a request and a response class exist."""
    return tuple(
        version
        for version in range(_MAX_VERSION_LOOKUP)
        if request_class(api_key, version) is not None
        and response_class(api_key, version) is not None
    )


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether (api_key, api_version) is a flexible version (KIP-482)."""
    cls = request_class(api_key, api_version)
    if cls is None:
        raise UnknownMessage(f"no schema for {api_name(api_key)} v{api_version}")
    return bool(cls.__flexible__)


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(cls: type[Any]) -> Any:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = kio.serial.entity_reader(cls)
    return reader


def _writer(cls: type[Any]) -> Any:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = kio.serial.entity_writer(cls)
    return writer


def _decode(
    cls: type[Any], buffer: bytes | bytearray | memoryview, offset: int, max_elements: int | None
) -> Any:
    try:
        # kio's native reader pre-reserves compact arrays from the claimed count and reads a
        # null count of a non-nullable array as None: check every count against the bytes
        # present, the nulls and the element cap first (trafka.net.guard).
        guard.check(cls, buffer, offset, max_elements)
        value, _size = _reader(cls)(buffer, offset)
    except Exception as error:  # kio raises DecodeError, ValueError, UnicodeError, ...
        raise MalformedMessage(f"cannot decode {cls.__name__}: {error!r}") from error
    return value


def _encode(message: Any) -> bytes:
    with io.BytesIO() as buffer:
        _writer(type(message))(buffer, message)
        return buffer.getvalue()


def decode_request(
    api_key: int, api_version: int, buffer: bytes | bytearray | memoryview, offset: int = 0
) -> Any:
    """Decode a request body that starts at `offset` of `buffer`."""
    cls = request_class(api_key, api_version)
    if cls is None:
        raise UnknownMessage(f"no schema for {api_name(api_key)} v{api_version} request")
    return _decode(cls, buffer, offset, guard.MAX_REQUEST_ELEMENTS)


def decode_response(
    api_key: int, api_version: int, buffer: bytes | bytearray | memoryview, offset: int = 0
) -> Any:
    """Decode a response body that starts at `offset` of `buffer`."""
    cls = response_class(api_key, api_version)
    if cls is None:
        raise UnknownMessage(f"no schema for {api_name(api_key)} v{api_version} response")
    return _decode(cls, buffer, offset, None)  # a server's answer may be large


def entity_writer(cls: type[Any]) -> Any:
    """kio's writer of one struct class, `writer(buffer, value)` (for encoding a message's
    array element by element, `trafka.net.large_requests`)."""
    return _writer(cls)


def encode_request(request: Any) -> bytes:
    """Encode a request body (no header, no size prefix)."""
    return _encode(request)


def encode_response(response: Any) -> bytes:
    """Encode a response body (no header, no size prefix)."""
    return _encode(response)


def encode_with_kio(message: Any) -> bytes:
    """Encode with kio's generic writer only (reference for the fast path's tests)."""
    return _encode(message)


def decode_with_kio(cls: type[Any], buffer: bytes | bytearray | memoryview, offset: int = 0) -> Any:
    """Decode with kio's generic reader only (reference for the fast path's tests)."""
    return _decode(cls, buffer, offset, None)
