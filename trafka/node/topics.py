"""Topic metadata on a node: the cache of topics and partitions, and admin writes to the tree.

The znode layouts are Kafka's (ZkData.scala):

* `/brokers/topics/<t>` = `{"version":3,"topic_id":"<base64url uuid>","partitions":{"0":[1,2]},
  "adding_replicas":{},"removing_replicas":{}}` (the replica assignment, AR)
* `/brokers/topics/<t>/partitions/<p>/state` = `{"version":1,"leader":1,"leader_epoch":0,
  "controller_epoch":1,"isr":[1,2]}`
* `/config/topics/<t>` = `{"version":1,"config":{"retention.ms":"1000"}}`

`TopicManager.load()` rebuilds the cache from the tree at start, so topics survive restarts
(the tree is persisted by the quorum). Admin writes (create, delete, add partitions, alter
configs) validate with Kafka's rules and error codes, write the tree, then update the cache.

Leaders go through the controller (issue 5): `create` writes the config and then only the
assignment `/brokers/topics/<t>` (the controller's TopicChange creates the partition states
and elects leaders, CTL-25); `add_partitions` rewrites the assignment (PartitionModifications,
CTL-26); `delete` creates `/admin/delete_topics/<t>` (the controller's TopicDeletionManager
does the rest, CTL-27..30). The cache is kept current by the controller's LeaderAndIsr and
UpdateMetadata (`apply_partition_state`, `forget`), by re-reading the tree for topics this
node has not seen yet (`refresh_topic`), and by the config change notifications
(the config service writes one after `set_configs`; every broker's listener calls
`apply_configs`).
`assign_replicas` is Kafka's assignment (AdminUtils.assignReplicasToBrokers, rack-aware
when every live broker has a `broker.rack`: `trafka.node.replica_assignment`).
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from trafka.log.names import colliding_topic, topic_name_error
from trafka.metadata_quorum import znodes
from trafka.node.metadata_store import MetadataStore, NodeExists
from trafka.node.replica_assignment import (
    AssignmentError,
    assign_replicas_to_brokers,
    placements_of,
    start_index_for_added_partitions,
)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_PARTITIONS = 4_000
"""Bound on partitions per topic: a topic is created in one quorum multi (MAX_MULTI_OPS)."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionState]
    configs: Mapping[str, str] = field(default_factory=dict)
    """Topic-level overrides only (`/config/topics/<t>`)."""

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class TopicError(Exception):
    """A Kafka error for one topic of an admin request."""

    error_code: ErrorCode
    message: str

    def __str__(self) -> str:
        return self.message


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate (trafka.log.names): length, legal characters, not '.' or '..'."""
    error = topic_name_error(name)
    if error is not None:
        raise TopicError(ErrorCode.invalid_topic_exception, error)


def assign_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    rng: random.Random,
    racks: Mapping[int, str | None] | None = None,
    first_replica_of_partition_zero: int | None = None,
) -> dict[int, list[int]]:
    """Kafka's assignment (`trafka.node.replica_assignment`): rack-aware when every broker
    has a rack. Added partitions (`first_partition` > 0) start where Kafka's
    `AdminUtils.addPartitions` does: at the broker of partition 0's first replica."""
    if replication_factor > len(brokers):
        raise TopicError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.",
        )
    placements = placements_of({b: (racks or {}).get(b) for b in brokers})
    fixed_start_index = -1
    if first_partition > 0 and first_replica_of_partition_zero is not None:
        fixed_start_index = start_index_for_added_partitions(
            placements, first_replica_of_partition_zero
        )
    try:
        plan = assign_replicas_to_brokers(
            placements,
            num_partitions,
            replication_factor,
            rng=rng,
            fixed_start_index=fixed_start_index,
            start_partition_id=first_partition,
        )
    except AssignmentError as error:
        raise TopicError(ErrorCode[error.error_name.lower()], str(error)) from None
    return {partition: list(replicas) for partition, replicas in plan.items()}


def initial_partition_state(
    partition: int, replicas: Sequence[int], live_brokers: Iterable[int]
) -> PartitionState:
    """What a validate-only CreateTopics reports (nothing is created, so the controller
    elects nothing): leader = first live replica, ISR = the live replicas."""
    live = set(live_brokers)
    isr = tuple(r for r in replicas if r in live) or tuple(replicas[:1])
    return PartitionState(partition, tuple(replicas), isr[0], 0, isr)


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_text(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _random_topic_id(rng: random.Random) -> uuid.UUID:
    while True:
        candidate = uuid.UUID(int=rng.getrandbits(128))
        if candidate.int != 0 and candidate.int != 1:  # Kafka reserves ZERO and METADATA
            return candidate


ConfigValidator = Callable[[Mapping[str, str]], None]
"""Raises TopicError(INVALID_CONFIG) for a bad topic config (wired to trafka.log.config)."""


class TopicManager:
    """The node's view of topics plus the admin operations that change them."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        node_id: int,
        live_brokers: Callable[[], list[int]],
        validate_configs: ConfigValidator,
        racks: Callable[[], Mapping[int, str | None]] = dict,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._live_brokers = live_brokers
        self._racks = racks
        self._validate_configs = validate_configs
        self._rng = rng or random.Random()
        self.topics: dict[str, TopicState] = {}
        self.listeners: list[Callable[[str], None]] = []
        """Called with a topic name after it was created, changed or deleted."""

    # ---- reading ------------------------------------------------------------------------------
    async def load(self) -> None:
        """Rebuild the cache from the tree."""
        await self._store.sync()
        topics: dict[str, TopicState] = {}
        for name in await self._store.children(znodes.BROKER_TOPICS):
            state = await self._read_topic(name)
            if state is not None:
                topics[name] = state
        self.topics = topics

    async def refresh_topic(self, name: str) -> None:
        state = await self._read_topic(name)
        if state is None:
            self.topics.pop(name, None)
        else:
            self.topics[name] = state
        self._notify(name)

    async def _read_topic(self, name: str) -> TopicState | None:
        raw = await self._store.get(znodes.topic_path(name))
        if not raw:
            return None
        try:
            assignment = znodes.TopicAssignment.from_json(raw)
        except znodes.ZNodeFormatError:
            return None
        topic_id = (
            topic_id_from_text(assignment.topic_id) if assignment.topic_id else uuid.UUID(int=0)
        )
        partitions: dict[int, PartitionState] = {}
        for partition, replicas in assignment.partitions.items():
            raw_state = await self._store.get(znodes.partition_state_path(name, partition))
            if raw_state:
                state = znodes.PartitionState.from_json(raw_state)
                partitions[partition] = PartitionState(
                    partition, tuple(replicas), state.leader, state.leader_epoch, state.isr
                )
            else:
                partitions[partition] = PartitionState(partition, tuple(replicas), -1, 0, ())
        raw_config = await self._store.get(znodes.topic_config_path(name))
        configs = znodes.EntityConfig.from_json(raw_config).config if raw_config else {}
        return TopicState(name, topic_id, partitions, dict(configs))

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        for state in self.topics.values():
            if state.topic_id == topic_id:
                return state
        return None

    def partition(self, name: str, partition: int) -> PartitionState | None:
        state = self.topics.get(name)
        return None if state is None else state.partitions.get(partition)

    # ---- validation ---------------------------------------------------------------------------
    def check_create(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
        *,
        default_partitions: int,
        default_replication_factor: int,
    ) -> dict[int, list[int]]:
        """Validate a creation (Kafka's order of checks); returns the replica assignment."""
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        collides = colliding_topic(name, self.topics)
        if collides is not None:
            raise TopicError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {collides}",
            )
        live = self._live_brokers()
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            result = self._check_assignment(assignments, live, first_partition=0)
        else:
            partitions = default_partitions if num_partitions == -1 else num_partitions
            factor = default_replication_factor if replication_factor == -1 else replication_factor
            if partitions <= 0 or partitions > MAX_PARTITIONS:
                raise TopicError(
                    ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
                )
            if factor <= 0:
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0.",
                )
            result = assign_replicas(live, partitions, factor, rng=self._rng, racks=self._racks())
        self._validate_configs(configs)
        return result

    def _check_assignment(
        self,
        assignments: Mapping[int, Sequence[int]],
        live: Sequence[int],
        *,
        first_partition: int,
    ) -> dict[int, list[int]]:
        if first_partition + len(assignments) > MAX_PARTITIONS:
            # Before anything walks the assignment: the cap holds on every creation path.
            raise TopicError(ErrorCode.invalid_partitions, "Too many partitions.")
        expected = list(range(first_partition, first_partition + len(assignments)))
        if sorted(assignments) != expected:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "All partitions should have the same number of replicas",
            )
        for partition, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Duplicate replica assignment found: {list(replicas)} for partition "
                    f"{partition}",
                )
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Unknown broker(s) in replica assignment: {unknown}.",
                )
        return {p: list(r) for p, r in assignments.items()}

    # ---- writing ------------------------------------------------------------------------------
    async def create(
        self, name: str, assignment: Mapping[int, Sequence[int]], configs: Mapping[str, str]
    ) -> TopicState:
        """The config first, then the assignment; the controller creates the partition
        states and elects the leaders (CTL-25)."""
        topic_id = _random_topic_id(self._rng)
        if configs:
            await self._store.put(
                znodes.topic_config_path(name), znodes.EntityConfig(dict(configs)).to_json()
            )
        try:
            await self._store.create_all(
                [(znodes.topic_path(name), self._assignment_json(topic_id, assignment))]
            )
        except NodeExists:  # another node created it first
            await self.refresh_topic(name)
            raise TopicError(
                ErrorCode.topic_already_exists, f"Topic '{name}' already exists."
            ) from None
        states = {
            p: PartitionState(p, tuple(replicas), -1, 0, ()) for p, replicas in assignment.items()
        }
        topic = TopicState(name, topic_id, states, dict(configs))
        self.topics[name] = topic
        self._notify(name)
        return topic

    async def delete(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        try:
            await self._store.create(znodes.delete_topic_path(name), b"")
        except NodeExists:
            pass  # already being deleted
        return state

    def apply_partition_state(
        self,
        name: str,
        partition: int,
        *,
        replicas: Sequence[int],
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
    ) -> None:
        """The controller's view of one partition (LeaderAndIsr / UpdateMetadata)."""
        state = self.topics.get(name)
        if state is None:
            return
        partitions = dict(state.partitions)
        partitions[partition] = PartitionState(
            partition, tuple(replicas), leader, leader_epoch, tuple(isr)
        )
        self.topics[name] = replace(state, partitions=partitions)

    def forget(self, name: str) -> None:
        """The topic is being deleted (UpdateMetadata with leader -2)."""
        if self.topics.pop(name, None) is not None:
            self._notify(name)

    async def add_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        before_write: Callable[[int], None] | None = None,
    ) -> TopicState:
        """`before_write(partitions added)` runs once every check passed (the controller
        mutation quota, which may refuse with TopicError)."""
        state = self.topics.get(name)
        if state is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        current = len(state.partitions)
        if count <= current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{count}.",
            )
        if count > MAX_PARTITIONS:
            raise TopicError(ErrorCode.invalid_partitions, "Too many partitions.")
        live = self._live_brokers()
        added = count - current
        if assignments:
            if len(assignments) != added:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {added} but {len(assignments)} "
                    "assignments provided.",
                )
            new = self._check_assignment(
                {current + i: r for i, r in enumerate(assignments)}, live, first_partition=current
            )
        else:
            first = state.partitions.get(0)
            new = assign_replicas(
                live,
                added,
                state.replication_factor,
                first_partition=current,
                rng=self._rng,
                racks=self._racks(),
                first_replica_of_partition_zero=first.replicas[0] if first else None,
            )
        if before_write is not None:
            before_write(len(new))
        partitions = dict(state.partitions)
        for partition, replicas in new.items():
            # the controller creates the state and elects the leader (CTL-26)
            partitions[partition] = PartitionState(partition, tuple(replicas), -1, 0, ())
        all_replicas = {p: list(s.replicas) for p, s in partitions.items()}
        await self._store.put(
            znodes.topic_path(name), self._assignment_json(state.topic_id, all_replicas)
        )
        topic = replace(state, partitions=partitions)
        self.topics[name] = topic
        self._notify(name)
        return topic

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        self._validate_configs(configs)
        await self._store.put(
            znodes.topic_config_path(name), znodes.EntityConfig(dict(configs)).to_json()
        )
        topic = replace(state, configs=dict(configs))
        self.topics[name] = topic
        self._notify(name)
        return topic

    def apply_configs(self, name: str, configs: Mapping[str, str]) -> bool:
        """The topic's overrides as read from the tree after a config change notification
        (`trafka.node.config.changes`); False when the topic is unknown here or unchanged."""
        state = self.topics.get(name)
        if state is None or dict(state.configs) == dict(configs):
            return False
        self.topics[name] = replace(state, configs=dict(configs))
        self._notify(name)
        return True

    def _notify(self, name: str) -> None:
        for listener in self.listeners:
            listener(name)

    @staticmethod
    def _assignment_json(topic_id: uuid.UUID, assignment: Mapping[int, Sequence[int]]) -> bytes:
        return znodes.TopicAssignment(
            partitions={p: tuple(r) for p, r in sorted(assignment.items())},
            topic_id=topic_id_text(topic_id),
        ).to_json()
