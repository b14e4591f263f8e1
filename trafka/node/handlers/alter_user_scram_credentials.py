"""AlterUserScramCredentials v0: create, replace or delete SCRAM credentials (KIP-554).

Each upsertion carries the salt and the *salted* password (the client never sends the
password); the broker stores salt, stored_key, server_key and iterations under
``/config/users/<user>`` (`trafka.node.security.scram_store`). Per user: UNSUPPORTED_SASL_MECHANISM
(unknown mechanism), UNACCEPTABLE_CREDENTIAL (iterations outside 4096..16384, empty salt
or salted password, empty user name; also, beyond Kafka, a salt over 1 KiB and a user name
that cannot be a znode: '.', '..', '/', NUL, over ~1000 bytes), DUPLICATE_RESOURCE (a
user/mechanism named twice in one request), RESOURCE_NOT_FOUND (deleting a credential that
does not exist) - Kafka's codes and messages. Served by any broker (ZooKeeper mode: the
broker writes the tree).

Not implemented: authorization (ALTER on CLUSTER, issue 14 item 3).

Authorization: ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED for every user), as
Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.security import scram_store
from trafka.security.authorizer import AclOperation
from trafka.security.scram import MAX_ITERATIONS, MIN_ITERATIONS


def _check(
    name: str,
    mechanism: int,
    iterations: int | None = None,
    salt: bytes = b"x",
    salted: bytes = b"x",
) -> tuple[ErrorCode, str | None]:
    name_error = scram_store.user_name_error(name)
    if name_error is not None:
        return ErrorCode.unacceptable_credential, name_error
    if mechanism not in scram_store.MECHANISM_BY_CODE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None:
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            return (
                ErrorCode.unacceptable_credential,
                f"Iterations {iterations} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
            )
        if not salt:
            return ErrorCode.unacceptable_credential, "Salt must not be empty"
        if len(salt) > scram_store.MAX_SALT_BYTES:
            return (
                ErrorCode.unacceptable_credential,
                f"Salt must not be longer than {scram_store.MAX_SALT_BYTES} bytes",
            )
        if not salted:
            return ErrorCode.unacceptable_credential, "Salted password must not be empty"
    return ErrorCode.none, None


@register(
    api_key=ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    name="AlterUserScramCredentials",
    min_version=0,
    max_version=0,
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER):
        users = [str(d.name) for d in request.deletions] + [str(u.name) for u in request.upsertions]
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "results": [
                    {
                        "user": user,
                        "error_code": int(ErrorCode.cluster_authorization_failed),
                        "error_message": None,
                    }
                    for user in dict.fromkeys(users)
                ],
            },
        )
    store = ctx.services.store
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    order: list[str] = []
    seen: set[tuple[str, int]] = set()
    changes: dict[str, list[tuple[str, Any]]] = {}

    def note(name: str, error: ErrorCode, message: str | None) -> None:
        if name not in order:
            order.append(name)
        if error is not ErrorCode.none and name not in errors:
            errors[name] = (error, message)

    items = [(d, None) for d in request.deletions] + [(None, u) for u in request.upsertions]
    for deletion, upsertion in items:
        entry = deletion if deletion is not None else upsertion
        name, mechanism = str(entry.name), int(entry.mechanism)
        if (name, mechanism) in seen:
            note(
                name,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        seen.add((name, mechanism))
        if upsertion is not None:
            error, message = _check(
                name,
                mechanism,
                int(upsertion.iterations),
                bytes(upsertion.salt),
                bytes(upsertion.salted_password),
            )
        else:
            error, message = _check(name, mechanism)
        note(name, error, message)
        if error is not ErrorCode.none:
            continue
        mechanism_name = scram_store.MECHANISM_BY_CODE[mechanism]
        credential = None
        if upsertion is not None:
            credential = scram_store.credential_from_salted_password(
                mechanism_name,
                bytes(upsertion.salt),
                bytes(upsertion.salted_password),
                int(upsertion.iterations),
            )
        elif scram_store.lookup(ctx.services.store, name, mechanism_name) is None:
            note(
                name,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
            continue
        changes.setdefault(name, []).append((mechanism_name, credential))
    for name, updates in changes.items():
        if name in errors or store is None:
            continue

        def change(raw: bytes | None, updates: list[tuple[str, Any]] = updates) -> bytes:
            for mechanism_name, credential in updates:
                raw = scram_store.with_credential(raw, mechanism_name, credential)
            assert raw is not None
            return raw

        await store.update(scram_store.user_path(name), change)
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "results": [
                {
                    "user": name,
                    "error_code": int(errors.get(name, (ErrorCode.none, None))[0]),
                    "error_message": errors.get(name, (ErrorCode.none, None))[1],
                }
                for name in order
            ],
        },
    )
