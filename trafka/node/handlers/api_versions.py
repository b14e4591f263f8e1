"""ApiVersions v0-3: the handshake; the answer is derived from the handler registry.

* v0: error_code + api_keys.
* v1: adds throttle_time_ms.
* v2: no change.
* v3 (KIP-482, KIP-511): flexible body (the response header stays v0, see trafka.net),
  client_software_name/version in the request; supported/finalized features as tagged
  fields, which we leave empty so that librdkafka < 2.2 (kcat) can parse the answer
  (REFERENCE §6).

A request above v3 (kafka-python sends v4 first) never reaches this handler: the net layer
answers UNSUPPORTED_VERSION in the v0 body layout listing our ranges (KIP-511).

Not implemented: feature flags (KIP-584) - no supported or finalized features are listed.
"""

from __future__ import annotations

from typing import Any

from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.net.server import EncodedResponse
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import REGISTRY, register

_ANSWERS: dict[tuple[int, int], EncodedResponse] = {}
"""The encoded answer per (registry generation, version): it depends only on the registry
(fixed once the handlers are loaded), and ApiVersions is exempt from request quotas (never
throttled), so every connection's handshake gets the same bytes. 1,000 connections opened
at once spent a quarter of the node's time building and encoding it (issue 19's S2)."""


@register(api_key=ApiKey.API_VERSIONS, name="ApiVersions", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    key = (REGISTRY.generation, ctx.api_version)
    answer = _ANSWERS.get(key)
    if answer is None:
        answer = EncodedResponse((codec.encode_response(_build(request)),))
        for stale in [k for k in _ANSWERS if k[0] != key[0]]:
            del _ANSWERS[stale]  # an older generation's answers are never asked for again
        _ANSWERS[key] = answer
    return answer


def _build(request: Any) -> Any:
    return build(
        response_class(request),
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": low, "max_version": high}
                for key, low, high in REGISTRY.supported_versions()
            ],
            "throttle_time": 0,
        },
    )
