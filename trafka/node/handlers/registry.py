"""The handler registry: one module per Kafka API registers itself here (STYLE §2).

Each module under `trafka.node.handlers` declares, at import time::

    @register(api_key=ApiKey.API_VERSIONS, name="ApiVersions", min_version=0, max_version=3)
    async def handle(ctx: RequestContext, request: Any) -> Any: ...

`handle` receives the decoded kio request of the negotiated version and returns the kio
response of the same version (`kio_shape.build(response_class(request), {...})`), or None
when no response must be sent (Produce with acks=0). Handlers translate and delegate to the
node's services (`ctx.services`); they hold no state of their own.

ApiVersions is derived from `supported_versions()`; the net server is given the same table
so it answers UNSUPPORTED_VERSION for anything outside it. `load_all()` imports every
handler module (including modules other engineers add later, e.g. the group APIs) so that
a new API is served and advertised by adding one file.

The advertised ranges are those of Apache Kafka 3.0 (kafka-python's `BROKER_API_VERSIONS`
row (3, 0) — kafka-python infers the broker version from ListOffsets v7 and picks its
versions accordingly), capped by what kio can decode and what the handler implements, and
floored where kio (Kafka 4.x schemas, KIP-896) no longer carries the oldest versions.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from trafka.net import protocol
from trafka.node.handlers.context import RequestContext

HandleFunction = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """One registered API: its key, Kafka name, version range and coroutine."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: HandleFunction
    module: str
    advertised_min_version: int | None = None
    """Below min_version: advertised but rejected (Produce v0-2, KAFKA-18659)."""
    advertised: bool = True
    """False: served but left out of ApiVersions (trafka's non-Kafka APIs)."""

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class HandlerRegistry:
    """API key -> ApiHandler. The default instance is `REGISTRY`."""

    def __init__(self) -> None:
        self._handlers: dict[int, ApiHandler] = {}
        self.generation = 0
        """Bumped by every `add`: what is derived from the table (ApiVersions' answer) is
        derived again."""

    def add(self, handler: ApiHandler) -> None:
        existing = self._handlers.get(handler.api_key)
        if existing is not None and existing.module != handler.module:
            raise AssertionError(
                f"API key {handler.api_key} registered twice: {existing.module}, {handler.module}"
            )
        if not 0 <= handler.min_version <= handler.max_version:
            raise AssertionError(f"bad version range for {handler.name}")
        self._handlers[handler.api_key] = handler
        self.generation += 1

    def get(self, api_key: int) -> ApiHandler | None:
        return self._handlers.get(api_key)

    def handlers(self) -> list[ApiHandler]:
        return [self._handlers[key] for key in sorted(self._handlers)]

    def supported_apis(self) -> protocol.SupportedApis:
        """The net server's version table (it answers UNSUPPORTED_VERSION outside it)."""
        return protocol.SupportedApis(
            protocol.ApiVersionRange(
                h.api_key, h.min_version, h.max_version, h.advertised_min_version
            )
            for h in self.handlers()
        )

    def supported_versions(self) -> list[tuple[int, int, int]]:
        """(api_key, advertised min_version, max_version) as ApiVersions lists them."""
        return [
            (
                h.api_key,
                h.min_version if h.advertised_min_version is None else h.advertised_min_version,
                h.max_version,
            )
            for h in self.handlers()
            if h.advertised
        ]


REGISTRY = HandlerRegistry()


def register(
    *,
    api_key: int,
    name: str,
    min_version: int,
    max_version: int,
    advertised_min_version: int | None = None,
    advertised: bool = True,
) -> Callable[[HandleFunction], HandleFunction]:
    """Decorator: register `handle` for `api_key`; advertised=False: not in ApiVersions."""

    def decorate(handle: HandleFunction) -> HandleFunction:
        REGISTRY.add(
            ApiHandler(
                api_key=api_key,
                name=name,
                min_version=min_version,
                max_version=max_version,
                handle=handle,
                module=getattr(handle, "__module__", "?"),
                advertised_min_version=advertised_min_version,
                advertised=advertised,
            )
        )
        return handle

    return decorate


_INFRASTRUCTURE = frozenset({"registry", "context", "kio_shape", "errors", "common"})


def load_all() -> HandlerRegistry:
    """Import every handler module of this package; returns the filled registry."""
    package = importlib.import_module("trafka.node.handlers")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("_") or module.name in _INFRASTRUCTURE:
            continue
        importlib.import_module(f"trafka.node.handlers.{module.name}")
    return REGISTRY
