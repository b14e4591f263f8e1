"""Protocol rules above the bytes: header versions, supported version ranges, ApiVersions fallback.

Header version per (api_key, api_version) (RequestHeader.json, ResponseHeader.json,
ApiVersionsResponse.json; REFERENCE.md §2.2):

* request header: v0 for ControlledShutdown v0 only; v2 if the API version is flexible
  (KIP-482); v1 otherwise.
* response header: v1 if the API version is flexible, v0 otherwise - except ApiVersions,
  whose response always uses header v0 so that a client can parse the answer before it knows
  which versions the broker speaks ("Tagged fields are only supported in the body but not in
  the header").

Supported versions: the node passes a `SupportedApis` built from its handler registry; the
server checks each request's version against it. ApiVersions itself is special (KIP-511):
a request whose version is above our maximum is answered with error UNSUPPORTED_VERSION (35)
in the v0 body layout (int16 error_code, int32 count, count x (int16 api_key, int16 min,
int16 max); no throttle time, no tags) listing at least our ApiVersions range, so
kafka-python and librdkafka retry with a version we speak (REFERENCE.md fact 1).

Advertised vs accepted (KAFKA-18659, apache/kafka PR #18727): Kafka 4.0 accepts Produce
v3+ but advertises Produce from v0, because librdkafka derives its MsgVer1/compression
features from the Produce range and refuses compressed produce otherwise. `ApiVersionRange`
has `advertised_min_version` for that; the server rejects what is below `min_version`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from . import codec
from .messages import PRIVATE_API_KEYS

API_VERSIONS_KEY: Final = 18
CONTROLLED_SHUTDOWN_KEY: Final = 7


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    """One API's accepted versions, inclusive, and the minimum we advertise."""

    api_key: int
    min_version: int
    max_version: int
    advertised_min_version: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise ValueError(f"bad version range {self}")
        if self.advertised_min_version is not None and not (
            0 <= self.advertised_min_version <= self.min_version
        ):
            raise ValueError(f"advertised min above accepted min in {self}")

    @property
    def advertised_min(self) -> int:
        if self.advertised_min_version is None:
            return self.min_version
        return self.advertised_min_version

    def accepts(self, api_version: int) -> bool:
        return self.min_version <= api_version <= self.max_version


class SupportedApis:
    """The set of (api_key -> accepted range) the node implements; immutable."""

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[ApiVersionRange]) -> None:
        by_key: dict[int, ApiVersionRange] = {}
        for entry in ranges:
            if entry.api_key in by_key:
                raise ValueError(f"API key {entry.api_key} registered twice")
            by_key[entry.api_key] = entry
        self._ranges: Mapping[int, ApiVersionRange] = MappingProxyType(dict(sorted(by_key.items())))

    def missing_schemas(self) -> list[str]:
        """The versions in the table without a request or response schema, as
        "Name vN" (empty: every one can be decoded and answered). It loads every message
        class (~0.75 s of kio imports), so it is checked by tests, not at each start:
        classes load when a version is first used."""
        return [
            f"{codec.api_name(entry.api_key)} v{version}"
            for entry in self._ranges.values()
            for version in range(entry.min_version, entry.max_version + 1)
            if codec.request_class(entry.api_key, version) is None
            or codec.response_class(entry.api_key, version) is None
        ]

    def __iter__(self) -> Iterator[ApiVersionRange]:
        return iter(self._ranges.values())

    def __len__(self) -> int:
        return len(self._ranges)

    def get(self, api_key: int) -> ApiVersionRange | None:
        return self._ranges.get(api_key)

    def accepts(self, api_key: int, api_version: int) -> bool:
        entry = self._ranges.get(api_key)
        return entry is not None and entry.accepts(api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for (api_key, api_version); raises codec.UnknownMessage."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if codec.is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version for (api_key, api_version); ApiVersions is always v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if codec.is_flexible(api_key, api_version) else 0


_V0_ENTRY = struct.Struct(">hhh")
_V0_HEAD = struct.Struct(">hi")


def api_versions_v0_error_body(supported: SupportedApis) -> bytes:
    """ApiVersions error body in the v0 layout, error UNSUPPORTED_VERSION, all our ranges.

    Layout: error_code int16 (35), api_keys int32 count, then per API: api_key int16,
    min_version int16, max_version int16. Kafka lists every API here; clients only need the
    ApiVersions entry to pick a version to retry with. trafka's private APIs
    (`messages.PRIVATE_API_KEYS`) are left out, as from every ApiVersions answer.
    """
    entries = [e for e in supported if e.api_key not in PRIVATE_API_KEYS]
    parts = [_V0_HEAD.pack(int(ErrorCode.unsupported_version), len(entries))]
    parts.extend(_V0_ENTRY.pack(e.api_key, e.advertised_min, e.max_version) for e in entries)
    return b"".join(parts)
