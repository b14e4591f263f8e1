"""GROUP config resources through the node's config service, on an in-memory quorum: the
write, the change notification, another broker applying it, deletion and rescans."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from tests.node.nodes import NodeUnderTest
from trafka.metadata_quorum import znodes
from trafka.node.config.broker import ConfigSource
from trafka.node.config.changes import Entity, EntityType, parse_entity_path
from trafka.node.config.service import ConfigTransform
from trafka.node.metadata_store import MetadataStore, memory_store

GROUP = 32
SESSION = "consumer.session.timeout.ms"


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


def broker(tmp_path: Path, store: MetadataStore, node_id: int) -> NodeUnderTest:
    return NodeUnderTest(store, node_id, tmp_path / f"logs-{node_id}", live_brokers=lambda: [1, 2])


def setting(values: dict[str, str | None]) -> ConfigTransform:
    def transform(current: dict[str, str | None]) -> Mapping[str, str | None]:
        return {**current, **values}

    return transform


async def notified(store: MetadataStore) -> list[Entity]:
    entities = []
    for name in await store.children(znodes.CONFIG_CHANGES):
        raw = await store.get(f"{znodes.CONFIG_CHANGES}/{name}")
        assert raw is not None
        entity = parse_entity_path(znodes.ConfigChangeNotification.from_json(raw).entity_path)
        assert entity is not None
        entities.append(entity)
    return entities


async def test_a_group_config_reaches_the_other_broker_and_goes_away(
    tmp_path: Path, store: MetadataStore
) -> None:
    writer, other = broker(tmp_path, store, 1), broker(tmp_path, store, 2)
    given: list[tuple[str, dict[str, str]]] = []
    other.configs.on_group_configs.append(
        lambda group, configs: given.append((group, dict(configs)))
    )
    code, message = await writer.configs.alter_configs(
        GROUP,
        "team/a",
        setting({SESSION: "50000"}),
        validate_only=False,
    )
    assert (code, message) == (0, None)
    assert await store.get("/config/groups/team%2Fa") is not None
    entity = Entity(EntityType.GROUPS, "team%2Fa")
    assert await notified(store) == [entity]
    await other.configs.apply_config_change(entity)
    assert given == [("team/a", {SESSION: "50000"})]
    entries = {e.name: e for e in await other.configs.describe_group_configs("team/a")}
    assert (entries[SESSION].value, entries[SESSION].source) == (
        "50000",
        ConfigSource.DYNAMIC_GROUP_CONFIG,
    )
    assert await other.configs.groups_with_configs() == ["team/a"]
    # refused and validate-only alters write nothing
    code, message = await writer.configs.alter_configs(
        GROUP,
        "team/a",
        setting({SESSION: "1"}),
        validate_only=False,
    )
    assert code == 40 and message is not None and "group.consumer.min.session" in message
    code, _ = await writer.configs.alter_configs(
        GROUP,
        "team/a",
        setting({SESSION: "55000"}),
        validate_only=True,
    )
    assert code == 0
    assert (await other.configs.read_group_configs("team/a")) == {SESSION: "50000"}
    # deleting the last key removes the node; a rescan tells the listeners
    code, _ = await writer.configs.alter_configs(
        GROUP,
        "team/a",
        setting({SESSION: None}),
        validate_only=False,
    )
    assert code == 0
    assert await store.get("/config/groups/team%2Fa") is None
    await other.configs.rescan_configs()
    assert given[-1] == ("team/a", {})
    assert await other.configs.groups_with_configs() == []
    # an empty group name is not a group resource
    code, _ = await writer.configs.alter_configs(
        GROUP,
        "",
        setting({SESSION: "50000"}),
        validate_only=False,
    )
    assert code == 42  # INVALID_REQUEST
    writer.log_manager.close()
    other.log_manager.close()
