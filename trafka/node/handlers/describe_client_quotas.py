"""DescribeClientQuotas v0-1 (KIP-546): the quota entities matching a filter, with their
quota keys. v1: flexible versions.

Authorization: DESCRIBE_CONFIGS on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED for the
whole response (Kafka's `KafkaApis.handleDescribeClientQuotasRequest`).

The filter (match types exact / default / any specified, `strict`) is Kafka's ZooKeeper
mode's (`trafka.node.quota.describe`); a bad filter is INVALID_REQUEST, an unknown entity
type UNSUPPORTED_VERSION, both with Kafka's messages. Entities are read from the tree after
a quorum sync; a default entity has a null name.

Bounds: at most `MAX_ENTRIES` entities are returned (Kafka has none).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.quota.describe import FilterError, QuotaFilter
from trafka.security.authorizer import AclOperation

MAX_ENTRIES: Final = 100_000


def _error(request: Any, code: ErrorCode, message: str | None) -> Any:
    return build(
        response_class(request),
        {"throttle_time": 0, "error_code": int(code), "error_message": message, "entries": None},
    )


@register(
    api_key=ApiKey.DESCRIBE_CLIENT_QUOTAS,
    name="DescribeClientQuotas",
    min_version=0,
    max_version=1,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS):
        return _error(request, ErrorCode.cluster_authorization_failed, None)
    try:
        quota_filter = QuotaFilter.parse(
            [
                (
                    str(c.entity_type),
                    int(c.match_type),
                    None if c.match is None else str(c.match),
                )
                for c in request.components
            ],
            bool(request.strict),
        )
    except FilterError as error:
        code = ErrorCode.unsupported_version if error.unsupported else ErrorCode.invalid_request
        return _error(request, code, str(error))
    quotas = ctx.services.quotas
    if quotas is None:
        return _error(request, ErrorCode.unknown_server_error, "client quotas are not available")
    selected = quota_filter.select(await quotas.entities())[:MAX_ENTRIES]
    entries = [
        {
            "entity": [
                {"entity_type": entity_type, "entity_name": name}
                for entity_type, name in entity.wire_components()
            ],
            "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
        }
        for entity, values in selected
    ]
    return build(
        response_class(request),
        {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries},
    )
