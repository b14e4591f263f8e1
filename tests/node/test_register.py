"""A broker's registration survives a quorum session that expires while it registers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import SessionExpiredError
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_cache import BrokerInfo, MetadataCache
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.registration import register
from trafka.node.topics import TopicManager


@pytest.fixture
async def tree() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


class _ExpiringStore:
    """Fails the first `failures` creates with SESSION_EXPIRED, as the quorum does when the
    node's session expired before the write (a start on a loaded machine)."""

    def __init__(self, tree: MetadataStore, failures: int) -> None:
        self._tree = tree
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tree, name)

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        if self.failures:
            self.failures -= 1
            raise SessionExpiredError(path)
        await self._tree.create(path, data, ephemeral=ephemeral)


class _Node:
    """What the broker does at registration: register, then read the registrations."""

    def __init__(self, store: Any) -> None:
        topics = TopicManager(
            store, node_id=1, live_brokers=lambda: [1], validate_configs=lambda _: None
        )
        self._metadata = MetadataCache(store, topics, node_id=1)

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self._metadata.brokers

    async def _register(self, store: Any) -> None:
        await register(store, BrokerConfig.build(1), now_ms=0)
        await self._metadata.refresh_brokers()


async def test_register_retries_on_an_expired_session(tree: MetadataStore) -> None:
    store = _ExpiringStore(tree, failures=2)
    broker = _Node(store)
    await broker._register(store)
    assert store.failures == 0
    raw = await store.get(znodes.broker_path(1))
    assert raw and znodes.BrokerRegistration.from_json(raw, 1).broker_id == 1
    assert 1 in broker.brokers


async def test_register_gives_up_after_its_attempts(
    tree: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trafka.node.registration.REGISTER_RETRY_S", 0.0)
    store = _ExpiringStore(tree, failures=10_000)
    broker = _Node(store)
    with pytest.raises(SessionExpiredError):
        await broker._register(store)
