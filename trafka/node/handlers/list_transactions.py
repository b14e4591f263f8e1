"""ListTransactions v0-1: the transactional ids this node coordinates (KIP-664).

* v0: state_filters (Kafka's state names; unknown names are echoed in
  unknown_state_filters), producer_id_filters. v1: duration_filter (KIP-994: only
  transactions open longer than this many ms; -1 = all).

Authorization (Kafka's table): only the transactional ids the principal may DESCRIBE are
listed (the others are left out, no error).

Not implemented: v2 (KIP-1152 transactional id pattern; not advertised).
"""

from __future__ import annotations

import time
from typing import Any

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation, ResourceType
from trafka.txn.state import parse_state_filter


@register(api_key=ApiKey.LIST_TRANSACTIONS, name="ListTransactions", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    states = set()
    unknown = []
    for name in request.state_filters:
        state = parse_state_filter(str(name))
        if state is None:
            unknown.append(str(name))
        else:
            states.add(state)
    service = ctx.services.transactions
    error, listings = await service.list_transactions(
        frozenset(states), frozenset(int(p) for p in request.producer_id_filters)
    )
    duration_ms = int(getattr(request, "duration_filter", -1))
    visible = ctx.authorized_names(
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        (listing.transactional_id for listing in listings),
    )
    rows = []
    for listing in listings:
        if listing.transactional_id not in visible:
            continue
        if duration_ms >= 0:
            described = await service.describe(listing.transactional_id)
            now_ms = int(time.time() * 1000)
            if (
                described.start_timestamp_ms < 0
                or now_ms - described.start_timestamp_ms < duration_ms
            ):
                continue
        rows.append(
            {
                "transactional_id": listing.transactional_id,
                "producer_id": listing.producer_id,
                "transaction_state": listing.state,
            }
        )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(error),
            "unknown_state_filters": unknown,
            "transaction_states": rows,
        },
    )
