"""CreateTopics v2-7: create topics with partitions, replication factor, assignments, configs.

* v2: no change from v1 (validate_only, error_message arrived in v1). v3: no change.
* v4: num_partitions / replication_factor may be -1 = broker defaults (KIP-464).
* v5: flexible (KIP-482); the response carries num_partitions, replication_factor and the
  topic's configs (KIP-525). v6: THROTTLING_QUOTA_EXCEEDED (KIP-599). v7: topic_id in the
  response (KIP-516).

Controller mutation quota (KIP-599, `controller_mutation_rate`; trafka.node.quota): a topic
that passed every check is charged its partition count; from v6 a topic is refused with
THROTTLING_QUOTA_EXCEEDED while the client's quota is exceeded (strict), before v6 every
topic is created and only the response is throttled (permissive). throttle_time_ms says how
long, and the connection is muted that long. `validate_only` is not charged.

Checks, in Kafka's order: topic name rules (INVALID_TOPIC_EXCEPTION: empty, '.', '..',
> 249 chars, characters outside [a-zA-Z0-9._-], a '.'/'_' collision with an existing topic),
TOPIC_ALREADY_EXISTS, INVALID_REQUEST (both counts and explicit assignments),
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (more than the live brokers),
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG (trafka.log.config rules). A topic named twice in
one request: INVALID_REQUEST for it. `validate_only` runs every check and writes nothing.

Authorization: CREATE on the CLUSTER or on the topic (else TOPIC_AUTHORIZATION_FAILED), as
Kafka. Not implemented: create-topic policies (POLICY_VIOLATION never happens); KIP-430's
DESCRIBE_CONFIGS check on the returned configs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.large_answers import LoopSlice, answer
from trafka.node.handlers.registry import register
from trafka.node.topics import TopicError
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.CREATE_TOPICS, name="CreateTopics", min_version=2, max_version=7)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    counts = Counter(str(t.name) for t in request.topics)
    cluster_create = ctx.authorize(AclOperation.CREATE)
    results = []
    loop_slice = LoopSlice()
    elements = 0
    mutations = ctx.controller_mutations(strict_since_version=6)
    for topic in request.topics:
        await loop_slice.tick()
        name = str(topic.name)
        result: dict[str, Any] = {
            "name": name,
            "error_code": 0,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }
        try:
            if counts[name] > 1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    f"Create topics request from client contains "
                    f"multiple entries for the following topics: {name}",
                )
            if not cluster_create and not ctx.authorize(
                AclOperation.CREATE, ResourceType.TOPIC, name
            ):
                raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            configs = {str(c.name): c.value for c in topic.configs}
            if any(v is None for v in configs.values()):
                raise TopicError(
                    ErrorCode.invalid_config, "Null value not supported for topic configs"
                )
            clean = {k: str(v) for k, v in configs.items()}
            assignments = {
                int(a.partition_index): [int(b) for b in a.broker_ids] for a in topic.assignments
            }
            state_or_plan = await services.topic_admin.create_topic(
                name,
                int(topic.num_partitions),
                int(topic.replication_factor),
                assignments,
                clean,
                validate_only=bool(request.validate_only),
                charge=mutations,
            )
            result["num_partitions"] = len(state_or_plan.partitions)
            result["replication_factor"] = state_or_plan.replication_factor
            result["topic_id"] = state_or_plan.topic_id
            result["configs"] = [
                {
                    "name": entry.name,
                    "value": entry.value,
                    "read_only": entry.read_only,
                    "config_source": int(entry.source),
                    "is_sensitive": entry.sensitive,
                }
                for entry in services.configs.describe_topic_configs(name, clean)
            ]
        except TopicError as error:
            result["error_code"] = int(error.error_code)
            result["error_message"] = error.message
        results.append(result)
        elements += 1 + len(result["configs"] or ())
    throttle_ms = mutations.finish()
    ctx.mute_for(throttle_ms)
    return await answer(request, {"throttle_time": throttle_ms, "topics": results}, elements)
