"""DescribeUserScramCredentials v0: which SCRAM mechanisms (and iterations) each user has
(KIP-554). Never the salt or keys. ``users`` null or empty: every user with a credential;
a named user without one (also a name that cannot be stored: '', '.', '..'):
RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does not exist"); a name
listed twice: DUPLICATE_RESOURCE.

Not implemented: authorization (DESCRIBE on CLUSTER, issue 14 item 3).

Authorization: DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.metadata_store import LocalTreeReads, NoNode
from trafka.node.security import scram_store
from trafka.security.authorizer import AclOperation


def _users(quorum: LocalTreeReads) -> list[str]:
    try:
        return sorted(quorum.children_local(scram_store.USERS_PATH))
    except NoNode:
        return []


def _infos(quorum: LocalTreeReads, user: str) -> list[dict[str, int]]:
    try:
        raw, _ = quorum.get_local(scram_store.user_path(user))
    except NoNode:
        return []
    return [
        {"mechanism": scram_store.CODE_BY_MECHANISM[m], "iterations": c.iterations}
        for m, c in sorted(scram_store.credentials_of(bytes(raw)).items())
    ]


@register(
    api_key=ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    name="DescribeUserScramCredentials",
    min_version=0,
    max_version=0,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE):
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "error_message": None,
                "results": [],
            },
        )
    quorum = ctx.services.store
    results = []
    if quorum is not None:
        if not request.users:
            for user in _users(quorum):
                infos = _infos(quorum, user)
                if infos:
                    results.append({"user": user, "error_code": 0, "credential_infos": infos})
        else:
            names = [str(u.name) for u in request.users]
            for name in dict.fromkeys(names):
                if names.count(name) > 1:
                    results.append(
                        {
                            "user": name,
                            "error_code": int(ErrorCode.duplicate_resource),
                            "error_message": f"Cannot describe SCRAM credentials for the same "
                            f"user twice in a single request: {name}",
                            "credential_infos": [],
                        }
                    )
                    continue
                infos = [] if scram_store.user_name_error(name) else _infos(quorum, name)
                if not infos:
                    results.append(
                        {
                            "user": name,
                            "error_code": int(ErrorCode.resource_not_found),
                            "error_message": "Attempt to describe a user credential that does "
                            "not exist",
                            "credential_infos": [],
                        }
                    )
                else:
                    results.append({"user": name, "error_code": 0, "credential_infos": infos})
    return build(
        response_class(request),
        {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results},
    )
