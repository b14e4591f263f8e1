"""AlterConfigs v0-2: replace a topic's or broker's dynamic configs (the whole set).

* v0: resources with key/value lists; validate_only. v1: no change. v2: flexible.

TOPIC (2): the given keys become the topic's complete override set (`/config/topics/<t>`),
validated by `trafka.log.config` (INVALID_CONFIG). BROKER (4): this broker's dynamic keys
(`/config/brokers/<id>`), or with the name "" the cluster-wide default
(`/config/brokers/<default>`); only keys marked dynamic in `trafka.node.config.broker`
(INVALID_REQUEST otherwise). After the write the broker creates a config change
notification (`/config/changes/config_change_<seq>`, `trafka.node.config.changes`): every
broker, the partition leaders included, re-reads the entity and applies it to its topic
cache, its open logs, its replication throttles (KIP-73) and its broker config, without a
restart.
Topic resources start from the topic's current configs in the tree (synced first, as in
DescribeConfigs), not from a possibly stale cache.
GROUP (32, KIP-848): the group's complete override set (`/config/groups/<g>`,
`trafka.node.config.group`), checked against the broker's `group.consumer.min/max.*`
bounds (INVALID_CONFIG with Kafka's messages); applied by the group's coordinator on the
members' next heartbeats.
Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST.

Not implemented: BROKER_LOGGER.

Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for a broker, on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED),
as Kafka.
"""

from __future__ import annotations

import functools
from typing import Any

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.describe_configs import config_refusal, refresh_topic_from_tree
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation


def _replace_all(
    configs: dict[str, str | None], _current: dict[str, str | None]
) -> dict[str, str | None]:
    return configs


@register(api_key=ApiKey.ALTER_CONFIGS, name="AlterConfigs", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    responses = []
    await refresh_topic_from_tree(
        ctx, [(int(r.resource_type), str(r.resource_name)) for r in request.resources]
    )
    loop_slice = LoopSlice()
    for resource in request.resources:
        await loop_slice.tick()
        configs = {str(c.name): c.value for c in resource.configs}
        refused = config_refusal(
            ctx,
            AclOperation.ALTER_CONFIGS,
            int(resource.resource_type),
            str(resource.resource_name),
        )
        if refused is not None:
            error_code: int = int(refused[0])
            message: str | None = refused[1]
        else:
            error_code, message = await ctx.services.configs.alter_configs(
                int(resource.resource_type),
                str(resource.resource_name),
                functools.partial(_replace_all, configs),
                validate_only=bool(request.validate_only),
            )
        responses.append(
            {
                "error_code": error_code,
                "error_message": message,
                "resource_type": int(resource.resource_type),
                "resource_name": str(resource.resource_name),
            }
        )
    return await answer(request, {"throttle_time": 0, "responses": responses}, len(responses))
