"""PushTelemetry v0 (KIP-714): accepted and dropped.

trafka's GetTelemetrySubscriptions requests no metrics, so well-behaved clients never push.
A push that arrives anyway is answered as Kafka's broker answers it, and its metrics are
dropped (there is no client-metrics reporter to hand them to):

* UNKNOWN_SUBSCRIPTION_ID when `subscription_id` is not the one trafka hands out (the
  client then asks for a new subscription);
* TELEMETRY_TOO_LARGE when `metrics` exceeds `telemetry_max_bytes` (1 MiB);
* INVALID_REQUEST for the zero client instance id;
* otherwise NONE (also for `terminating`).

No authorization (KIP-714). Not implemented: decoding the OpenTelemetry payload, exposing
the pushed metrics, per-client push rate limits.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.get_telemetry_subscriptions import (
    EMPTY_SUBSCRIPTION_ID,
    TELEMETRY_MAX_BYTES,
)
from trafka.node.handlers.registry import register


@register(api_key=ApiKey.PUSH_TELEMETRY, name="PushTelemetry", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    instance = getattr(request, "client_instance_id", None)
    if instance is None or instance.int == 0:
        error = ErrorCode.invalid_request
    elif int(request.subscription_id) != EMPTY_SUBSCRIPTION_ID:
        error = ErrorCode.unknown_subscription_id
    elif len(request.metrics or b"") > TELEMETRY_MAX_BYTES:
        error = ErrorCode.telemetry_too_large
    else:
        error = ErrorCode.none
    return build(response_class(request), {"throttle_time": 0, "error_code": int(error)})
