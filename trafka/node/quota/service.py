"""The node's quota service: the quota entities of the metadata tree in a `QuotaManager`.

* **Reads**: `load` reads every entity (`/config/users/*`, `/config/users/*/clients/*`,
  `/config/clients/*`, `/config/ips/*`) from the node's local replica of the tree, at start
  and on every rescan of the config-change listener; `apply_path` re-reads the one entity a
  change notification names (`users/alice/clients/c1`, ...). Every broker follows every
  change this way (`trafka.node.config.changes`).
* **Writes** (AlterClientQuotas): read-modify-write of the entity's znode, keeping keys that
  are not quotas (a user's SCRAM credentials), then the change notification, as Kafka's
  `AdminZkClient.changeConfigs`. The writer applies the change at once.
* **Controller mutations** (KIP-599): `controller_mutations` gives a CreateTopics /
  CreatePartitions / DeleteTopics request its `MutationCharge`, which `TopicAdmin` calls with
  a topic's partitions once the topic passed every other check, just before the write
  (`validate_only` writes nothing and is not charged, as Kafka). The quota lives on the
  broker that handles the request: clients send these requests to the controller
  (Metadata's controller_id), as Kafka's, whose quota lives in the controller.
* **Describe** (DescribeClientQuotas): the filter of `trafka.node.quota.describe` over the
  entities in the tree (after a quorum sync, so a describe after an alter on another broker
  sees it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Final

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.net.api_keys import ApiKey
from trafka.node.clock import SYSTEM_CLOCK
from trafka.node.config.changes import notify_config_change
from trafka.node.metadata_store import LocalTreeReads, MetadataStore, NoNode
from trafka.node.quota import throttling
from trafka.node.quota.entities import QuotaEntity, quota_values, stored_value
from trafka.node.quota.manager import ControllerMutationQuota, QuotaManager, QuotaType
from trafka.node.security.scram_store import parse_entity
from trafka.node.topics import TopicError

log = logging.getLogger("trafka.node.quota")

MAX_ENTITIES: Final = 100_000
"""Bound on the entities one load reads (far above any real deployment)."""


def _string_config(raw: bytes | None) -> dict[str, str]:
    return {k: v for k, v in parse_entity(raw)["config"].items() if isinstance(v, str)}


def _children(tree: LocalTreeReads, path: str) -> list[str]:
    try:
        return sorted(tree.children_local(path))
    except NoNode:
        return []


def _read(tree: LocalTreeReads, entity: QuotaEntity) -> dict[str, float]:
    try:
        raw, _ = tree.get_local(f"{znodes.CONFIG}/{entity.path()}")
    except NoNode:
        return {}
    return quota_values(entity, _string_config(bytes(raw)))


def read_all(tree: LocalTreeReads) -> dict[QuotaEntity, dict[str, float]]:
    """Every quota entity with at least one quota key (local replica of the tree)."""
    found: dict[QuotaEntity, dict[str, float]] = {}
    entities: list[QuotaEntity] = []
    for user in _children(tree, f"{znodes.CONFIG}/users"):
        entities.append(QuotaEntity(user=user))
        for client in _children(tree, f"{znodes.CONFIG}/users/{user}/clients"):
            entities.append(QuotaEntity(user=user, client_id=client))
    entities += [QuotaEntity(client_id=c) for c in _children(tree, f"{znodes.CONFIG}/clients")]
    entities += [QuotaEntity(ip=ip) for ip in _children(tree, f"{znodes.CONFIG}/ips")]
    for entity in entities[:MAX_ENTITIES]:
        values = _read(tree, entity)
        if values:
            found[entity] = values
    return found


THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."
"""Kafka's message for THROTTLING_QUOTA_EXCEEDED (89)."""


class MutationCharge:
    """One topic-admin request's controller mutation quota: call it with a topic's partition
    count before the topic is written; TopicError(THROTTLING_QUOTA_EXCEEDED) refuses that
    topic (strict versions only). `finish` returns the request's throttle time."""

    def __init__(
        self,
        quota: ControllerMutationQuota,
        now_ms: Callable[[], int],
        manager: QuotaManager | None = None,
    ) -> None:
        self._quota = quota
        self._now_ms = now_ms
        self._manager = manager

    @classmethod
    def unbounded(cls) -> MutationCharge:
        return cls(ControllerMutationQuota(None, strict=False), SYSTEM_CLOCK.now_ms)

    def __call__(self, partitions: int) -> None:
        if self._quota.bucket is None:
            return
        if not self._quota.record(partitions, self._now_ms()):
            raise TopicError(ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)

    def finish(self) -> int:
        """The request's throttle time (ms, 0: none), counted in the quota totals."""
        if self._manager is not None:
            self._manager.count_mutation_throttle(self._quota)
        return self._quota.throttle_time_ms


class QuotaService:
    def __init__(
        self,
        store: MetadataStore,
        manager: QuotaManager,
        *,
        now_ms: Callable[[], int] = SYSTEM_CLOCK.now_ms,
    ) -> None:
        self._store = store
        self.manager = manager
        self.now_ms = now_ms

    def load(self) -> None:
        if self.manager.set_configs(read_all(self._store)):
            log.info("client quotas: %d entities", len(self.manager.configs))

    def apply_path(self, entity_path: str | None) -> None:
        """A change notification's entity (None: every entity)."""
        if entity_path is None:
            self.load()
            return
        entity = QuotaEntity.from_path(entity_path)
        if entity is None:
            return
        if self.manager.set_entity(entity, _read(self._store, entity)):
            log.info("client quota %s: %s", entity_path, dict(self.manager.configs.get(entity, {})))

    async def alter(
        self,
        entity: QuotaEntity,
        ops: list[tuple[str, float | None]],
        *,
        validate_only: bool,
    ) -> None:
        """Set (value) or remove (None) each key; QuotaEntityError on a bad key or value,
        before anything is written."""
        updates = {
            key: None if value is None else stored_value(entity, key, value) for key, value in ops
        }
        if validate_only:
            return
        path = f"{znodes.CONFIG}/{entity.path()}"

        def change(raw: bytes | None) -> bytes:
            current = parse_entity(raw)
            config = dict(current["config"])
            for key, text in updates.items():
                if text is None:
                    config.pop(key, None)
                else:
                    config[key] = text
            current["config"] = dict(sorted(config.items()))
            current.setdefault("version", 1)
            return json.dumps(current, separators=(",", ":"), sort_keys=True).encode()

        await self._store.update(path, change)
        await notify_config_change(self._store, entity.path())
        self.apply_path(entity.path())

    def controller_mutations(self, user: str, client_id: str, *, strict: bool) -> MutationCharge:
        """The controller mutation quota of one CreateTopics / CreatePartitions /
        DeleteTopics request (strict: a version that knows THROTTLING_QUOTA_EXCEEDED)."""
        if not self.manager.any_client_quota:
            return MutationCharge.unbounded()
        quota = self.manager.controller_mutation(user, client_id, self.now_ms(), strict=strict)
        return MutationCharge(quota, self.now_ms, self.manager)

    async def entities(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        """Every entity in the tree, after a quorum sync (DescribeClientQuotas)."""
        await self._store.sync()
        return read_all(self._store)

    # ---- per request and per connection (trafka.node.quota.throttling) ---------------------
    def charge(
        self,
        api_key: int,
        request: object,
        response: object,
        *,
        user: str,
        client_id: str,
        request_bytes: int,
        handler_ms: float,
    ) -> int:
        """Record what one answered request cost its client; the throttle time in ms (0:
        not throttled)."""
        manager = self.manager
        if not manager.any_client_quota:
            return 0
        now_ms = self.now_ms()
        throttle = 0
        if api_key == ApiKey.PRODUCE:
            throttle = manager.record(QuotaType.PRODUCE, user, client_id, request_bytes, now_ms)
        elif api_key == ApiKey.FETCH and not throttling.is_replica_fetch(request):
            size = throttling.response_size(response)
            throttle = manager.record(QuotaType.FETCH, user, client_id, size, now_ms)
        if not throttling.exempt_from_request_quota(api_key, request):
            throttle = max(
                throttle, manager.record_request_time(user, client_id, handler_ms, now_ms)
            )
        return throttle

    def throttle_accept(self, listener_name: str, protected: bool) -> int:
        """`trafka.net.server.ConnectionPolicy`: the broker-wide and per-listener
        `max.connection.creation.rate` (KIP-612)."""
        return self.manager.record_accept(listener_name, protected, self.now_ms())

    def admit(self, ip: str, listener_name: str = "", protected: bool = False) -> int:
        """`trafka.net.server.ConnectionPolicy`: the per-IP connection-creation quota, on
        every listener (brokers keep their few connections open, so a rate rarely meets
        them)."""
        if not self.manager.any_ip_quota:
            return 0
        return self.manager.record_connection(
            ip, self.now_ms(), listener=listener_name, protected=protected
        )
