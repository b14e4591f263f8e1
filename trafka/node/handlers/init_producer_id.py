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

Not implemented: transactions. A request with a transactional_id is answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (non-retriable, so the client fails at once instead
of retrying forever).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register


@register(api_key=ApiKey.INIT_PRODUCER_ID, name="InitProducerId", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        answer = {
            "error_code": int(ErrorCode.transactional_id_authorization_failed),
            "producer_id": -1,
            "producer_epoch": -1,
        }
    else:
        producer_id = await ctx.services.producer_ids.allocate()
        answer = {"error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
    return build(response_class(request), {"throttle_time": 0, **answer})
