"""ListConfigResources v0-1: the names of the config resources of some types (KIP-1142).

* v0 (ListClientMetricsResources, KIP-714): the client-metrics subscriptions; trafka has
  none, so the list is empty.
* v1: `resource_types` (empty: every supported type). TOPIC (2): every topic; BROKER (4) and
  BROKER_LOGGER (8): the live brokers' ids; CLIENT_METRICS (16): none; GROUP (32): the group
  ids with dynamic configs (`/config/groups`, KIP-848) - what `kafka-configs --describe
  --entity-type groups` lists besides ListGroups. Another type: UNSUPPORTED_VERSION, as Kafka.

Authorization: DESCRIBE_CONFIGS on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def _empty(request: Any, error: ErrorCode) -> Any:
    return build(
        response_class(request),
        {"throttle_time": 0, "error_code": int(error), "config_resources": []},
    )


@register(
    api_key=ApiKey.LIST_CONFIG_RESOURCES,
    name="ListConfigResources",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS):
        return _empty(request, ErrorCode.cluster_authorization_failed)
    if ctx.api_version == 0:
        return _empty(request, ErrorCode.none)
    wanted = [int(kind) for kind in request.resource_types] or list(SUPPORTED)
    if any(kind not in SUPPORTED for kind in wanted):
        return _empty(request, ErrorCode.unsupported_version)
    services = ctx.services
    resources: list[dict[str, Any]] = []
    for kind in dict.fromkeys(wanted):
        if kind == TOPIC:
            names = sorted(services.topics.topics)
        elif kind in (BROKER, BROKER_LOGGER):
            names = [str(broker) for broker in sorted(services.metadata.live_broker_ids())]
        elif kind == GROUP:
            await services.store.sync()
            names = await services.configs.groups_with_configs()
        else:
            names = []
        resources += [{"resource_name": name, "resource_type": kind} for name in names]
    return await answer(
        request,
        {"throttle_time": 0, "error_code": 0, "config_resources": resources},
        len(resources),
    )
