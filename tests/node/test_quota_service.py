"""The quota service over an in-memory metadata store: writes where Kafka's ZooKeeper mode
writes, keeps a user's SCRAM credentials, notifies, and a second node applies the change
from the notification's entity path."""

from __future__ import annotations

import json

import pytest

from trafka.metadata_quorum import znodes
from trafka.node.metadata_store import memory_store
from trafka.node.quota.entities import DEFAULT, QuotaEntity, QuotaEntityError
from trafka.node.quota.manager import QuotaManager, QuotaType
from trafka.node.quota.service import QuotaService


async def test_alter_writes_notifies_and_another_node_applies() -> None:
    async with memory_store() as store:
        writer = QuotaService(store, QuotaManager(), now_ms=lambda: 0)
        reader = QuotaService(store, QuotaManager(), now_ms=lambda: 0)
        await store.put(
            "/config/users/alice",
            b'{"version":1,"config":{"SCRAM-SHA-256":"salt=x,stored_key=y"}}',
        )
        entity = QuotaEntity(user="alice", client_id="c%201")
        await writer.alter(entity, [("producer_byte_rate", 1000.0)], validate_only=False)
        await writer.alter(
            QuotaEntity(user="alice"), [("consumer_byte_rate", 5.0)], validate_only=False
        )
        raw, _ = store.get_local("/config/users/alice/clients/c%201")
        assert json.loads(bytes(raw)) == {"version": 1, "config": {"producer_byte_rate": "1000"}}
        raw, _ = store.get_local("/config/users/alice")
        assert json.loads(bytes(raw))["config"] == {
            "SCRAM-SHA-256": "salt=x,stored_key=y",
            "consumer_byte_rate": "5",
        }
        paths = []
        for child in sorted(store.children_local(znodes.CONFIG_CHANGES)):
            data, _ = store.get_local(f"{znodes.CONFIG_CHANGES}/{child}")
            paths.append(znodes.ConfigChangeNotification.from_json(bytes(data)).entity_path)
        assert paths == ["users/alice/clients/c%201", "users/alice"]
        # The writer applied at once; the reader follows the notification.
        assert writer.manager.record(QuotaType.PRODUCE, "alice", "c 1", 10_000, 0) > 0
        assert reader.manager.record(QuotaType.PRODUCE, "alice", "c 1", 10_000, 0) == 0
        for path in paths:
            reader.apply_path(path)
        assert reader.manager.record(QuotaType.PRODUCE, "alice", "c 1", 10_000, 0) > 0
        assert await reader.entities() == {
            entity: {"producer_byte_rate": 1000.0},
            QuotaEntity(user="alice"): {"consumer_byte_rate": 5.0},
        }

        # A bad op writes nothing; validate_only writes nothing; remove drops the key.
        with pytest.raises(QuotaEntityError):
            await writer.alter(
                entity,
                [("request_percentage", 5.0), ("connection_creation_rate", 1.0)],
                validate_only=False,
            )
        await writer.alter(entity, [("request_percentage", 5.0)], validate_only=True)
        await writer.alter(entity, [("producer_byte_rate", None)], validate_only=False)
        reader.apply_path(entity.path())
        assert entity not in reader.manager.configs
        assert (await reader.entities()).keys() == {QuotaEntity(user="alice")}


async def test_ip_quota_admits_connections_through_the_policy() -> None:
    async with memory_store() as store:
        service = QuotaService(store, QuotaManager(), now_ms=lambda: 0)
        assert service.admit("10.0.0.1") == 0  # no quota at all
        await service.alter(
            QuotaEntity(ip=DEFAULT), [("connection_creation_rate", 1.0)], validate_only=False
        )
        assert service.admit("10.0.0.1") == 0
        assert service.admit("10.0.0.1") > 0
        other = QuotaService(store, QuotaManager(), now_ms=lambda: 0)
        other.load()
        assert other.admit("10.0.0.2") == 0 and other.admit("10.0.0.2") > 0
