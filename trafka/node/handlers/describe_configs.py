"""DescribeConfigs v1-4: topic, broker and group configs with Kafka's names, values and sources.

* v1: include_synonyms; config_source replaces is_default (KIP-226).
* v2: no change. v3: include_documentation, config_type (KIP-569). v4: flexible (KIP-482).

Resources: TOPIC (2) - every topic key of `trafka.node.config.topic` with its value:
the topic override (DYNAMIC_TOPIC_CONFIG), else the broker key it inherits from (synonym,
STATIC_BROKER_CONFIG / DYNAMIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG);
BROKER (4) - every key of `trafka.node.config.broker` for this broker (its own id; another
broker's id gets INVALID_REQUEST: clients send broker resources to that broker); the name ""
lists the cluster-wide dynamic defaults (`/config/brokers/<default>`, only the keys set
there, DYNAMIC_DEFAULT_BROKER_CONFIG), as Kafka does.
GROUP (32, KIP-848) - the group keys (`consumer.session.timeout.ms`,
`consumer.heartbeat.interval.ms`): the group's override (`/config/groups/<g>`,
DYNAMIC_GROUP_CONFIG) else the broker key it overrides (`trafka.node.config.group`); any
group id, with or without members, as Kafka.
`configuration_keys` filters; unknown keys are omitted.
Sensitive values (controller.quorum.secret) are null with is_sensitive=true.

Topic configs are read fresh: before a TOPIC resource is described (or altered, by
AlterConfigs / IncrementalAlterConfigs) the broker syncs with the quorum and re-reads the
topic from the tree (`refresh_topic_from_tree`). A config written through another broker
reaches this broker's caches anyway through the config change notifications
(`trafka.node.config.changes`); the sync makes the answer read-your-writes at once.
Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (bad resource type or broker id).

Not implemented: BROKER_LOGGER (8) resources (INVALID_REQUEST), ACLs.

Authorization: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for a broker, on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED),
as Kafka (`config_refusal`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32


def config_refusal(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> tuple[ErrorCode, str] | None:
    """Kafka's check of a config resource: `operation` (DESCRIBE_CONFIGS / ALTER_CONFIGS) on
    the topic (TOPIC_AUTHORIZATION_FAILED) or, for brokers, on the CLUSTER
    (CLUSTER_AUTHORIZATION_FAILED); None when allowed."""
    if resource_type == TOPIC_RESOURCE:
        if ctx.authorize(operation, ResourceType.TOPIC, name):
            return None
        return ErrorCode.topic_authorization_failed, f"Authorization failed for topic {name}"
    if resource_type == GROUP_RESOURCE:
        if ctx.authorize(operation, ResourceType.GROUP, name):
            return None
        return ErrorCode.group_authorization_failed, f"Authorization failed for group {name}"
    if ctx.authorize(operation):
        return None
    return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."


async def refresh_topic_from_tree(ctx: RequestContext, resources: list[tuple[int, str]]) -> None:
    """Sync with the quorum once, then re-read every TOPIC resource's topic into the cache
    (its assignment, partition states and `/config/topics/<t>`). A topic this broker has not
    heard of from the controller yet is read too: whether a topic exists is decided by the
    tree, as Kafka's ZK-mode admin manager does (`zkClient.topicExists`)."""
    services = ctx.services
    names = sorted({name for kind, name in resources if kind == TOPIC_RESOURCE and name})
    if not names:
        if any(kind == GROUP_RESOURCE for kind, _ in resources):
            await services.store.sync()  # group configs are read from the tree
        return
    await services.store.sync()
    loop_slice = LoopSlice()
    for name in names:
        await loop_slice.tick()
        await services.topics.refresh_topic(name)


@register(api_key=ApiKey.DESCRIBE_CONFIGS, name="DescribeConfigs", min_version=1, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    await refresh_topic_from_tree(
        ctx, [(int(r.resource_type), str(r.resource_name)) for r in request.resources]
    )
    loop_slice = LoopSlice()
    elements = 0
    for resource in request.resources:
        await loop_slice.tick()
        resource_type = int(resource.resource_type)
        name = str(resource.resource_name)
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        result: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource_type,
            "resource_name": name,
            "configs": [],
        }
        refused = config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, resource_type, name)
        if refused is not None:
            result["error_code"], result["error_message"] = int(refused[0]), refused[1]
            results.append(result)
            continue
        if resource_type == TOPIC_RESOURCE:
            if services.topics.get(name) is None:
                result["error_code"] = int(ErrorCode.unknown_topic_or_partition)
                result["error_message"] = f"Topic {name} does not exist"
                results.append(result)
                continue
            entries = services.configs.describe_topic_configs(name)
        elif resource_type == GROUP_RESOURCE and name:
            entries = await services.configs.describe_group_configs(name)
        elif resource_type == BROKER_RESOURCE and name == str(services.node_id):
            entries = services.configs.describe_broker_configs()
        elif resource_type == BROKER_RESOURCE and name == "":
            entries = services.configs.describe_default_broker_configs()
        else:
            result["error_code"] = int(ErrorCode.invalid_request)
            result["error_message"] = f"Unsupported resource {resource_type}/{name!r}"
            results.append(result)
            continue
        result["configs"] = [
            {
                "name": entry.name,
                "value": entry.value,
                "read_only": entry.read_only,
                "config_source": int(entry.source),
                "is_sensitive": entry.sensitive,
                "synonyms": [
                    {"name": n, "value": v, "source": int(s)} for n, v, s in entry.synonyms
                ]
                if include_synonyms
                else [],
                "config_type": entry.config_type,
                "documentation": entry.documentation if include_documentation else None,
            }
            for entry in entries
            if keys is None or entry.name in keys
        ]
        elements += len(result["configs"])
        results.append(result)
    elements += len(results)
    return await answer(request, {"throttle_time": 0, "results": results}, elements)
