"""Requests with very many elements, decoded and answered in slices (issue 12, item 4).

Why: the node has one event loop, which also carries replication and the quorum session.
kio decodes and encodes a whole message in one call that holds the GIL (a 200,000-topic
Metadata request: about 0.2 s to decode and more to answer on an idle core, seconds on a
loaded one), long enough to delay every produce on the node and, for a large enough
request, to let the node's quorum session expire.

What: a request frame of at least `LARGE_REQUEST_BYTES` whose API has a slice decoder here
is decoded by it instead of kio, yielding to the event loop every `ELEMENTS_PER_SLICE`
elements (`trio.sleep(0)`); it builds the very kio objects kio would (tests compare both
on every version). `encode_in_slices` writes a response whose one big array is written
element by element (Metadata's topics: `trafka.net.metadata_encoding`) with the same
yields, around kio's encoding of the rest; the handler
returns it as an `EncodedResponse`. Every length and count is checked against the bytes
left before anything is built for it.

While such a request is in progress the cyclic garbage collector is paused (`gc_pause`,
counted across concurrent large requests): building a few hundred thousand objects
otherwise triggers full collections that scan the whole heap in one go, seconds on a
loaded machine (measured: a 200,000-topic request held the loop 1.7 s with it, the
slices alone stay near the slice time). Reference counting still frees everything that
is not cyclic; the collector resumes when the last large request is answered.

Covered: Metadata v0-11 requests and responses (the topics array). Other APIs stay within
the frame bound (`socket.request.max.bytes`) and kio's single call.
"""

from __future__ import annotations

import dataclasses
import gc
import struct
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import trio

from trafka.net import codec

LARGE_REQUEST_BYTES: Final = 64 * 1024
ELEMENTS_PER_SLICE: Final = 500
METADATA_KEY: Final = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _GcPause:
    """Counted pause of the cyclic collector (module docstring)."""

    def __init__(self) -> None:
        self.holders = 0
        self.paused_here = False

    def acquire(self) -> None:
        if self.holders == 0 and gc.isenabled():
            gc.disable()
            self.paused_here = True
        self.holders += 1

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0 and self.paused_here:
            self.paused_here = False
            gc.enable()


gc_pause = _GcPause()


class LargeRequestError(ValueError):
    """A count or length runs past the end of the frame (the connection is closed)."""


class _Cursor:
    __slots__ = ("buffer", "end", "offset")

    def __init__(self, buffer: bytes | bytearray | memoryview, offset: int) -> None:
        self.buffer = buffer
        self.offset = offset
        self.end = len(buffer)

    def take(self, size: int) -> int:
        start = self.offset
        if size < 0 or start + size > self.end:
            raise LargeRequestError("field runs past the end of the frame")
        self.offset = start + size
        return start

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.buffer, self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.buffer, self.take(4))[0]
        return value

    def boolean(self) -> bool:
        return bool(self.buffer[self.take(1)])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.buffer[self.take(1)]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
        raise LargeRequestError("unsigned varint longer than 5 bytes")

    def text(self, size: int) -> str:
        start = self.take(size)
        return bytes(self.buffer[start : start + size]).decode("utf-8")

    def string(self, *, flexible: bool, nullable: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size < 0:
            if nullable and size == -1:
                return None
            raise LargeRequestError(f"negative string length {size}")
        return self.text(size)

    def uuid(self) -> uuid.UUID:
        start = self.take(16)
        return uuid.UUID(bytes=bytes(self.buffer[start : start + 16]))

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


async def _checkpoint(index: int) -> None:
    if index and index % ELEMENTS_PER_SLICE == 0:
        await trio.sleep(0)


async def decode_metadata_request(
    version: int, buffer: bytes | bytearray | memoryview, offset: int
) -> Any:
    """MetadataRequest v0-11 in slices (module docstring); the same object kio builds."""
    cls = codec.request_class(METADATA_KEY, version)
    assert cls is not None
    topic_cls = _element_class(cls, "topics")
    flexible = bool(cls.__flexible__)
    cursor = _Cursor(buffer, offset)
    count = cursor.uvarint() - 1 if flexible else cursor.int32()
    if count < -1 or (count == -1 and version == 0):
        raise LargeRequestError(f"bad topic count {count}")
    topics: tuple[Any, ...] | None = None
    if count >= 0:
        if count > cursor.end - cursor.offset:
            raise LargeRequestError(f"{count} topics cannot fit in the frame")
        built: list[Any] = []
        for index in range(count):
            await _checkpoint(index)
            fields: dict[str, Any] = {}
            if version >= 10:
                topic_id = cursor.uuid()
                fields["topic_id"] = topic_id
            fields["name"] = cursor.string(flexible=flexible, nullable=version >= 10)
            if flexible:
                cursor.skip_tagged_fields()
            built.append(topic_cls(**fields))
        topics = tuple(built)
    values: dict[str, Any] = {"topics": topics}
    if version >= 4:
        values["allow_auto_topic_creation"] = cursor.boolean()
    if 8 <= version <= 10:
        values["include_cluster_authorized_operations"] = cursor.boolean()
    if version >= 8:
        values["include_topic_authorized_operations"] = cursor.boolean()
    if flexible:
        cursor.skip_tagged_fields()
    return cls(**values)


Decoder = Callable[[int, bytes | bytearray | memoryview, int], Awaitable[Any]]
_DECODERS: Final[dict[int, Decoder]] = {METADATA_KEY: decode_metadata_request}


PAUSE_GC_BYTES: Final = 8 * 1024
_NO_GC_PAUSE: Final = frozenset({0, 1})
"""Produce and Fetch: large by nature (records), few objects per byte, and so frequent that
pausing the collector for them could pause it for good."""


def pauses_gc(api_key: int, body_bytes: int) -> bool:
    """Whether the cyclic collector is paused while this request is handled: a body of
    `PAUSE_GC_BYTES` or more names hundreds of elements, and a handler building a few
    hundred thousand objects for them (DescribeConfigs of 3,000 topics: 180,000 config
    entries) otherwise triggers full collections holding the loop for 0.2-0.5 s."""
    return body_bytes >= PAUSE_GC_BYTES and api_key not in _NO_GC_PAUSE


def slice_decoder(api_key: int, body_bytes: int) -> Decoder | None:
    """The slice decoder for a request body of `body_bytes`, if it is large and has one."""
    if body_bytes < LARGE_REQUEST_BYTES:
        return None
    return _DECODERS.get(api_key)


def _element_class(cls: type[Any], field_name: str) -> type[Any]:
    import typing

    hint = typing.get_type_hints(cls)[field_name]
    for candidate in (hint, *typing.get_args(hint)):
        args = typing.get_args(candidate)
        if args and dataclasses.is_dataclass(args[0]):
            return typing.cast(type[Any], args[0])
    raise TypeError(f"{cls.__name__}.{field_name} is not an array of structs")


def element_class(cls: type[Any], field_name: str) -> type[Any]:
    """The struct class of the array field `field_name` of the kio class `cls`."""
    return _element_class(cls, field_name)


def _array_prefix(count: int, flexible: bool) -> bytes:
    if not flexible:
        return _INT32.pack(count)
    out = bytearray()
    value = count + 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _trailing_bytes(response_cls: type[Any], field_name: str) -> int:
    """Bytes kio writes after the array `field_name` (Metadata: cluster authorized
    operations in v8-10, then the tagged-field count in flexible versions)."""
    fields = [f for f in dataclasses.fields(response_cls) if f.init]
    names = [f.name for f in fields]
    after = fields[names.index(field_name) + 1 :]
    size = 0
    for field in after:
        kafka_type = field.metadata.get("kafka_type")
        if kafka_type == "int32":
            size += 4
        else:
            raise TypeError(f"cannot slice around {field.name} ({kafka_type})")
    return size + (1 if response_cls.__flexible__ else 0)


async def encode_in_slices(
    response: Any,
    field_name: str,
    write_element: Callable[[Any, bytearray], None],
    items: Sequence[Any],
) -> list[bytes]:
    """Encode `response` (whose `field_name` array is empty) with `items` as that array,
    each written by `write_element(item, out)`, yielding between slices. Returns the body
    chunks; equal to kio's encoding of the whole response (tests)."""
    flexible = bool(type(response).__flexible__)
    empty = codec.encode_response(response)
    tail = _trailing_bytes(type(response), field_name)
    head_size = len(empty) - tail - len(_array_prefix(0, flexible))
    chunks = [empty[:head_size] + _array_prefix(len(items), flexible)]
    out = bytearray()
    for index, item in enumerate(items):
        if index and index % ELEMENTS_PER_SLICE == 0:
            chunks.append(bytes(out))
            out = bytearray()
            await trio.sleep(0)
        write_element(item, out)
    chunks.append(bytes(out))
    chunks.append(empty[len(empty) - tail :] if tail else b"")
    return chunks
