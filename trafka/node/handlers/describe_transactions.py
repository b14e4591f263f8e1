"""DescribeTransactions v0: the coordinator's view of transactional ids (KIP-664).

Each id is answered by this node if it coordinates it: state (Kafka's names), timeout,
start time (-1 when none is open), producer id and epoch, and the partitions of the open
transaction. NOT_COORDINATOR for ids another node coordinates; TRANSACTIONAL_ID_NOT_FOUND
for unknown ids.

Authorization (Kafka's table): DESCRIBE on each TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id (the coordinator is not asked).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

MAX_IDS = 10_000


def _unauthorized(transactional_id: str) -> dict[str, Any]:
    return {
        "error_code": int(ErrorCode.transactional_id_authorization_failed),
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


@register(
    api_key=ApiKey.DESCRIBE_TRANSACTIONS, name="DescribeTransactions", min_version=0, max_version=0
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.services.transactions
    states = []
    for transactional_id in request.transactional_ids[:MAX_IDS]:
        if not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, str(transactional_id)
        ):
            states.append(_unauthorized(str(transactional_id)))
            continue
        found = await service.describe(str(transactional_id))
        topics: dict[str, list[int]] = {}
        for tp in found.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            {
                "error_code": int(found.error),
                "transactional_id": found.transactional_id,
                "transaction_state": found.state,
                "transaction_timeout": found.transaction_timeout_ms,
                "transaction_start_time": found.start_timestamp_ms,
                "producer_id": found.producer_id,
                "producer_epoch": found.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return build(response_class(request), {"throttle_time": 0, "transaction_states": states})
