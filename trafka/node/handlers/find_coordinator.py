"""FindCoordinator v0-4: which broker coordinates a group (GRP-05).

* v0: one `key` (a group id). v1: `key_type` (0 group, 1 transaction, KIP-98), throttle and
  error_message in the response. v2: no change. v3: flexible (KIP-482).
* v4: batched `coordinator_keys`, one answer per key (KIP-699).

The coordinator of a group is the leader of partition
`Utils.abs(groupId.hashCode) % partitions` of `__consumer_offsets`, which the first
FindCoordinator creates (`trafka.node.group_service`).

key_type 1 (a transactional id) answers the leader of partition
`Utils.abs(transactionalId.hashCode) % partitions` of `__transaction_state`, which the first
such FindCoordinator creates (`trafka.node.txn_service`). Other key types (KIP-932 share
groups) get INVALID_REQUEST.

Authorization: DESCRIBE on the GROUP (GROUP_AUTHORIZATION_FAILED) or on the
TRANSACTIONAL_ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType

_GROUP = 0
_TRANSACTION = 1


async def _answer(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    if key_type == _GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        error, info = ErrorCode.group_authorization_failed, None
    elif key_type == _TRANSACTION and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        error, info = ErrorCode.transactional_id_authorization_failed, None
    elif key_type == _GROUP:
        error, info = await ctx.services.groups.find_coordinator(key)
    elif key_type == _TRANSACTION:
        error, info = await ctx.services.transactions.find_coordinator(key)
    else:
        error, info = ErrorCode.invalid_request, None
    if info is not None:
        # The coordinator's endpoint on the listener the client came in on (Kafka).
        info = info.on_listener(ctx.listener_name) if ctx.listener_name else info
        if info is None:
            error = ErrorCode.coordinator_not_available
    if info is None or error != ErrorCode.none:
        return {
            "key": key,
            "error_code": int(error),
            "error_message": None,
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    return {
        "key": key,
        "error_code": 0,
        "error_message": None,
        "node_id": info.node_id,
        "host": info.host,
        "port": info.port,
    }


@register(api_key=ApiKey.FIND_COORDINATOR, name="FindCoordinator", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = int(getattr(request, "key_type", _GROUP))
    cls = response_class(request)
    if has_field(request, "coordinator_keys"):
        coordinators = [await _answer(ctx, str(key), key_type) for key in request.coordinator_keys]
        return build(cls, {"throttle_time": 0, "coordinators": coordinators})
    answer = await _answer(ctx, str(request.key), key_type)
    return build(cls, {"throttle_time": 0, **answer})
