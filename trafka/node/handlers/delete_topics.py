"""DeleteTopics v1-6: delete topics (their znodes, configs and local logs).

* v1: throttle_time_ms. v2, v3: no change. v4: flexible (KIP-482).
* v5: error_message per topic; THROTTLING_QUOTA_EXCEEDED (KIP-599). v6: topics by name or
  id (KIP-516).

Controller mutation quota (KIP-599, `controller_mutation_rate`; trafka.node.quota): a topic
about to be deleted is charged its partition count; from v5 a topic is refused with
THROTTLING_QUOTA_EXCEEDED while the client's quota is exceeded (strict), before v5 every
topic is deleted and only the response is throttled (permissive); throttle_time_ms says
how long, and the connection is muted that long.

Errors per topic: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED
(`delete.topic.enable=false`), INVALID_TOPIC_EXCEPTION for internal topics, INVALID_REQUEST
when a topic is named twice.

Not implemented: the seeds' asynchronous deletion states (CTL deletion flow, issue 5): on
one node the topic is removed from the tree and its logs deleted before the answer.

Authorization: DELETE on each topic (else TOPIC_AUTHORIZATION_FAILED for it), as Kafka.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.topics import TopicError
from trafka.security.authorizer import AclOperation, ResourceType

_ZERO = uuid.UUID(int=0)


@register(api_key=ApiKey.DELETE_TOPICS, name="DeleteTopics", min_version=1, max_version=6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(str(name), None) for name in request.topic_names]
    counts = Counter(name for name, _ in wanted if name)
    mutations = ctx.controller_mutations(strict_since_version=5)
    results = []
    for name, topic_id in wanted:
        result: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or _ZERO,
            "error_code": 0,
            "error_message": None,
        }
        try:
            if not name and topic_id is not None and topic_id != _ZERO:
                state = services.topics.by_id(topic_id)
                if state is None:
                    raise TopicError(
                        ErrorCode.unknown_topic_id, "This server does not host this topic ID."
                    )
                name = state.name
                result["name"] = name
            if not name:
                raise TopicError(ErrorCode.invalid_request, "Neither topic name nor id given")
            if counts[name] > 1:
                raise TopicError(ErrorCode.invalid_request, "Duplicate topic in request.")
            if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            state = services.topics.get(name)
            if state is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            if state.is_internal:
                raise TopicError(
                    ErrorCode.invalid_topic_exception, f"Cannot delete internal topic {name}"
                )
            result["topic_id"] = state.topic_id
            await services.topic_admin.delete_topic(name, charge=mutations)
        except TopicError as error:
            result["error_code"] = int(error.error_code)
            result["error_message"] = error.message
        results.append(result)
    throttle_ms = mutations.finish()
    ctx.mute_for(throttle_ms)
    return build(response_class(request), {"throttle_time": throttle_ms, "responses": results})
