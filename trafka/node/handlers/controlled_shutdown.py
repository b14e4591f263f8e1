"""ControlledShutdown v1-3: a broker asks the controller to move its leaders away (CTL-43).

* v1: broker id only; v2: broker epoch (KIP-380, STALE_BROKER_EPOCH); v3: flexible.

Answered by the controller only: another node answers NOT_CONTROLLER. The request becomes a
`ControlledShutdown` event; the answer lists the partitions the broker still leads (it
retries while the list is not empty).

Not implemented: the node's own SIGTERM path does not send it yet.
"""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.controller.effects import ControlledShutdownAnswer
from trafka.node.controller.events import ControlledShutdown
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.replication.ids import BrokerId

ANSWER_TIMEOUT_S = 10.0


@register(
    api_key=ApiKey.CONTROLLED_SHUTDOWN, name="ControlledShutdown", min_version=1, max_version=3
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.services.controller
    if service is None or not service.is_active:
        return build(
            response_class(request),
            {"error_code": int(ErrorCode.not_controller), "remaining_partitions": []},
        )
    broker_id = BrokerId(int(request.broker_id))
    send, receive = trio.open_memory_channel[ControlledShutdownAnswer](1)
    service.pending_answers.setdefault(broker_id, []).append(send)
    service.submit(ControlledShutdown(broker_id, int(getattr(request, "broker_epoch", -1))))
    answer: ControlledShutdownAnswer | None = None
    with trio.move_on_after(ANSWER_TIMEOUT_S):
        try:
            answer = await receive.receive()
        except trio.EndOfChannel:
            answer = None
    if answer is None:
        return build(
            response_class(request),
            {"error_code": int(ErrorCode.request_timed_out), "remaining_partitions": []},
        )
    return build(
        response_class(request),
        {
            "error_code": int(answer.error),
            "remaining_partitions": [
                {"topic_name": tp.topic, "partition_index": tp.partition}
                for tp in answer.partitions_remaining
            ],
        },
    )
