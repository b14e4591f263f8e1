"""A broker's registration survives a quorum session that expires while it registers."""

from __future__ import annotations

import pytest

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import SessionExpiredError
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.registration import register


class _ExpiringStore:
    """Fails the first `failures` creates with SESSION_EXPIRED, as the quorum does when the
    node's session expired before the write (a start on a loaded machine)."""

    def __init__(self, store: MetadataStore, failures: int) -> None:
        self.store = store
        self.failures = failures

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        if self.failures:
            self.failures -= 1
            raise SessionExpiredError(path)
        await self.store.create(path, data, ephemeral=ephemeral)


async def test_register_retries_on_an_expired_session() -> None:
    async with memory_store() as store:
        expiring = _ExpiringStore(store, failures=2)
        await register(expiring, BrokerConfig.build(1), now_ms=0)  # type: ignore[arg-type]
        assert expiring.failures == 0
        raw = await store.get(znodes.broker_path(1))
        assert raw and znodes.BrokerRegistration.from_json(raw, 1).broker_id == 1


async def test_register_gives_up_after_its_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("trafka.node.registration.REGISTER_RETRY_S", 0.0)
    async with memory_store() as store:
        expiring = _ExpiringStore(store, failures=10_000)
        with pytest.raises(SessionExpiredError):
            await register(expiring, BrokerConfig.build(1), now_ms=0)  # type: ignore[arg-type]
