"""SCRAM credentials in the tree, as Kafka's ZooKeeper mode stores them.

``/config/users/<user>`` holds the user's entity config, JSON
``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``
(other user configs, e.g. quotas, are kept). Only salted values are stored: the salted
password a client sends with AlterUserScramCredentials is turned into stored_key and
server_key here and is not written. Lookups read the node's local replica of the tree.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Final

from trafka.node.metadata_store import LocalTreeReads, NoNode
from trafka.security.scram import MECHANISMS, ScramCredential, ScramError

USERS_PATH: Final = "/config/users"
MAX_SALT_BYTES: Final = 1024
"""The longest salt stored (clients send 32-64 bytes; it is kept in the user's znode, so a
client must not choose its size)."""
MECHANISM_BY_CODE: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODE_BY_MECHANISM: Final = {name: code for code, name in MECHANISM_BY_CODE.items()}


def user_path(user: str) -> str:
    return f"{USERS_PATH}/{user}"


def user_name_error(user: str) -> str | None:
    """Why `user` cannot name a credential here (None when it can): the user's znode must be
    a legal path one level below USERS_PATH (not empty, no '/', not '.' or '..', no NUL or
    surrogates, the path at most the tree's MAX_PATH_BYTES). The fuzzer found '.', '..' and
    '' raising out of both SCRAM handlers."""
    from trafka.metadata_quorum.tree import BadArgumentsError, validate_path

    if not user:
        return "Username must not be empty"
    if "/" in user:
        return "Username must not contain '/'"
    try:
        validate_path(user_path(user))
    except BadArgumentsError:
        return "Username must not be '.' or '..', contain NUL or surrogates, or be that long"
    return None


def parse_entity(raw: bytes | None) -> dict[str, Any]:
    if not raw:
        return {"version": 1, "config": {}}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {"version": 1, "config": {}}
    if not isinstance(value, dict) or not isinstance(value.get("config"), dict):
        return {"version": 1, "config": {}}
    return value


def credentials_of(raw: bytes | None) -> dict[str, ScramCredential]:
    result = {}
    for mechanism, text in parse_entity(raw)["config"].items():
        if mechanism in MECHANISMS and isinstance(text, str):
            try:
                result[mechanism] = ScramCredential.from_text(text)
            except ScramError:
                continue
    return result


def lookup(tree: LocalTreeReads, user: str, mechanism: str) -> ScramCredential | None:
    """The stored credential (local replica of the tree); None when absent or bad."""
    if user_name_error(user) is not None:
        return None
    try:
        raw, _ = tree.get_local(user_path(user))
    except NoNode:
        return None
    return credentials_of(bytes(raw)).get(mechanism)


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.new(salted_password, b"Server Key", digest).digest(),
        iterations=iterations,
    )


def with_credential(raw: bytes | None, mechanism: str, credential: ScramCredential | None) -> bytes:
    """The user's entity JSON with `mechanism` set (or removed when credential is None)."""
    entity = parse_entity(raw)
    config = dict(entity["config"])
    if credential is None:
        config.pop(mechanism, None)
    else:
        config[mechanism] = credential.to_text()
    entity["config"] = config
    return json.dumps(entity, separators=(",", ":"), sort_keys=True).encode("utf-8")
