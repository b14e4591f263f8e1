"""EndTxn v0-3: commit or abort a producer's transaction (KIP-98).

The coordinator writes PrepareCommit/PrepareAbort to `__transaction_state` and answers;
the COMMIT/ABORT markers are then written to every partition of the transaction in the
background (`trafka.node.txn_service`), after which the transaction is complete. A retried
EndTxn while the markers are being written answers CONCURRENT_TRANSACTIONS.

* v0: transactional_id, producer_id, producer_epoch, committed. v1: no change. v2:
  PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588). v3: flexible (KIP-482).

Authorization (Kafka's table): WRITE on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the coordinator is not asked.

Not implemented: v4-5 (KIP-890 part 2: epoch bump on every EndTxn; not advertised).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.txn_service import client_error
from trafka.security.authorizer import AclOperation, ResourceType


@register(api_key=ApiKey.END_TXN, name="EndTxn", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    transactional_id = str(request.transactional_id)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        code = int(ErrorCode.transactional_id_authorization_failed)
    else:
        error = await ctx.services.transactions.end_transaction(
            transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
        )
        code = client_error(error, ctx.api_version, 2)
    return build(response_class(request), {"throttle_time": 0, "error_code": code})
