"""AlterClientQuotas v0-1 (KIP-546): set or remove quota keys of user / client-id / ip
entities. v1: flexible versions.

Authorization: ALTER_CONFIGS on the CLUSTER, else every entry is answered
CLUSTER_AUTHORIZATION_FAILED (Kafka's `KafkaApis.handleAlterClientQuotasRequest`).

Per entry, as Kafka's ZooKeeper mode (`ZkAdminManager.alterClientQuotas`): INVALID_REQUEST
for an empty entity, an unknown entity type ("Unhandled client quota entity type"), an
empty name, a type given twice, an ip combined with user / client-id, an ip that is not an
IP literal, a key the entity does not take ("Invalid configuration key ..."), a
non-integral value for an INT/LONG key; `remove` drops the key. `validate_only` checks and
writes nothing. A valid entry is written to `/config/users|clients|ips/...` with a change
notification, and the node that wrote it applies it at once (`trafka.node.quota.service`).

Bounds: at most `MAX_ENTRIES` entries and `MAX_OPS` ops per entry (Kafka has none; each
entry is a quorum write); the excess entries get INVALID_REQUEST.

Not implemented: host-name ip entities (Kafka resolves them; here an IP literal is needed).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum.tree import ZooKeeperError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.quota.entities import QuotaEntity, QuotaEntityError
from trafka.security.authorizer import AclOperation

MAX_ENTRIES: Final = 1000
MAX_OPS: Final = 100


def _entity_wire(entry: Any) -> list[dict[str, Any]]:
    return [{"entity_type": str(e.entity_type), "entity_name": e.entity_name} for e in entry.entity]


async def _alter(ctx: RequestContext, entry: Any, validate_only: bool) -> tuple[int, str | None]:
    quotas = ctx.services.quotas
    if quotas is None:
        return int(ErrorCode.unknown_server_error), "client quotas are not available"
    if len(entry.ops) > MAX_OPS:
        return int(ErrorCode.invalid_request), f"more than {MAX_OPS} ops for one entity"
    try:
        entity = QuotaEntity.from_wire(
            [
                (str(e.entity_type), None if e.entity_name is None else str(e.entity_name))
                for e in entry.entity
            ]
        )
        ops = [(str(op.key), None if op.remove else float(op.value)) for op in entry.ops]
        await quotas.alter(entity, ops, validate_only=validate_only)
    except QuotaEntityError as error:
        return int(ErrorCode.invalid_request), str(error)
    except ZooKeeperError as error:  # the tree's own bounds (node count, entry size)
        return int(ErrorCode.invalid_request), f"cannot store the quota: {error}"
    except RuntimeError as error:  # too many concurrent updates of one entity
        return int(ErrorCode.unknown_server_error), str(error)
    return 0, None


@register(
    api_key=ApiKey.ALTER_CLIENT_QUOTAS, name="AlterClientQuotas", min_version=0, max_version=1
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS)
    entries = []
    for index, entry in enumerate(request.entries):
        if not allowed:
            code, message = int(ErrorCode.cluster_authorization_failed), None
        elif index >= MAX_ENTRIES:
            code, message = int(ErrorCode.invalid_request), f"more than {MAX_ENTRIES} entries"
        else:
            code, message = await _alter(ctx, entry, bool(request.validate_only))
        entries.append(
            {"error_code": code, "error_message": message, "entity": _entity_wire(entry)}
        )
    return build(response_class(request), {"throttle_time": 0, "entries": entries})
