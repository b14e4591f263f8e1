"""AlterUserScramCredentials / DescribeUserScramCredentials (API 51, 50) with hostile names
and values (issue 12 item 8, the fuzzer's finding): every user gets Kafka's per-user error
code, nothing raises out of the handler, nothing unbounded reaches the tree.

The handlers run against the real in-memory tree (`memory_store`); the context is the two
things they use (the store and an allow-all authorization)."""

from __future__ import annotations

import types
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0 import request as alter
from kio.schema.describe_user_scram_credentials.v0 import request as describe
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from trafka.node.handlers import alter_user_scram_credentials, describe_user_scram_credentials
from trafka.node.metadata_store import memory_store
from trafka.node.security import scram_store

HOSTILE_NAMES = ["", ".", "..", "a/b", "../../etc", "x\x00y", "\ud800", "x" * 1100]


def _ctx(store: object) -> Any:
    return types.SimpleNamespace(
        authorize=lambda *_: True, services=types.SimpleNamespace(store=store)
    )


def _upsert(name: str, *, salt: bytes = b"s" * 32, iterations: int = 4096) -> Any:
    return alter.ScramCredentialUpsertion(
        name=name,
        mechanism=i8(2),
        iterations=i32(iterations),
        salt=salt,
        salted_password=b"p" * 64,
    )


def _delete(name: str) -> Any:
    return alter.ScramCredentialDeletion(name=name, mechanism=i8(2))


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_a_name_that_cannot_be_stored_is_unacceptable(name: str) -> None:
    async with memory_store() as store:
        request = alter.AlterUserScramCredentialsRequest(
            deletions=(), upsertions=(_upsert(name), _upsert("alice"))
        )
        response = await alter_user_scram_credentials.handle(_ctx(store), request)
        codes = {r.user: r.error_code for r in response.results}
        assert codes == {name: ErrorCode.unacceptable_credential, "alice": ErrorCode.none}
        assert scram_store.lookup(store, "alice", "SCRAM-SHA-512") is not None
        assert store.children_local(scram_store.USERS_PATH) == ["alice"]

        deletion = alter.AlterUserScramCredentialsRequest(deletions=(_delete(name),), upsertions=())
        response = await alter_user_scram_credentials.handle(_ctx(store), deletion)
        assert [r.error_code for r in response.results] == [ErrorCode.unacceptable_credential]

        asked = describe.DescribeUserScramCredentialsRequest(
            users=(describe.UserName(name=name), describe.UserName(name="alice"))
        )
        described = await describe_user_scram_credentials.handle(_ctx(store), asked)
        assert [(r.user, r.error_code) for r in described.results] == [
            (name, ErrorCode.resource_not_found),
            ("alice", ErrorCode.none),
        ]


async def test_salts_and_iterations_are_bounded_before_anything_is_written() -> None:
    async with memory_store() as store:
        request = alter.AlterUserScramCredentialsRequest(
            deletions=(),
            upsertions=(
                _upsert("big-salt", salt=b"s" * (scram_store.MAX_SALT_BYTES + 1)),
                _upsert("no-salt", salt=b""),
                _upsert("few", iterations=4095),
                _upsert("many", iterations=16385),
                _upsert("ok", salt=b"s" * scram_store.MAX_SALT_BYTES, iterations=16384),
            ),
        )
        response = await alter_user_scram_credentials.handle(_ctx(store), request)
        assert {r.user: r.error_code for r in response.results} == {
            "big-salt": ErrorCode.unacceptable_credential,
            "no-salt": ErrorCode.unacceptable_credential,
            "few": ErrorCode.unacceptable_credential,
            "many": ErrorCode.unacceptable_credential,
            "ok": ErrorCode.none,
        }
        assert store.children_local(scram_store.USERS_PATH) == ["ok"]


async def test_an_unknown_mechanism_is_unsupported() -> None:
    async with memory_store() as store:
        upsertion = alter.ScramCredentialUpsertion(
            name="bob", mechanism=i8(0), iterations=i32(4096), salt=b"s", salted_password=b"p"
        )
        request = alter.AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,))
        response = await alter_user_scram_credentials.handle(_ctx(store), request)
        assert [r.error_code for r in response.results] == [ErrorCode.unsupported_sasl_mechanism]
