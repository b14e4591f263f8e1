"""DescribeCluster v0-2: cluster id, controller id and the live brokers (KIP-700).

* v0: include_cluster_authorized_operations.
* v1: endpoint_type (1 = brokers, 2 = controllers, KIP-919); we list brokers for 1 and
  answer UNSUPPORTED_ENDPOINT_TYPE for anything else.
* v2: include_fenced_brokers and each broker's is_fenced (KIP-1073, Kafka 4.0). trafka has
  no fenced brokers: a broker is registered (an ephemeral znode) exactly while it is alive,
  so every listed broker has is_fenced false, with or without include_fenced_brokers.

KIP-430: with include_cluster_authorized_operations the bit set of what the sender may do
on the CLUSTER (else -2147483648).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.acl import AUTHORIZED_OPERATIONS_UNKNOWN
from trafka.security.authorizer import ResourceType

BROKERS_ENDPOINT = 1


@register(api_key=ApiKey.DESCRIBE_CLUSTER, name="DescribeCluster", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    endpoint_type = int(getattr(request, "endpoint_type", BROKERS_ENDPOINT))
    error = 0 if endpoint_type == BROKERS_ENDPOINT else int(ErrorCode.unsupported_endpoint_type)
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": error,
            "error_message": None,
            "endpoint_type": endpoint_type,
            "cluster_id": services.cluster_id,
            "controller_id": services.metadata.controller_id(),
            "brokers": [
                {
                    "broker_id": b.node_id,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack,
                    "is_fenced": False,
                }
                for b in services.metadata.live_brokers(ctx.listener_name)
            ]
            if error == 0
            else [],
            "cluster_authorized_operations": ctx.authorized_operations(ResourceType.CLUSTER)
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_UNKNOWN,
        },
    )
