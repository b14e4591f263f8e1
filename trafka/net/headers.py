"""Request and response headers: byte layouts, parsing and encoding (pure, no I/O).

Layouts (RequestHeader.json / ResponseHeader.json, KIP-482; REFERENCE.md §2.2):

    request header v0 : api_key int16, api_version int16, correlation_id int32
                        (only ControlledShutdown v0 uses it)
    request header v1 : v0 + client_id  (int16 length + UTF-8, -1 = null)
    request header v2 : v1 + tagged fields (uvarint count, then tag/size/bytes each)
                        client_id stays a *classic* int16 string even in v2
                        ("flexibleVersions": "none" for that field)
    response header v0: correlation_id int32
    response header v1: correlation_id int32 + tagged fields

Which header version an (api_key, api_version) uses is decided in `trafka.net.protocol`
(flexible body => header v2 / v1, ApiVersions responses always v0). The frame's int32 size
prefix is not part of the header; see `trafka.net.framing`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

_HEAD = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

#: The fixed part every request header version starts with: api_key, api_version,
#: correlation_id.
REQUEST_HEADER_PREFIX_BYTES: Final = 8
#: Upper bound on tagged fields we skip in a header; Kafka defines none for headers today.
MAX_HEADER_TAGGED_FIELDS: Final = 64


class MalformedHeader(ValueError):
    """The bytes do not form a valid header of the expected version."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A parsed request header (any version)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_request_prefix(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """Return (api_key, api_version, correlation_id) from the first 8 bytes of a request."""
    if len(frame) < REQUEST_HEADER_PREFIX_BYTES:
        raise MalformedHeader(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def read_unsigned_varint(buffer: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes, i.e. 32 bits); return (value, new offset)."""
    value = 0
    shift = 0
    for index in range(5):
        if offset + index >= len(buffer):
            raise MalformedHeader("truncated unsigned varint")
        byte = buffer[offset + index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset + index + 1
        shift += 7
    raise MalformedHeader("unsigned varint longer than 5 bytes")


def write_unsigned_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError("unsigned varint must be >= 0")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_fields(buffer: bytes | bytearray | memoryview, offset: int) -> int:
    """Skip a tagged-field section (contents ignored, KIP-482); return the new offset."""
    count, offset = read_unsigned_varint(buffer, offset)
    if count > MAX_HEADER_TAGGED_FIELDS:
        raise MalformedHeader(f"{count} tagged fields in a header")
    for _ in range(count):
        _tag, offset = read_unsigned_varint(buffer, offset)
        size, offset = read_unsigned_varint(buffer, offset)
        if offset + size > len(buffer):
            raise MalformedHeader("tagged field runs past the end of the frame")
        offset += size
    return offset


def parse_request_header(
    frame: bytes | bytearray | memoryview, header_version: int
) -> tuple[RequestHeader, int]:
    """Parse a request header of `header_version` (0, 1 or 2); return it and the body offset."""
    api_key, api_version, correlation_id = peek_request_prefix(frame)
    offset = REQUEST_HEADER_PREFIX_BYTES
    client_id: str | None = None
    if header_version >= 1:
        if offset + 2 > len(frame):
            raise MalformedHeader("truncated client_id length")
        (length,) = _INT16.unpack_from(frame, offset)
        offset += 2
        if length >= 0:
            if offset + length > len(frame):
                raise MalformedHeader("client_id runs past the end of the frame")
            try:
                client_id = bytes(frame[offset : offset + length]).decode("utf-8")
            except UnicodeDecodeError as error:
                raise MalformedHeader("client_id is not UTF-8") from error
            offset += length
        elif length != -1:
            raise MalformedHeader(f"negative client_id length {length}")
    if header_version >= 2:
        offset = skip_tagged_fields(frame, offset)
    if header_version not in (0, 1, 2):
        raise ValueError(f"no request header version {header_version}")
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, offset


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    header_version: int,
) -> bytes:
    """Encode a request header; tagged-field sections are always empty (0x00)."""
    parts = [_HEAD.pack(api_key, api_version, correlation_id)]
    if header_version >= 1:
        if client_id is None:
            parts.append(_INT16.pack(-1))
        else:
            raw = client_id.encode("utf-8")
            parts.append(_INT16.pack(len(raw)))
            parts.append(raw)
    if header_version >= 2:
        parts.append(b"\x00")
    return b"".join(parts)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tag section)."""
    if header_version == 0:
        return _INT32.pack(correlation_id)
    if header_version == 1:
        return _INT32.pack(correlation_id) + b"\x00"
    raise ValueError(f"no response header version {header_version}")


def parse_response_header(
    frame: bytes | bytearray | memoryview, header_version: int
) -> tuple[int, int]:
    """Return (correlation_id, body offset) of a response frame."""
    if len(frame) < 4:
        raise MalformedHeader("response shorter than its correlation id")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    offset = 4
    if header_version >= 1:
        offset = skip_tagged_fields(frame, offset)
    return correlation_id, offset
