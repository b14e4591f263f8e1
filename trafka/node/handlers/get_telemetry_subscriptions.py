"""GetTelemetrySubscriptions v0 (KIP-714): an empty subscription, so clients never push.

Kafka 3.7+ clients (the Java producer, consumer and admin client with
`enable.metrics.push=true`, their default; librdkafka 2.5+) ask every broker that
advertises this API for the metrics it wants pushed. trafka has no client-metrics
subscriptions (Kafka's `kafka-client-metrics.sh` / `ClientMetrics` config resources), so
the answer requests no metrics: a client then never sends PushTelemetry and only asks
again after `push_interval_ms`, as with a Kafka broker that has no subscription.

* A request with the zero client instance id gets a fresh random one (Kafka's broker
  assigns it; the Java client exposes it as `clientInstanceId()`); a known id is echoed
  back as Kafka does (the response field is the assigned id, else the given one).
* `subscription_id` is a fixed value (`EMPTY_SUBSCRIPTION_ID`) that PushTelemetry accepts.
* Kafka's defaults for the rest: push interval 5 minutes (`DEFAULT_INTERVAL_MS`), 1 MiB
  `telemetry.max.bytes`, delta temporality, compression zstd, lz4, gzip, snappy.

No authorization (KIP-714: telemetry needs none). Not implemented: subscriptions
(`ClientMetrics` resources in DescribeConfigs/IncrementalAlterConfigs) and the per-client
instance state Kafka keeps (push rate limiting, THROTTLING_QUOTA_EXCEEDED for early pushes).
"""

from __future__ import annotations

import uuid
from typing import Any

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register

EMPTY_SUBSCRIPTION_ID = 0x7FFF_0714
"""The one subscription trafka hands out: no metrics requested."""
PUSH_INTERVAL_MS = 300_000
TELEMETRY_MAX_BYTES = 1_048_576
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
"""zstd, lz4, gzip, snappy: Kafka's ClientMetricsManager order."""


@register(
    api_key=ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    name="GetTelemetrySubscriptions",
    min_version=0,
    max_version=0,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    given = getattr(request, "client_instance_id", None)
    instance = given if given is not None and given.int != 0 else uuid.uuid4()
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": 0,
            "client_instance_id": instance,
            "subscription_id": EMPTY_SUBSCRIPTION_ID,
            "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
            "push_interval": PUSH_INTERVAL_MS,
            "telemetry_max_bytes": TELEMETRY_MAX_BYTES,
            "delta_temporality": True,
            "requested_metrics": [],
        },
    )
