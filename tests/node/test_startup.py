"""The pieces moved out of the broker: the start-up failures as one line
(`trafka.node.startup`), the security wiring (`trafka.node.security.setup`) and the inter-broker
admission dispatch asks before a handler runs (`inter_broker.refuse_if_not_admitted`)."""

from __future__ import annotations

import errno
import re
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.metadata.v12.request import MetadataRequest

from trafka.net.kio_shape import build
from trafka.node.clock import ManualClock
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.security.acls import AclService
from trafka.node.security.inter_broker import refuse_if_not_admitted
from trafka.node.security.setup import acl_service_for, authorizer_for
from trafka.node.startup import StartupError, first_os_error
from trafka.security.acl import AclAuthorizer
from trafka.security.authorizer import AllowAllAuthorizer, Requester
from trafka.security.principal import ANONYMOUS


def test_the_os_error_inside_nested_exception_groups_is_found() -> None:
    busy = OSError(errno.EADDRINUSE, "Address already in use")
    raised = ExceptionGroup("serve", [ValueError("x"), ExceptionGroup("bind", [busy])])
    assert first_os_error(raised) is busy
    assert first_os_error(ExceptionGroup("serve", [ValueError("x")])) is None


def test_an_unsupported_authorizer_is_a_one_line_startup_error() -> None:
    with pytest.raises(StartupError, match=re.escape("authorizer.class.name=com.example.Nope")):
        authorizer_for(BrokerConfig.build(1, overrides=["authorizer.class.name=com.example.Nope"]))
    assert isinstance(authorizer_for(BrokerConfig.build(1)), AllowAllAuthorizer)


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


async def test_only_an_acl_authorizer_gets_an_acl_service(store: MetadataStore) -> None:
    clock = ManualClock()
    assert acl_service_for(AllowAllAuthorizer(), store, clock) is None
    assert isinstance(acl_service_for(AclAuthorizer(), store, clock), AclService)


async def test_a_client_request_is_not_judged_and_an_unregistered_follower_is_refused(
    store: MetadataStore,
) -> None:
    async def refused(request: object, listener: str) -> object:
        return await refuse_if_not_admitted(
            int(request.__api_key__),  # type: ignore[attr-defined]
            request,
            store=store,
            authorizer=AllowAllAuthorizer(),
            requester=Requester(ANONYMOUS, "127.0.0.1", listener, "PLAINTEXT"),
            inter_broker_listener="INTERNAL",
            own_broker_id=1,
        )

    assert await refused(build(MetadataRequest, {"topics": None}), "EXTERNAL") is None
    # A follower fetch from replica 7, which is not registered (the tree is empty): refused
    # off the inter-broker listener, and every partition it names carries the error.
    fetch = build(
        FetchRequest,
        {
            "replica_id": 7,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
        },
    )
    for listener in ("EXTERNAL", "INTERNAL"):
        answer = await refused(fetch, listener)
        assert answer is not None, listener
        assert answer.error_code == ErrorCode.cluster_authorization_failed  # type: ignore[attr-defined]
        partition = answer.responses[0].partitions[0]  # type: ignore[attr-defined]
        assert partition.error_code == ErrorCode.cluster_authorization_failed
