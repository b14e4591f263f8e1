"""TopicManager over the in-memory tree (`memory_store`): Kafka's rules, errors, persistence."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping

import pytest
from kio.schema.errors import ErrorCode

from tests.node.controller_loop import ControllerHarness, running_controller
from trafka.metadata_quorum import znodes
from trafka.node.metadata_store import MetadataStore, memory_store
from trafka.node.topics import (
    TopicError,
    TopicManager,
    assign_replicas,
    topic_id_from_text,
    topic_id_text,
    validate_topic_name,
)


def _manager(controller: ControllerHarness, brokers: list[int] | None = None) -> TopicManager:
    """Broker 1's topic cache, with the controller carrying out its writes."""

    def reject_unknown(configs: Mapping[str, str]) -> None:
        if any(key not in ("retention.ms", "cleanup.policy") for key in configs):
            raise TopicError(ErrorCode.invalid_config, "Unknown topic config")

    return controller.topics(
        live_brokers=lambda: brokers or [1],
        validate_configs=reject_unknown,
        rng=random.Random(7),
    )


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    async with memory_store() as in_memory:
        yield in_memory


@pytest.fixture
async def controller(store: MetadataStore) -> AsyncIterator[ControllerHarness]:
    async with running_controller(store) as harness:
        yield harness


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "bad name", "bad/name", "ümlaut", "a:b"]
)
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(TopicError) as caught:
        validate_topic_name(name)
    assert caught.value.error_code == ErrorCode.invalid_topic_exception


@pytest.mark.parametrize("name", ["a", "a.b_c-D9", "a" * 249, "__consumer_offsets"])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


def test_round_robin_assignment_spreads_leaders_and_replicas() -> None:
    plan = assign_replicas([1, 2, 3], 6, 3, rng=random.Random(1))
    assert sorted(plan) == list(range(6))
    for replicas in plan.values():
        assert sorted(replicas) == [1, 2, 3]
    leaders = [replicas[0] for replicas in plan.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    with pytest.raises(TopicError) as caught:
        assign_replicas([1, 2], 1, 3, rng=random.Random(1))
    assert caught.value.error_code == ErrorCode.invalid_replication_factor


def test_topic_id_text_round_trip() -> None:
    topic_id = topic_id_from_text("piCJXZbdMl-EA_kH6z5exQ")
    assert topic_id_text(topic_id) == "piCJXZbdMl-EA_kH6z5exQ"


async def test_create_persists_and_reloads(
    store: MetadataStore, controller: ControllerHarness
) -> None:
    manager = _manager(controller)
    plan = manager.check_create(
        "orders",
        3,
        1,
        {},
        {"retention.ms": "1000"},
        default_partitions=1,
        default_replication_factor=1,
    )
    created = await manager.create("orders", plan, {"retention.ms": "1000"})
    assert sorted(created.partitions) == [0, 1, 2]
    assert created.partitions[0].leader == 1 and created.partitions[0].isr == (1,)

    reloaded = _manager(controller)
    await reloaded.load()
    state = reloaded.get("orders")
    assert state is not None
    assert state.topic_id == created.topic_id
    assert state.configs == {"retention.ms": "1000"}
    assert reloaded.by_id(created.topic_id) == state
    raw = await store.get(znodes.topic_path("orders"))
    assert raw is not None
    assignment = znodes.TopicAssignment.from_json(raw)
    assert assignment.partitions == {0: (1,), 1: (1,), 2: (1,)}


async def test_create_checks_in_kafkas_order(
    store: MetadataStore, controller: ControllerHarness
) -> None:
    manager = _manager(controller)
    plan = manager.check_create(
        "a.b", 1, 1, {}, {}, default_partitions=1, default_replication_factor=1
    )
    await manager.create("a.b", plan, {})

    def code_of(**kwargs: object) -> ErrorCode:
        arguments: dict[str, object] = {
            "name": "t",
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": {},
            "configs": {},
            "default_partitions": 1,
            "default_replication_factor": 1,
        }
        arguments.update(kwargs)
        with pytest.raises(TopicError) as caught:
            manager.check_create(
                arguments.pop("name"),  # type: ignore[arg-type]
                arguments.pop("num_partitions"),  # type: ignore[arg-type]
                arguments.pop("replication_factor"),  # type: ignore[arg-type]
                arguments.pop("assignments"),  # type: ignore[arg-type]
                arguments.pop("configs"),  # type: ignore[arg-type]
                **arguments,  # type: ignore[arg-type]
            )
        return caught.value.error_code

    assert code_of(name="a.b") == ErrorCode.topic_already_exists
    assert code_of(name="a_b") == ErrorCode.invalid_topic_exception  # collides with a.b
    assert code_of(num_partitions=0) == ErrorCode.invalid_partitions
    assert code_of(replication_factor=2) == ErrorCode.invalid_replication_factor
    assert code_of(replication_factor=0) == ErrorCode.invalid_replication_factor
    assert code_of(assignments={0: [1]}) == ErrorCode.invalid_request
    assert (
        code_of(num_partitions=-1, replication_factor=-1, assignments={0: [7]})
        == ErrorCode.invalid_replica_assignment
    )
    assert (
        code_of(num_partitions=-1, replication_factor=-1, assignments={1: [1]})
        == ErrorCode.invalid_replica_assignment
    )
    assert code_of(configs={"nope": "1"}) == ErrorCode.invalid_config
    defaults = manager.check_create(
        "d", -1, -1, {}, {}, default_partitions=4, default_replication_factor=1
    )
    assert len(defaults) == 4


async def test_add_partitions_delete_and_configs(
    store: MetadataStore, controller: ControllerHarness
) -> None:
    manager = _manager(controller)
    plan = manager.check_create(
        "t", 2, 1, {}, {}, default_partitions=1, default_replication_factor=1
    )
    await manager.create("t", plan, {})
    grown = await manager.add_partitions("t", 4, None)
    assert sorted(grown.partitions) == [0, 1, 2, 3]
    with pytest.raises(TopicError) as caught:
        await manager.add_partitions("t", 3, None)
    assert caught.value.error_code == ErrorCode.invalid_partitions
    with pytest.raises(TopicError) as caught:
        await manager.add_partitions("t", 6, [[1]])
    assert caught.value.error_code == ErrorCode.invalid_replica_assignment
    await manager.set_configs("t", {"cleanup.policy": "compact"})
    reloaded = _manager(controller)
    await reloaded.load()
    state = reloaded.get("t")
    assert state is not None and len(state.partitions) == 4
    assert state.configs == {"cleanup.policy": "compact"}
    await reloaded.delete("t")
    again = _manager(controller)
    await again.load()
    assert again.get("t") is None
    with pytest.raises(TopicError) as caught:
        await again.delete("t")
    assert caught.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_concurrent_creation_loses_with_topic_already_exists(
    store: MetadataStore, controller: ControllerHarness
) -> None:
    first, second = _manager(controller), _manager(controller)
    plan = first.check_create(
        "race", 1, 1, {}, {}, default_partitions=1, default_replication_factor=1
    )
    again = second.check_create(
        "race", 1, 1, {}, {}, default_partitions=1, default_replication_factor=1
    )
    await first.create("race", plan, {})
    second._store = first._store  # the same tree, as two brokers share the quorum's
    with pytest.raises(TopicError) as caught:
        await second.create("race", again, {})
    assert caught.value.error_code == ErrorCode.topic_already_exists


def test_assignment_is_rack_aware_when_every_broker_has_a_rack() -> None:
    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b"}
    for seed in range(20):
        plan = assign_replicas([1, 2, 3], 6, 2, rng=random.Random(seed), racks=racks)
        assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in plan.values())
        assert sorted(replicas[0] for replicas in plan.values()) == [1, 1, 2, 2, 3, 3]
    # Racks on only some brokers: Kafka's rack-unaware round robin (RackAwareMode.Safe), which
    # puts some partition on brokers 1 and 2 together.
    partial = assign_replicas(
        [1, 2, 3], 6, 2, rng=random.Random(1), racks={1: "a", 2: "a", 3: None}
    )
    assert any(set(replicas) == {1, 2} for replicas in partial.values())


async def test_create_places_replicas_by_the_live_brokers_racks(store: MetadataStore) -> None:
    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b"}
    manager = TopicManager(
        store,
        node_id=1,
        live_brokers=lambda: [1, 2, 3],
        racks=lambda: racks,
        validate_configs=lambda _configs: None,
        rng=random.Random(5),
    )
    plan = manager.check_create(
        "r", 6, 2, {}, {}, default_partitions=1, default_replication_factor=1
    )
    assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in plan.values())
