"""The real controller (`ControllerService`) over an in-memory tree, its requests delivered in
process: LeaderAndIsr and UpdateMetadata reach the topic caches built through the harness,
StopReplica(delete) is answered at once. For tests of topic writes without listeners: what
the controller decides is what the caches then show, as on a real node."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import trio
from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.node.config.broker import BrokerConfig
from trafka.node.controller.effects import (
    BrokerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from trafka.node.controller.events import ControllerEvent, StopReplicaResponse
from trafka.node.controller.machine import ControllerConfig
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller.service import ControllerService
from trafka.node.metadata_store import MetadataStore
from trafka.node.registration import follow_quorum_events, register
from trafka.node.topics import TopicManager, TopicState

WAIT_S = 10.0


class ControlledTopics(TopicManager):
    """A node's topic cache whose writes return once the controller carried them out (the
    waits of the broker's `TopicAdmin`)."""

    async def create(
        self, name: str, assignment: Mapping[int, Sequence[int]], configs: Mapping[str, str]
    ) -> TopicState:
        await super().create(name, assignment, configs)
        await self._until(lambda: self._led(name, len(assignment)))
        return self.topics[name]

    async def add_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None
    ) -> TopicState:
        await super().add_partitions(name, count, assignments)
        await self._until(lambda: self._led(name, count))
        return self.topics[name]

    async def delete(self, name: str) -> TopicState:
        state = await super().delete(name)
        await self._until(lambda: self._store.exists_local(znodes.topic_path(name)) is None)
        self.forget(name)
        return state

    def _led(self, name: str, count: int) -> bool:
        state = self.topics.get(name)
        return (
            state is not None
            and len(state.partitions) >= count
            and all(p.leader >= 0 for p in state.partitions.values())
        )

    @staticmethod
    async def _until(condition: Callable[[], bool]) -> None:
        with trio.fail_after(WAIT_S):
            while not condition():
                await trio.sleep(0.01)


class _Channel:
    def __init__(
        self,
        info: BrokerInfo,
        submit: Callable[[ControllerEvent], None],
        caches: list[tuple[int, TopicManager]],
    ) -> None:
        self.info = info
        self.cancel_scope = trio.CancelScope()
        self._submit = submit
        self._caches = caches
        self._send, self._receive = trio.open_memory_channel[BrokerRequest](1000)

    def enqueue(self, request: BrokerRequest) -> None:
        self._send.send_nowait(request)

    async def run(self) -> None:
        with self.cancel_scope:
            async for request in self._receive:
                self._deliver(request)

    def _deliver(self, request: BrokerRequest) -> None:
        if isinstance(request, StopReplicaRequest):
            if request.delete_partitions:
                errors = {tp: ErrorCode.none for tp in request.partitions}
                self._submit(StopReplicaResponse(self.info.broker_id, errors))
            return
        for node_id, cache in self._caches:
            if node_id != self.info.broker_id:
                continue
            for state in request.partition_states:
                if isinstance(request, UpdateMetadataRequest) and state.leader == -2:
                    cache.forget(state.tp.topic)
                    continue
                assert isinstance(request, LeaderAndIsrRequest | UpdateMetadataRequest)
                cache.apply_partition_state(
                    state.tp.topic,
                    state.tp.partition,
                    replicas=state.replicas,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=state.isr,
                )


class ControllerHarness:
    def __init__(self, store: MetadataStore, brokers: Sequence[int]) -> None:
        self.store = store
        self.brokers = list(brokers)
        self.caches: list[tuple[int, TopicManager]] = []

    def topics(
        self,
        *,
        node_id: int = 1,
        validate_configs: Callable[[Mapping[str, str]], None] = lambda _: None,
        live_brokers: Callable[[], list[int]] | None = None,
        rng: random.Random | None = None,
    ) -> ControlledTopics:
        """A topic cache of broker `node_id` that the controller keeps current."""
        cache = ControlledTopics(
            self.store,
            node_id=node_id,
            live_brokers=live_brokers or (lambda: list(self.brokers)),
            validate_configs=validate_configs,
            rng=rng or random.Random(7),
        )
        self.caches.append((node_id, cache))
        return cache

    def channel(
        self, node_id: int, info: BrokerInfo, submit: Callable[[ControllerEvent], None]
    ) -> _Channel:
        return _Channel(info, submit, self.caches)


async def _nothing() -> None:
    return None


@asynccontextmanager
async def running_controller(
    store: MetadataStore, brokers: Sequence[int] = (1,)
) -> AsyncIterator[ControllerHarness]:
    """Register `brokers`, run broker `brokers[0]`'s controller until it is active."""
    harness = ControllerHarness(store, brokers)
    for broker_id in brokers:
        await register(store, BrokerConfig.build(broker_id), now_ms=0)
    service = ControllerService(
        node_id=brokers[0],
        store=store,
        config=ControllerConfig(),
        channel_factory=harness.channel,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_quorum_events, store, [service.wake], _nothing)
        nursery.start_soon(service.run)
        with trio.fail_after(WAIT_S):
            while not service.is_active:
                await trio.sleep(0.01)
        yield harness
        nursery.cancel_scope.cancel()
