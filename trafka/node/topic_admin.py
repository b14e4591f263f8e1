"""Topic admin on a node: CreateTopics, CreatePartitions, DeleteTopics and auto-creation.

The writes go to the tree (`TopicManager`) and the controller carries them out: it creates
the partition states and elects the leaders (CTL-25/26), and deletes a topic once every
replica deleted its logs (CTL-29). The calls here wait, bounded by `ADMIN_WAIT_S`, until
this node's metadata cache shows the result, so a client that creates a topic can produce
at once.

`charge` (the request's controller mutation quota, KIP-599: `trafka.node.quota.service.
MutationCharge`) is called with the partitions a topic creates or deletes once it passed
every other check, just before the write; it raises TopicError(THROTTLING_QUOTA_EXCEEDED) to
refuse the topic. `validate_only` never charges.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

import trio
from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_cache import MetadataCache
from trafka.node.metadata_store import MetadataStore
from trafka.node.topics import TopicError, TopicManager, TopicState, initial_partition_state

ADMIN_WAIT_S = 10.0
"""How long CreateTopics / CreatePartitions / DeleteTopics wait for the controller's result."""
ADMIN_POLL_S = 0.02

Charge = Callable[[int], None]
"""Called with a topic's partition count before it is written; may raise TopicError."""


def _no_charge(partitions: int) -> None:
    return None


class TopicAdmin:
    """The admin operations of the topic APIs and of Metadata's auto-creation."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        topics: TopicManager,
        metadata: MetadataCache,
        config: Callable[[], BrokerConfig],
    ) -> None:
        self._store = store
        self._topics = topics
        self._metadata = metadata
        self._config = config

    async def _wait_for(self, condition: Callable[[], bool]) -> bool:
        with trio.move_on_after(ADMIN_WAIT_S):
            while not condition():
                await trio.sleep(ADMIN_POLL_S)
            return True
        return False

    def _has_leaders(self, name: str, partitions: int | None = None) -> bool:
        state = self._topics.get(name)
        if state is None:
            return False
        if partitions is not None and len(state.partitions) < partitions:
            return False
        return all(p.leader >= 0 for p in state.partitions.values())

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
        *,
        validate_only: bool,
        charge: Charge = _no_charge,
    ) -> TopicState:
        config = self._config()
        plan = self._topics.check_create(
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
            default_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
        )
        if validate_only:
            live = self._metadata.live_broker_ids()
            return TopicState(
                name,
                uuid.UUID(int=0),
                {p: initial_partition_state(p, r, live) for p, r in plan.items()},
                dict(configs),
            )
        charge(len(plan))
        state = await self._topics.create(name, plan, configs)
        await self._wait_for(lambda: self._has_leaders(name))
        return self._topics.get(name) or state

    async def add_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
        charge: Charge = _no_charge,
    ) -> TopicState:
        if validate_only:
            state = self._topics.get(name)
            if state is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            if count <= len(state.partitions):
                raise TopicError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {len(state.partitions)} partitions, which is higher "
                    f"than the requested {count}.",
                )
            return state
        state = await self._topics.add_partitions(name, count, assignments, before_write=charge)
        await self._wait_for(lambda: self._has_leaders(name, count))
        return self._topics.get(name) or state

    async def auto_create_topic(self, name: str) -> TopicState | None:
        """Metadata auto-creation (auto.create.topics.enable); None when disabled."""
        config = self._config()
        if not config.get_bool("auto.create.topics.enable"):
            return None
        factor = min(
            config.get_int("default.replication.factor"),
            len(self._metadata.live_broker_ids()) or 1,
        )
        try:
            return await self.create_topic(
                name, config.get_int("num.partitions"), factor, {}, {}, validate_only=False
            )
        except TopicError as error:
            if error.error_code != ErrorCode.topic_already_exists:
                raise
            # created concurrently (another Metadata request or broker): use that topic
            await self._topics.refresh_topic(name)
            await self._wait_for(lambda: self._has_leaders(name))
            return self._topics.get(name)

    async def delete_topic(self, name: str, *, charge: Charge = _no_charge) -> None:
        if not self._config().get_bool("delete.topic.enable"):
            raise TopicError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        state = self._topics.get(name)
        charge(len(state.partitions) if state is not None else 0)
        await self._topics.delete(name)
        # The controller removes the topic once every replica deleted its logs (CTL-29).
        path = znodes.topic_path(name)
        await self._wait_for(lambda: self._store.exists_local(path) is None)
        self._topics.forget(name)
