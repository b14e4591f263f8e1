"""UpdateMetadata v5-6: the controller's view of leaders, ISRs and live brokers (CTL-39).

* v5: offline replicas, grouped topic states (Kafka 2.4 layout).
* v6: flexible (KIP-482).

A request with a controller epoch older than the newest seen gets STALE_CONTROLLER_EPOCH.
Otherwise the live brokers replace the node's broker list and each partition state replaces
the cached one, so Metadata answers show the real leaders; leader -2
(LEADER_DURING_DELETE) drops the topic from the cache. Topics not known yet are read from
the tree (topic id, configs), then the states are applied.

Every endpoint is kept with its listener name: Metadata answers each client with the
endpoint of the listener it came in on.

Only a registered controller on the inter-broker listener gets here
(`trafka.node.security.inter_broker`).

Not implemented: v0-4 and v7+ (topic ids).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.metadata_cache import BrokerInfo


@register(api_key=ApiKey.UPDATE_METADATA, name="UpdateMetadata", min_version=5, max_version=6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if services.replicas.fence.admit(int(request.controller_epoch)) is not ErrorCode.none:
        return build(response_class(request), {"error_code": int(ErrorCode.stale_controller_epoch)})
    live = [
        BrokerInfo(
            int(b.id),
            str(b.endpoints[0].host),
            int(b.endpoints[0].port),
            b.rack,
            tuple((str(e.listener), str(e.host), int(e.port)) for e in b.endpoints),
        )
        for b in request.live_brokers
        if b.endpoints
    ]
    states = [
        (
            str(topic.topic_name),
            int(p.partition_index),
            tuple(int(r) for r in p.replicas),
            int(p.leader),
            int(p.leader_epoch),
            tuple(int(r) for r in p.isr),
        )
        for topic in request.topic_states
        for p in topic.partition_states
    ]
    unknown = services.metadata.update_metadata(live, states)
    if unknown:
        for name in unknown:
            await services.topics.refresh_topic(name)
        services.metadata.update_metadata([], [s for s in states if s[0] in unknown])
    return build(response_class(request), {"error_code": 0})
