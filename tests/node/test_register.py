"""A broker's registration survives a quorum session that expires while it registers."""

from __future__ import annotations

from pathlib import Path

import pytest

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.tree import SessionExpiredError
from trafka.node.broker import Broker
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import FileMetadataStore


class _ExpiringStore(FileMetadataStore):
    """Fails the first `failures` creates with SESSION_EXPIRED, as the quorum does when the
    node's session expired before the write (a start on a loaded machine)."""

    def __init__(self, path: Path, failures: int) -> None:
        super().__init__(path)
        self.failures = failures

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False) -> None:
        if self.failures:
            self.failures -= 1
            raise SessionExpiredError(path)
        await super().create(path, data, ephemeral=ephemeral)


async def test_register_retries_on_an_expired_session(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig.build(1))
    store = _ExpiringStore(tmp_path / "tree.json", failures=2)
    broker.store = store
    await broker._register(store)
    assert store.failures == 0
    raw = await store.get(znodes.broker_path(1))
    assert raw and znodes.BrokerRegistration.from_json(raw, 1).broker_id == 1
    assert 1 in broker.brokers


async def test_register_gives_up_after_its_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trafka.node.broker.REGISTER_RETRY_S", 0.0)
    broker = Broker(BrokerConfig.build(1))
    store = _ExpiringStore(tmp_path / "tree.json", failures=10_000)
    with pytest.raises(SessionExpiredError):
        await broker._register(store)
