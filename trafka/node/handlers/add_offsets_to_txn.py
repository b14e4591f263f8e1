"""AddOffsetsToTxn v0-3: add a group's offsets to a producer's transaction (KIP-98, KIP-447).

The transaction coordinator adds the group's `__consumer_offsets` partition
(`Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`) to the transaction, so the
commit or abort marker reaches the group coordinator; the producer then sends
TxnOffsetCommit to the group coordinator.

* v0: transactional_id, producer_id, producer_epoch, group_id. v1: no change. v2:
  PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH (KIP-588). v3: flexible (KIP-482).

Authorization (Kafka's table): WRITE on the TRANSACTIONAL_ID
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the GROUP (GROUP_AUTHORIZATION_FAILED).
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


@register(api_key=ApiKey.ADD_OFFSETS_TO_TXN, name="AddOffsetsToTxn", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.services.transactions
    transactional_id, group_id = str(request.transactional_id), str(request.group_id)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
    elif not group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = await service.add_partitions(
            transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            (await service.offsets_partition(group_id),),
        )
    return build(
        response_class(request),
        {"throttle_time": 0, "error_code": client_error(error, ctx.api_version, 2)},
    )
