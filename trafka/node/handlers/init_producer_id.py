"""InitProducerId v0-4: producer ids for idempotent producers (KIP-98).

* v0: transactional_id (null for idempotent producers), transaction_timeout_ms.
* v1: no change. v2: flexible (KIP-482). v3: producer_id + producer_epoch in the request
  (KIP-360: an idempotent producer may ask to bump its epoch after an error; we hand out a
  fresh producer id with epoch 0, which Kafka also does for non-transactional producers).
* v4: no change (PRODUCER_FENCED may be returned).

Producer ids come from cluster-wide blocks recorded in `/latest_producer_id_block`
(Kafka's ZooKeeper layout), so ids are never reused across restarts or nodes. The per
partition sequence checks happen in the log's producer state on append (a duplicate batch
returns its original offsets; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch is
INVALID_PRODUCER_EPOCH).

With a transactional_id (KIP-98) the request goes to the transaction coordinator
(`trafka.node.txn_service`): NOT_COORDINATOR if this node does not lead the id's
`__transaction_state` partition, an epoch bump that fences the previous instance,
CONCURRENT_TRANSACTIONS while a previous transaction is being completed (or aborted first),
INVALID_TRANSACTION_TIMEOUT above `transaction.max.timeout.ms`; v3+ producer_id/epoch is
KIP-360's recovery. PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4 (KIP-588).

Authorization: WRITE on the TRANSACTIONAL_ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
idempotent producer needs IDEMPOTENT_WRITE on the CLUSTER or WRITE on some topic (KIP-679,
else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, ms, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.txn_service import client_error
from trafka.security.acl import AclAuthorizer
from trafka.security.authorizer import AclOperation, ResourceType


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """Kafka's checks: WRITE on the TRANSACTIONAL_ID; for an idempotent producer
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679)."""
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if ctx.authorize(AclOperation.IDEMPOTENT_WRITE):
        return None
    authorizer = ctx.services.authorizer
    if isinstance(authorizer, AclAuthorizer) and authorizer.may_write_some_topic(ctx.requester):
        return None
    return ErrorCode.cluster_authorization_failed


@register(api_key=ApiKey.INIT_PRODUCER_ID, name="InitProducerId", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, request.transactional_id)
    if refused is not None:
        answer = {"error_code": int(refused), "producer_id": -1, "producer_epoch": -1}
    elif request.transactional_id is not None:
        result = await ctx.services.transactions.init_producer_id(
            str(request.transactional_id),
            ms(request.transaction_timeout),
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        )
        answer = {
            "error_code": client_error(result.error, ctx.api_version, 4),
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }
    else:
        producer_id = await ctx.services.producer_ids.allocate()
        answer = {"error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
    return build(response_class(request), {"throttle_time": 0, **answer})
