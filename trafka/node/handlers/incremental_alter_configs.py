"""IncrementalAlterConfigs v0-1: SET / DELETE / APPEND / SUBTRACT single keys (KIP-339).

* v0: resources with (name, config_operation, value); validate_only. v1: flexible.

Operations: 0 SET, 1 DELETE (back to the inherited value), 2 APPEND and 3 SUBTRACT (list
keys such as cleanup.policy and the `*.replication.throttled.replicas` lists; INVALID_CONFIG
on non-list keys). Same resources, storage, change notification and errors as AlterConfigs: the
replication throttle rates (`leader/follower.replication.throttled.rate`, KIP-73) are
dynamic broker keys (per broker, or the cluster default with the name ""), taking effect on
every broker as soon as it applies the notification, without a restart. GROUP resources
(32, KIP-848: `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`) as in
AlterConfigs (`kafka-configs --entity-type groups` uses this API).

Not implemented: BROKER_LOGGER resources.

Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for a broker, on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED),
as Kafka.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.describe_configs import config_refusal, refresh_topic_from_tree
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.node.topics import TopicError
from trafka.security.authorizer import AclOperation

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_KEYS = frozenset(
    {
        "cleanup.policy",
        "log.cleanup.policy",
        "listeners",
        "log.dirs",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)


def _apply(
    current: dict[str, str | None], changes: list[tuple[str, int, str | None]]
) -> dict[str, str | None]:
    result = dict(current)
    for name, operation, value in changes:
        if operation == SET:
            result[name] = value
        elif operation == DELETE:
            result[name] = None
        elif operation in (APPEND, SUBTRACT):
            if name not in LIST_KEYS:
                raise TopicError(
                    ErrorCode.invalid_config, f"Config {name} is not a list; cannot append"
                )
            items = [v for v in (result.get(name) or "").split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            if operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            result[name] = ",".join(items)
        else:
            raise TopicError(ErrorCode.invalid_request, f"Unknown config operation {operation}")
    return result


def _apply_changes(
    changes: list[tuple[str, int, str | None]], current: dict[str, str | None]
) -> dict[str, str | None]:
    return _apply(current, changes)


@register(
    api_key=ApiKey.INCREMENTAL_ALTER_CONFIGS,
    name="IncrementalAlterConfigs",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    responses = []
    await refresh_topic_from_tree(
        ctx, [(int(r.resource_type), str(r.resource_name)) for r in request.resources]
    )
    loop_slice = LoopSlice()
    for resource in request.resources:
        await loop_slice.tick()
        changes = [(str(c.name), int(c.config_operation), c.value) for c in resource.configs]
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
                functools.partial(_apply_changes, changes),
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
