"""CreatePartitions v0-3: add partitions to existing topics (KIP-195).

* v0: topics with a new total count and optional explicit assignments; validate_only.
* v1: no change. v2: flexible (KIP-482). v3: THROTTLING_QUOTA_EXCEEDED (KIP-599).

Controller mutation quota (KIP-599, `controller_mutation_rate`; trafka.node.quota): a topic
that passed every check is charged the partitions it adds; from v3 a topic is refused with
THROTTLING_QUOTA_EXCEEDED while the client's quota is exceeded (strict), before v3 the
partitions are added and only the response is throttled (permissive); throttle_time_ms says
how long, and the connection is muted that long. `validate_only` is not charged.

Errors per topic: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (the count does not grow),
INVALID_REPLICA_ASSIGNMENT (wrong number of assignments, unknown or duplicate brokers),
INVALID_REQUEST (a topic named twice), INVALID_REPLICATION_FACTOR (more replicas than live
brokers).

Not implemented: create-partition policies.

Authorization: ALTER on each topic (else TOPIC_AUTHORIZATION_FAILED for it), as Kafka.
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


@register(api_key=ApiKey.CREATE_PARTITIONS, name="CreatePartitions", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    counts = Counter(str(t.name) for t in request.topics)
    results = []
    loop_slice = LoopSlice()
    mutations = ctx.controller_mutations(strict_since_version=3)
    for topic in request.topics:
        await loop_slice.tick()
        name = str(topic.name)
        result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            if counts[name] > 1:
                raise TopicError(ErrorCode.invalid_request, "Duplicate topic in request.")
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, name):
                raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            assignments = (
                [[int(b) for b in a.broker_ids] for a in topic.assignments]
                if topic.assignments
                else None
            )
            await services.topic_admin.add_partitions(
                name,
                int(topic.count),
                assignments,
                validate_only=bool(request.validate_only),
                charge=mutations,
            )
        except TopicError as error:
            result["error_code"] = int(error.error_code)
            result["error_message"] = error.message
        results.append(result)
    throttle_ms = mutations.finish()
    ctx.mute_for(throttle_ms)
    return await answer(request, {"throttle_time": throttle_ms, "results": results}, len(results))
