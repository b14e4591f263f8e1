"""The classic group coordinator of one `__consumer_offsets` partition, as pure logic.

Sans-I/O (STYLE 1, 5): every call takes `now_ms`; member ids come from a `random.Random`.
A call returns its result and/or `Effects`:

* `Effects.replies`: answers to *parked* requests. JoinGroup and SyncGroup may not be
  answerable at once (GRP-10: the coordinator holds the JoinGroups until every member has
  rejoined; followers' SyncGroups wait for the leader's assignment, GRP-08). The shell gives
  each of those requests a `RequestId`; the answer, now or later, is a `Reply` addressed to it.
  A JoinGroup/SyncGroup call's own answer is also delivered as a `Reply` when it is immediate.
* `Effects.records`: `__consumer_offsets` records to append, in order (offset commits,
  group metadata after a generation's assignment, tombstones for deletions and expiry).
* Deadlines: `next_deadline_ms()` says when `tick(now_ms)` must be called next (session
  expiry GRP-15/GRP-20, rebalance timeout, `group.initial.rebalance.delay.ms`, pending sync,
  KIP-394 pending members, offset retention).

Kafka's rules (apache/kafka `GroupCoordinator.scala` 2.x-3.x / `GroupMetadataManager.java`
classic groups), summarised:

* JoinGroup with an empty member id: v4+ dynamic members get MEMBER_ID_REQUIRED with a fresh
  id and are "pending" until they rejoin with it (KIP-394); static members
  (`group.instance.id`, KIP-345) join at once, and a static member that comes back with a new
  member id *replaces* its old one: in Stable, when the selected protocol would not change,
  it gets the current generation back with no rebalance, and its old id is fenced
  (FENCED_INSTANCE_ID).
* A join moves Empty/Stable/CompletingRebalance to PreparingRebalance. The rebalance
  completes when every member has rejoined (and no KIP-394 member is pending) or when the
  rebalance timeout (max of the members') passes; members that did not rejoin are removed
  (static ones stay, until their session expires). A group that was Empty waits
  `group.initial.rebalance.delay.ms` first, extended while new members keep arriving, up to
  the rebalance timeout (KIP-134). The leader gets every member's metadata for the selected
  protocol: the one every member supports with the most first-choice votes (GRP-04, GRP-10).
* SyncGroup: the leader's assignment is stored (a GroupMetadata record) and distributed,
  each member seeing only its own bytes (GRP-08). Members that do not sync within the
  rebalance timeout are removed (Kafka's pending-sync timer).
* Heartbeat: REBALANCE_IN_PROGRESS in PreparingRebalance, ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (GRP-16, GRP-18).
* OffsetCommit: "simple" commits (generation -1) to Empty or unknown groups; otherwise the
  member and generation must match; CompletingRebalance answers REBALANCE_IN_PROGRESS (GRP-12).
* Offsets expire `offsets.retention.minutes` after the group became Empty (or after the
  commit for simple groups, or for topics a Stable consumer group no longer subscribes to,
  KIP-211/KIP-496); an Empty group with no offsets left becomes Dead and is tombstoned.

Transactional offsets (TxnOffsetCommit): pending per producer id until the transaction's
marker reaches this partition (`complete_txn_offsets`); see `txn_offset_commit`.

KIP-848 consumer groups (ConsumerGroupHeartbeat): the logic is `consumer_group.py`; here a
`_Group` with a `consumer` part is such a group, sharing the offsets and the group id space
with classic groups. A classic JoinGroup to an Empty consumer group converts it to a classic
group (and a heartbeat to an Empty classic group converts it the other way), keeping the
offsets: Kafka's offline migration. Online migration (`group.consumer.migration.policy`):
a ConsumerGroupHeartbeat joining a classic group with members converts it (`_upgrade`,
GROUP_ID_NOT_FOUND when not allowed); JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic
members of a non-empty consumer group go to the consumer group (`ConsumerGroup.classic_*`);
the last consumer-protocol member leaving or fenced converts the group back
(`_maybe_downgrade`). Per-group dynamic configs (`set_group_config`) override the session
timeout and heartbeat interval of one group.

Not implemented: the downgrade on a static member replacement, reverting state when the
shell fails to append records (the shell answers an error instead; see `group_service`),
shrinking a group that is over a lowered `group.max.size` at rebalance.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from trafka.group.config import GroupConfig
from trafka.group.consumer_group import (
    ClassicMemberState,
    ConsumerGroup,
    ConsumerGroupDescription,
    ConsumerGroupSettings,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    TopicsImage,
    consumer_group_from_classic,
    describe,
    group_by_topic,
    load_consumer_group,
    validate_heartbeat,
)
from trafka.group.consumer_protocol import (
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from trafka.group.consumer_records import ConsumerGroupRecord
from trafka.group.group_configs import GroupConfigOverrides
from trafka.group.messages import (
    NO_LEADER_EPOCH,
    NO_OFFSET,
    UNKNOWN_MEMBER_ID,
    FetchedOffset,
    GroupDeletion,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    JoinedMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    LeftMember,
    MemberDescription,
    OffsetCommitRequest,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    Protocol,
    RequestId,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
)
from trafka.group.records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitRecord,
    OffsetCommitValue,
    OffsetsTopicRecord,
    UnknownRecord,
)
from trafka.group.state import GroupState, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"
# JoinGroup v9 lets a static leader that replaced itself skip computing an assignment (KIP-814).
_SKIP_ASSIGNMENT_MIN_VERSION = 9
_MEMBER_ID_REQUIRED_MIN_VERSION = 4


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a parked JoinGroup or SyncGroup."""

    request_id: RequestId
    result: JoinGroupResult | SyncGroupResult


@dataclass(frozen=True, slots=True)
class Effects:
    replies: tuple[Reply, ...] = ()
    records: tuple[OffsetsTopicRecord, ...] = ()


@dataclass(slots=True)
class _EffectsBuilder:
    replies: list[Reply] = field(default_factory=list)
    records: list[OffsetsTopicRecord] = field(default_factory=list)

    def reply(self, request_id: RequestId, result: JoinGroupResult | SyncGroupResult) -> None:
        self.replies.append(Reply(request_id, result))

    def build(self) -> Effects:
        return Effects(tuple(self.replies), tuple(self.records))


@dataclass(slots=True)
class _ParkedJoin:
    request_id: RequestId
    api_version: int


@dataclass(slots=True)
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    parked_join: _ParkedJoin | None = None
    parked_sync: RequestId | None = None
    is_new: bool = False
    joined_at_ms: int = 0
    last_heartbeat_ms: int = 0

    def protocol_names(self) -> list[str]:
        return [protocol.name for protocol in self.protocols]

    def metadata_for(self, protocol_name: str | None) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        return b""

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def expiry_ms(self, config: GroupConfig) -> int | None:
        """When the coordinator gives up on this member (Kafka's `shouldKeepAlive`)."""
        if self.parked_join is not None:
            # A member waiting in a rebalance is alive; a brand-new one only for so long.
            return self.joined_at_ms + config.new_member_join_timeout_ms if self.is_new else None
        if self.parked_sync is not None:
            return None
        return self.last_heartbeat_ms + self.session_timeout_ms


@dataclass(slots=True)
class _Group:
    group_id: str
    state: GroupState
    state_timestamp_ms: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry ms
    offsets: dict[tuple[str, int], OffsetCommitValue] = field(default_factory=dict)
    # TxnOffsetCommit (KIP-98/447): producer id -> offsets visible once its COMMIT marker lands
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetCommitValue]] = field(
        default_factory=dict
    )
    join_deadline_ms: int | None = None
    initial_delay_remaining_ms: int | None = None  # not None while in the initial delay
    new_member_added: bool = False
    pending_sync: set[str] = field(default_factory=set)
    sync_deadline_ms: int | None = None
    consumer: ConsumerGroup | None = None  # a KIP-848 consumer group

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(
            member.parked_join is not None for member in self.members.values()
        )

    def supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        names = {protocol.name for protocol in protocols}
        return bool(names & self._candidate_protocols())

    def _candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        candidates = set(next(members).protocol_names())
        for member in members:
            candidates &= set(member.protocol_names())
        return candidates

    def select_protocol(self) -> str:
        """Among the protocols every member supports, the most first choices (GRP-10)."""
        candidates = self._candidate_protocols()
        if not candidates:
            raise AssertionError("select_protocol on a group with no common protocol")
        votes: dict[str, int] = {}
        order: list[str] = []
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda name: votes[name])  # ties: first voted, deterministic

    def is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        if group_instance_id is None:
            return False
        known = self.static_members.get(group_instance_id)
        return known is not None and known != member_id

    def subscribed_topics(self) -> frozenset[str] | None:
        """Union of the members' subscriptions, if the group speaks the consumer protocol."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscribed_topics(member.metadata_for(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def metadata_record(self) -> GroupMetadataRecord:
        members = tuple(
            MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=member.session_timeout_ms,
                subscription=member.metadata_for(self.protocol_name),
                assignment=member.assignment,
            )
            for member in self.members.values()
        )
        value = GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=members,
        )
        return GroupMetadataRecord(self.group_id, value)


def _not_found(group_id: str, reason: str) -> ConsumerHeartbeatResult:
    return ConsumerHeartbeatResult(
        ErrorCode.group_id_not_found, f"Group {group_id} {reason}.", member_epoch=-1
    )


class GroupCoordinator:
    """The groups of one `__consumer_offsets` partition. Not thread-safe; one owner (the shell)."""

    def __init__(self, config: GroupConfig, rng: random.Random, now_ms: int = 0) -> None:
        self._config = config
        self._consumer_settings = ConsumerGroupSettings(
            session_timeout_ms=config.consumer_session_timeout_ms,
            heartbeat_interval_ms=config.consumer_heartbeat_interval_ms,
            assignors=config.consumer_assignors,
            max_size=min(config.consumer_max_size, config.max_members_per_group),
        )
        self._rng = rng
        self._groups: dict[str, _Group] = {}
        self._group_configs: dict[str, GroupConfigOverrides] = {}
        self._image: TopicsImage = {}
        """The topics image of the last ConsumerGroupHeartbeat: what a classic member's
        JoinGroup to a consumer group resolves its subscription against."""
        self._next_retention_check_ms = now_ms + config.offsets_retention_check_interval_ms

    # --- per-group dynamic configs (KIP-848, `group_configs.py`) --------------------------

    def set_group_config(self, group_id: str, overrides: GroupConfigOverrides | None) -> None:
        """A group's `consumer.*` overrides changed (None or empty: back to the broker's).
        Running members get them on their next heartbeat."""
        if overrides is None or overrides.is_empty():
            self._group_configs.pop(group_id, None)
        else:
            self._group_configs[group_id] = overrides

    def consumer_settings(self, group_id: str) -> ConsumerGroupSettings:
        """The KIP-848 settings of one group: the broker's, with the group's overrides."""
        overrides = self._group_configs.get(group_id)
        if overrides is None:
            return self._consumer_settings
        return dataclasses.replace(
            self._consumer_settings,
            session_timeout_ms=overrides.consumer_session_timeout_ms
            or self._consumer_settings.session_timeout_ms,
            heartbeat_interval_ms=overrides.consumer_heartbeat_interval_ms
            or self._consumer_settings.heartbeat_interval_ms,
        )

    # --- loading (failover, GRP-05) ------------------------------------------------------

    @classmethod
    def load(
        cls,
        config: GroupConfig,
        rng: random.Random,
        records: Iterable[OffsetsTopicRecord],
        now_ms: int,
        group_configs: Mapping[str, GroupConfigOverrides] | None = None,
    ) -> GroupCoordinator:
        """Rebuild the state of a partition from its records, in log order (last one wins).

        Groups with members come back Stable (Kafka's `loadGroup`), with every session
        restarting at `now_ms`; groups without members come back Empty. `group_configs`:
        the per-group dynamic configs known now (`set_group_config` keeps them current).
        """
        coordinator = cls(config, rng, now_ms)
        for group_id, overrides in (group_configs or {}).items():
            coordinator.set_group_config(group_id, overrides)
        metadata: dict[str, GroupMetadataValue] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        consumer_records: dict[str, list[ConsumerGroupRecord]] = {}
        for record in records:
            if isinstance(record, UnknownRecord):
                continue
            if not isinstance(record, OffsetCommitRecord | GroupMetadataRecord):
                consumer_records.setdefault(record.group_id, []).append(record)
                continue
            if isinstance(record, OffsetCommitRecord):
                group_offsets = offsets.setdefault(record.group_id, {})
                if record.value is None:
                    group_offsets.pop((record.topic, record.partition), None)
                else:
                    group_offsets[(record.topic, record.partition)] = record.value
            elif record.value is None:
                metadata.pop(record.group_id, None)
            else:
                metadata[record.group_id] = record.value
        for group_id in list(metadata) + [g for g in offsets if g not in metadata]:
            value = metadata.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if value is None and not group_offsets:
                continue
            group = _Group(group_id, GroupState.EMPTY, now_ms, offsets=dict(group_offsets))
            if value is not None:
                coordinator._restore_metadata(group, value, now_ms)
            coordinator._groups[group_id] = group
        for group_id, group_records in consumer_records.items():
            consumer = load_consumer_group(
                group_id, group_records, now_ms, coordinator.consumer_settings(group_id)
            )
            if consumer is None:
                continue
            existing = coordinator._groups.get(group_id)
            if existing is None:
                existing = _Group(group_id, GroupState.EMPTY, now_ms)
                coordinator._groups[group_id] = existing
            group = existing
            if group.members:
                continue  # a classic group written after the consumer one (not expected)
            group.consumer = consumer
            group.protocol_type = CONSUMER_PROTOCOL_TYPE
        return coordinator

    def _restore_metadata(self, group: _Group, value: GroupMetadataValue, now_ms: int) -> None:
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp_ms = (
            value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0 else now_ms
        )
        for stored in value.members:
            member = _Member(
                member_id=stored.member_id,
                group_instance_id=stored.group_instance_id,
                client_id=stored.client_id,
                client_host=stored.client_host,
                rebalance_timeout_ms=stored.rebalance_timeout_ms,
                session_timeout_ms=stored.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=(Protocol(value.protocol or "", stored.subscription),),
                assignment=stored.assignment,
                last_heartbeat_ms=now_ms,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            group.state = GroupState.STABLE

    # --- JoinGroup -----------------------------------------------------------------------

    def join_group(
        self,
        request_id: RequestId,
        request: JoinGroupRequest,
        now_ms: int,
        image: TopicsImage | None = None,
    ) -> Effects:
        """`image`: the cluster's topics now, for a classic member joining a consumer group
        (None: the image of the last ConsumerGroupHeartbeat)."""
        effects = _EffectsBuilder()
        if image is not None:
            self._image = image
        error = self._validate_join(request)
        if error is not None:
            effects.reply(request_id, JoinGroupResult(error, member_id=request.member_id))
            return effects.build()
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                effects.reply(
                    request_id,
                    JoinGroupResult(ErrorCode.unknown_member_id, member_id=request.member_id),
                )
                return effects.build()
            if len(self._groups) >= self._config.max_groups:
                effects.reply(request_id, JoinGroupResult(ErrorCode.coordinator_not_available))
                return effects.build()
            group = _Group(request.group_id, GroupState.EMPTY, now_ms)
            self._groups[request.group_id] = group
        if group.consumer is not None:
            if group.consumer.members:
                # A classic member of a non-empty consumer group (online migration).
                records: list[ConsumerGroupRecord] = []
                result = group.consumer.classic_join(
                    request,
                    self._image,
                    self.consumer_settings(group.group_id),
                    self._new_uuid(),
                    now_ms,
                    records,
                )
                effects.records.extend(records)
                effects.reply(request_id, result)
                return effects.build()
            effects.records.extend(group.consumer.tombstones())  # offline migration
            group.consumer = None
            group.protocol_type = None
        if request.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown_member(group, request_id, request, now_ms, effects)
        else:
            self._join_known_member(group, request_id, request, now_ms, effects)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)
        if (
            group.state is GroupState.EMPTY
            and group.generation_id == 0
            and not (group.members or group.offsets or group.pending_members)
        ):
            del self._groups[group.group_id]  # a failed first join leaves nothing behind
        return effects.build()

    def _validate_join(self, request: JoinGroupRequest) -> ErrorCode | None:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        if not (
            self._config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self._config.group_max_session_timeout_ms
        ):
            return ErrorCode.invalid_session_timeout
        if not request.protocol_type or not request.protocols:
            return ErrorCode.inconsistent_group_protocol
        return None

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _join_unknown_member(
        self,
        group: _Group,
        request_id: RequestId,
        request: JoinGroupRequest,
        now_ms: int,
        effects: _EffectsBuilder,
    ) -> None:
        if not group.supports_protocols(request.protocol_type, request.protocols):
            effects.reply(request_id, JoinGroupResult(ErrorCode.inconsistent_group_protocol))
            return
        instance_id = request.group_instance_id
        replacing = instance_id is not None and instance_id in group.static_members
        group_size = len(group.members) + len(group.pending_members)
        max_size = min(self._config.group_max_size, self._config.max_members_per_group)
        if not replacing and group_size >= max_size:
            effects.reply(request_id, JoinGroupResult(ErrorCode.group_max_size_reached))
            return
        member_id = self._new_member_id(instance_id or request.client_id)
        if instance_id is not None:
            if replacing:
                self._replace_static_member(group, request_id, request, member_id, now_ms, effects)
            else:
                self._add_member_and_rebalance(
                    group, request_id, request, member_id, now_ms, effects
                )
        elif request.api_version >= _MEMBER_ID_REQUIRED_MIN_VERSION:
            # KIP-394: the member must come back with this id; until then it is "pending".
            group.pending_members[member_id] = now_ms + request.session_timeout_ms
            effects.reply(
                request_id, JoinGroupResult(ErrorCode.member_id_required, member_id=member_id)
            )
        else:
            self._add_member_and_rebalance(group, request_id, request, member_id, now_ms, effects)

    def _join_known_member(
        self,
        group: _Group,
        request_id: RequestId,
        request: JoinGroupRequest,
        now_ms: int,
        effects: _EffectsBuilder,
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            if not group.supports_protocols(request.protocol_type, request.protocols):
                effects.reply(
                    request_id,
                    JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id=member_id),
                )
                return
            del group.pending_members[member_id]
            self._add_member_and_rebalance(group, request_id, request, member_id, now_ms, effects)
            return
        if group.is_fenced(member_id, request.group_instance_id):
            # Another incarnation of this static member owns the instance id now (KIP-345).
            effects.reply(
                request_id, JoinGroupResult(ErrorCode.fenced_instance_id, member_id=member_id)
            )
            return
        member = group.members.get(member_id)
        if member is None:
            effects.reply(
                request_id, JoinGroupResult(ErrorCode.unknown_member_id, member_id=member_id)
            )
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            effects.reply(
                request_id,
                JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id=member_id),
            )
            return
        member.last_heartbeat_ms = now_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request_id, request, now_ms, effects)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # The join response was lost: send the current generation again.
                effects.reply(request_id, self._join_result(group, member, request.api_version))
            else:
                self._update_member_and_rebalance(
                    group, member, request_id, request, now_ms, effects
                )
        elif group.state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(request.protocols):
                # GRP-13: the leader rejoining or changed metadata starts a rebalance.
                self._update_member_and_rebalance(
                    group, member, request_id, request, now_ms, effects
                )
            else:
                effects.reply(request_id, self._join_result(group, member, request.api_version))
        else:
            raise AssertionError(f"member {member_id} in a group in state {group.state}")

    def _add_member_and_rebalance(
        self,
        group: _Group,
        request_id: RequestId,
        request: JoinGroupRequest,
        member_id: str,
        now_ms: int,
        effects: _EffectsBuilder,
    ) -> None:
        member = _Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            parked_join=_ParkedJoin(request_id, request.api_version),
            is_new=True,
            joined_at_ms=now_ms,
            last_heartbeat_ms=now_ms,
        )
        if not group.members:
            group.protocol_type = request.protocol_type
        group.members[member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay extend (KIP-134)
        self._maybe_prepare_rebalance(group, now_ms, effects)

    def _update_member_and_rebalance(
        self,
        group: _Group,
        member: _Member,
        request_id: RequestId,
        request: JoinGroupRequest,
        now_ms: int,
        effects: _EffectsBuilder,
    ) -> None:
        if member.parked_join is not None:
            # A retried JoinGroup replaces the parked one; answer the old one so no request
            # is left hanging.
            effects.reply(
                member.parked_join.request_id,
                JoinGroupResult(ErrorCode.rebalance_in_progress, member_id=member.member_id),
            )
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.parked_join = _ParkedJoin(request_id, request.api_version)
        member.joined_at_ms = now_ms
        self._maybe_prepare_rebalance(group, now_ms, effects)

    def _replace_static_member(
        self,
        group: _Group,
        request_id: RequestId,
        request: JoinGroupRequest,
        new_member_id: str,
        now_ms: int,
        effects: _EffectsBuilder,
    ) -> None:
        """KIP-345: a static member restarted; its new id takes over the old member."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_member_id = group.static_members[instance_id]
        old = group.members.pop(old_member_id)
        if old.parked_join is not None:
            effects.reply(
                old.parked_join.request_id,
                JoinGroupResult(ErrorCode.fenced_instance_id, member_id=old_member_id),
            )
        if old.parked_sync is not None:
            effects.reply(old.parked_sync, SyncGroupResult(ErrorCode.fenced_instance_id))
        previous_leader = group.leader_id
        old.member_id = new_member_id
        old.parked_join = None
        old.parked_sync = None
        old.last_heartbeat_ms = now_ms
        group.members[new_member_id] = old
        group.static_members[instance_id] = new_member_id
        if group.leader_id == old_member_id:
            group.leader_id = new_member_id
        if old_member_id in group.pending_sync:
            group.pending_sync.discard(old_member_id)
            group.pending_sync.add(new_member_id)
        member = old
        if group.state is GroupState.STABLE:
            member.protocols = request.protocols
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            member.session_timeout_ms = request.session_timeout_ms
            if group.select_protocol() == group.protocol_name:
                # No rebalance: persist the new id and hand back the current generation.
                effects.records.append(group.metadata_record())
                is_leader = group.leader_id == new_member_id
                skip = is_leader and request.api_version >= _SKIP_ASSIGNMENT_MIN_VERSION
                effects.reply(
                    request_id,
                    JoinGroupResult(
                        ErrorCode.none,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        # Older clients must not think they lead (they would compute an
                        # assignment a Stable group never distributes): the old id.
                        leader=(new_member_id if skip else previous_leader) or "",
                        members=self._member_list(group) if skip else (),
                        skip_assignment=skip,
                    ),
                )
                return
        self._update_member_and_rebalance(group, member, request_id, request, now_ms, effects)

    def _maybe_prepare_rebalance(
        self, group: _Group, now_ms: int, effects: _EffectsBuilder
    ) -> None:
        if group.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            self._prepare_rebalance(group, now_ms, effects)

    def _prepare_rebalance(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                if member.parked_sync is not None:
                    effects.reply(
                        member.parked_sync, SyncGroupResult(ErrorCode.rebalance_in_progress)
                    )
                    member.parked_sync = None
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        initial_delay_ms = self._config.group_initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and initial_delay_ms > 0:
            group.join_deadline_ms = now_ms + initial_delay_ms
            group.initial_delay_remaining_ms = max(
                group.rebalance_timeout_ms() - initial_delay_ms, 0
            )
            group.new_member_added = False
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)

    def _maybe_complete_join(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        """Kafka's DelayedJoin/InitialDelayedJoin: complete now if the time has come."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        deadline_ms = group.join_deadline_ms
        assert deadline_ms is not None
        if group.initial_delay_remaining_ms is not None:
            if now_ms < deadline_ms:
                return  # the initial delay always runs its course
            remaining_ms = group.initial_delay_remaining_ms
            if group.new_member_added and remaining_ms > 0:
                delay_ms = min(self._config.group_initial_rebalance_delay_ms, remaining_ms)
                group.join_deadline_ms = now_ms + delay_ms
                group.initial_delay_remaining_ms = max(remaining_ms - delay_ms, 0)
                group.new_member_added = False
                return
        elif now_ms < deadline_ms and not group.all_members_joined():
            return
        self._complete_join(group, now_ms, effects)

    def _complete_join(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        for member in list(group.members.values()):
            if member.parked_join is None and member.group_instance_id is None:
                self._remove_member(group, member)
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now_ms)
            effects.records.append(group.metadata_record())
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            if member.parked_join is None:
                continue  # a static member that did not rejoin keeps its session
            parked = member.parked_join
            member.parked_join = None
            member.is_new = False
            member.last_heartbeat_ms = now_ms
            effects.reply(parked.request_id, self._join_result(group, member, parked.api_version))
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _member_list(self, group: _Group) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(
                member.member_id,
                member.group_instance_id,
                member.metadata_for(group.protocol_name),
            )
            for member in group.members.values()
        )

    def _join_result(self, group: _Group, member: _Member, api_version: int) -> JoinGroupResult:
        is_leader = member.member_id == group.leader_id
        return JoinGroupResult(
            ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=self._member_list(group) if is_leader else (),
        )

    # --- SyncGroup -----------------------------------------------------------------------

    def sync_group(self, request_id: RequestId, request: SyncGroupRequest, now_ms: int) -> Effects:
        effects = _EffectsBuilder()
        group = self._groups.get(request.group_id)
        if group is not None and group.consumer is not None:
            settings = self.consumer_settings(group.group_id)
            effects.reply(request_id, group.consumer.classic_sync(request, settings, now_ms))
            return effects.build()
        error = self._check_member(group, request.member_id, request.group_instance_id)
        if error is None and group is not None:
            if request.generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            elif (
                request.protocol_type is not None and request.protocol_type != group.protocol_type
            ) or (
                request.protocol_name is not None and request.protocol_name != group.protocol_name
            ):
                error = ErrorCode.inconsistent_group_protocol
            elif group.state is GroupState.PREPARING_REBALANCE:
                error = ErrorCode.rebalance_in_progress
        if error is not None or group is None:
            effects.reply(request_id, SyncGroupResult(error or ErrorCode.unknown_member_id))
            return effects.build()
        member = group.members[request.member_id]
        member.last_heartbeat_ms = now_ms
        group.pending_sync.discard(member.member_id)
        if group.state is GroupState.STABLE:
            effects.reply(request_id, self._sync_result(group, member))
            return effects.build()
        assert group.state is GroupState.COMPLETING_REBALANCE
        if member.parked_sync is not None:
            effects.reply(member.parked_sync, SyncGroupResult(ErrorCode.rebalance_in_progress))
        member.parked_sync = request_id
        if member.member_id == group.leader_id:
            assignments = dict(request.assignments)
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            effects.records.append(group.metadata_record())
            group.transition_to(GroupState.STABLE, now_ms)
            for each in group.members.values():
                if each.parked_sync is not None:
                    effects.reply(each.parked_sync, self._sync_result(group, each))
                    each.parked_sync = None
                    each.last_heartbeat_ms = now_ms
        return effects.build()

    def _sync_result(self, group: _Group, member: _Member) -> SyncGroupResult:
        return SyncGroupResult(
            ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
        )

    def _check_member(
        self, group: _Group | None, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group is None or member_id not in group.members:
            if (
                group is not None
                and group_instance_id is not None
                and group.is_fenced(member_id, group_instance_id)
            ):
                return ErrorCode.fenced_instance_id
            return ErrorCode.unknown_member_id
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        return None

    # --- Heartbeat -----------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        group = self._groups.get(request.group_id)
        if group is not None and group.consumer is not None:
            return group.consumer.classic_heartbeat(
                request.member_id, request.group_instance_id, request.generation_id, now_ms
            )
        error = self._check_member(group, request.member_id, request.group_instance_id)
        if error is not None or group is None:
            return error or ErrorCode.unknown_member_id
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        group.members[request.member_id].last_heartbeat_ms = now_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --- LeaveGroup ----------------------------------------------------------------------

    def leave_group(
        self, group_id: str, leaving: tuple[LeavingMember, ...], now_ms: int
    ) -> tuple[LeaveGroupResult, Effects]:
        effects = _EffectsBuilder()
        group = self._groups.get(group_id)
        if group is None:
            members = tuple(
                LeftMember(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                for m in leaving
            )
            return LeaveGroupResult(ErrorCode.none, members), effects.build()
        if group.consumer is not None:
            records: list[ConsumerGroupRecord] = []
            left = tuple(
                LeftMember(
                    m.member_id,
                    m.group_instance_id,
                    group.consumer.classic_leave(m.member_id, m.group_instance_id, now_ms, records),
                )
                for m in leaving
            )
            effects.records.extend(records)
            return LeaveGroupResult(ErrorCode.none, left), effects.build()
        results = []
        for each in leaving:
            error = self._leave_one(group, each, now_ms, effects)
            results.append(LeftMember(each.member_id, each.group_instance_id, error))
        return LeaveGroupResult(ErrorCode.none, tuple(results)), effects.build()

    def _leave_one(
        self, group: _Group, leaving: LeavingMember, now_ms: int, effects: _EffectsBuilder
    ) -> ErrorCode:
        member_id = leaving.member_id
        if leaving.group_instance_id is not None:
            known = group.static_members.get(leaving.group_instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                return ErrorCode.fenced_instance_id
            member_id = known
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._maybe_complete_join(group, now_ms, effects)
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_member_and_update_group(group, member, now_ms, effects)
        return ErrorCode.none

    def _remove_member(self, group: _Group, member: _Member) -> None:
        del group.members[member.member_id]
        instance_id = member.group_instance_id
        if instance_id is not None and group.static_members.get(instance_id) == member.member_id:
            del group.static_members[instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader_id == member.member_id:
            joined = [m for m in group.members.values() if m.parked_join is not None]
            candidates = joined or list(group.members.values())
            group.leader_id = candidates[0].member_id if candidates else None

    def _remove_member_and_update_group(
        self, group: _Group, member: _Member, now_ms: int, effects: _EffectsBuilder
    ) -> None:
        if member.parked_join is not None:
            effects.reply(
                member.parked_join.request_id,
                JoinGroupResult(ErrorCode.unknown_member_id, member_id=member.member_id),
            )
        if member.parked_sync is not None:
            effects.reply(member.parked_sync, SyncGroupResult(ErrorCode.unknown_member_id))
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, effects)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)

    # --- ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848) -------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerHeartbeatRequest, image: TopicsImage, now_ms: int
    ) -> tuple[ConsumerHeartbeatResult, Effects]:
        """One ConsumerGroupHeartbeat; `image`: the cluster's topics now (name -> metadata)."""
        effects = _EffectsBuilder()
        settings = self.consumer_settings(request.group_id)
        invalid = validate_heartbeat(request, settings)
        if invalid is not None:
            return invalid, effects.build()
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_epoch != 0:
                return _not_found(request.group_id, "does not exist"), effects.build()
            if len(self._groups) >= self._config.max_groups:
                error = ConsumerHeartbeatResult(
                    ErrorCode.coordinator_not_available, member_epoch=-1
                )
                return error, effects.build()
            group = _Group(request.group_id, GroupState.EMPTY, now_ms)
            self._groups[request.group_id] = group
        if (
            group.consumer is None
            and (group.members or group.pending_members or group.state is not GroupState.EMPTY)
            and (request.member_epoch != 0 or not self._upgrade(group, image, now_ms, effects))
        ):
            return _not_found(request.group_id, "is not a consumer group"), effects.build()
        if group.consumer is None:
            if request.member_epoch != 0:
                return _not_found(request.group_id, "does not exist"), effects.build()
            if group.protocol_type is not None:
                # Offline migration of an Empty classic group: its metadata goes, offsets stay.
                effects.records.append(GroupMetadataRecord(group.group_id, None))
            group.consumer = ConsumerGroup(group.group_id, state_timestamp_ms=now_ms)
            group.protocol_type = CONSUMER_PROTOCOL_TYPE
            group.protocol_name = None
            group.generation_id = 0
            group.leader_id = None
        self._image = image
        records: list[ConsumerGroupRecord] = []
        leaving = group.consumer.members.get(request.member_id)
        epoch_before = group.consumer.epoch
        result = group.consumer.heartbeat(
            request, image, settings, self._new_uuid(), now_ms, records
        )
        effects.records.extend(records)
        if (
            leaving is not None
            and leaving.classic is None
            and request.member_id not in group.consumer.members
        ) and self._maybe_downgrade(group, epoch_before, now_ms, effects):
            return result, effects.build()
        if not group.consumer.members and group.consumer.epoch == 0:
            # a join that failed validation deeper in leaves nothing behind
            group.consumer = None
            group.protocol_type = None
            if not group.offsets:
                del self._groups[group.group_id]
        return result, effects.build()

    def _new_uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    # --- online migration between the protocols (KIP-848) ---------------------------------

    def _upgrade(
        self, group: _Group, image: TopicsImage, now_ms: int, effects: _EffectsBuilder
    ) -> bool:
        """A ConsumerGroupHeartbeat joins a non-empty classic group: convert it into a
        consumer group whose classic members keep their partitions (Kafka's
        `validateOnlineUpgrade` + `convertToConsumerGroup`). False (the caller answers
        GROUP_ID_NOT_FOUND) when `group.consumer.migration.policy` forbids it, the group does
        not use the consumer protocol, a subscription does not parse, or it is too large."""
        if self._config.consumer_migration_policy not in ("bidirectional", "upgrade"):
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        settings = self.consumer_settings(group.group_id)
        if len(group.members) > settings.max_size:
            return False
        consumer = consumer_group_from_classic(
            group.group_id,
            group.generation_id,
            [
                ClassicMemberState(
                    member_id=m.member_id,
                    instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocols=tuple((p.name, p.metadata) for p in m.protocols),
                    selected_protocol=group.protocol_name or "",
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ],
            image,
            now_ms,
        )
        if consumer is None:
            return False
        for member in group.members.values():
            if member.parked_join is not None:
                effects.reply(
                    member.parked_join.request_id,
                    JoinGroupResult(ErrorCode.rebalance_in_progress, member_id=member.member_id),
                )
            if member.parked_sync is not None:
                effects.reply(member.parked_sync, SyncGroupResult(ErrorCode.rebalance_in_progress))
        effects.records.append(GroupMetadataRecord(group.group_id, None))
        effects.records.extend(consumer.creation_records())
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync.clear()
        group.join_deadline_ms = group.sync_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.state = GroupState.EMPTY  # a consumer group's classic state is unused
        group.generation_id = 0
        group.leader_id = None
        group.protocol_name = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.consumer = consumer
        return True

    def _maybe_downgrade(
        self, group: _Group, generation_id: int, now_ms: int, effects: _EffectsBuilder
    ) -> bool:
        """The last consumer-protocol member left (or was fenced) and classic members remain:
        convert back to a classic group that rebalances at once (Kafka's
        `validateOnlineDowngradeWithFencedMember` + `convertToClassicGroup`), if
        `group.consumer.migration.policy` allows it and the group fits `group.max.size`.
        `generation_id`: the group epoch before the member left (Kafka converts before
        removing it), so the classic members' generation is still current."""
        consumer = group.consumer
        if consumer is None or not consumer.members or not consumer.all_classic_except(""):
            return False
        if self._config.consumer_migration_policy not in ("bidirectional", "downgrade"):
            return False
        if len(consumer.members) > self._config.group_max_size:
            return False
        names = consumer.topic_names_by_id()
        effects.records.extend(consumer.tombstones())
        group.consumer = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.generation_id = generation_id
        for cm in consumer.members.values():
            assert cm.classic is not None
            by_topic: dict[str, list[int]] = {}
            for topic_id, partitions in group_by_topic(cm.assigned):
                if topic_id in names:
                    by_topic[names[topic_id]] = list(partitions)
            member = _Member(
                member_id=cm.member_id,
                group_instance_id=cm.instance_id,
                client_id=cm.client_id,
                client_host=cm.client_host,
                rebalance_timeout_ms=cm.rebalance_timeout_ms,
                session_timeout_ms=cm.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=tuple(Protocol(name, data) for name, data in cm.classic.protocols),
                assignment=encode_assignment(by_topic),
                last_heartbeat_ms=now_ms,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.protocol_name = group.select_protocol()
        group.leader_id = next(iter(group.members))
        group.state = GroupState.STABLE  # converted, not a transition of the classic machine
        group.state_timestamp_ms = now_ms
        effects.records.append(group.metadata_record())
        self._prepare_rebalance(group, now_ms, effects)
        return True

    def consumer_group_describe(
        self, group_id: str, image: TopicsImage
    ) -> ConsumerGroupDescription:
        group = self._groups.get(group_id)
        if group is None or group.consumer is None:
            reason = "does not exist" if group is None else "is not a consumer group"
            return ConsumerGroupDescription(
                group_id, ErrorCode.group_id_not_found, f"Group {group_id} {reason}."
            )
        return describe(group.consumer, image, self.consumer_settings(group_id))

    # --- OffsetCommit / OffsetFetch / OffsetDelete ---------------------------------------

    def offset_commit(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> tuple[tuple[PartitionError, ...], Effects]:
        effects = _EffectsBuilder()
        error = self._check_commit(request, now_ms)
        if error is not None:
            errors = tuple(PartitionError(p.topic, p.partition, error) for p in request.partitions)
            return errors, effects.build()
        group = self._groups[request.group_id]
        member = group.members.get(request.member_id)
        if member is not None:
            member.last_heartbeat_ms = now_ms
        results = []
        for partition in request.partitions:
            metadata = partition.metadata or ""
            if len(metadata.encode("utf-8")) > self._config.offset_metadata_max_bytes:
                results.append(
                    PartitionError(
                        partition.topic, partition.partition, ErrorCode.offset_metadata_too_large
                    )
                )
                continue
            # An explicit retention (v2-v4, which carry no leader epoch) is stored as value v1.
            value = OffsetCommitValue(
                offset=partition.offset,
                leader_epoch=partition.leader_epoch if request.retention_time_ms < 0 else -1,
                metadata=metadata,
                commit_timestamp_ms=now_ms,
                expire_timestamp_ms=(
                    now_ms + request.retention_time_ms if request.retention_time_ms >= 0 else -1
                ),
            )
            group.offsets[(partition.topic, partition.partition)] = value
            effects.records.append(
                OffsetCommitRecord(group.group_id, partition.topic, partition.partition, value)
            )
            results.append(PartitionError(partition.topic, partition.partition, ErrorCode.none))
        return tuple(results), effects.build()

    def _check_commit(self, request: OffsetCommitRequest, now_ms: int) -> ErrorCode | None:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                return ErrorCode.illegal_generation
            if len(self._groups) >= self._config.max_groups:
                return ErrorCode.coordinator_not_available
            self._groups[request.group_id] = _Group(request.group_id, GroupState.EMPTY, now_ms)
            return None
        if group.consumer is not None:
            # KIP-848: generation_id_or_member_epoch is the member epoch (OffsetCommit v9+).
            return group.consumer.check_offset_commit(
                request.member_id, request.generation_id, request.api_version
            )
        if group.is_fenced(request.member_id, request.group_instance_id):
            return ErrorCode.fenced_instance_id
        if request.generation_id < 0 and group.state is GroupState.EMPTY:
            return None  # a "simple" consumer: Kafka is only its offset store
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        if request.member_id not in group.members:
            return ErrorCode.unknown_member_id
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    # --- transactional offsets (TxnOffsetCommit, KIP-98 / KIP-447) ------------------------

    def txn_offset_commit(
        self, request: OffsetCommitRequest, producer_id: int, now_ms: int
    ) -> tuple[tuple[PartitionError, ...], Effects]:
        """Offsets committed inside `producer_id`'s transaction: pending (invisible to
        OffsetFetch) until `complete_txn_offsets`. The records go to the log in the
        producer's transactional batch (the shell builds it), so a reload finds them pending
        until the marker. Kafka's checks: a negative generation needs no member (a plain
        producer); otherwise the member must be known and the generation current (KIP-447);
        a rebalance in progress does not refuse the commit."""
        effects = _EffectsBuilder()
        error = self._check_txn_commit(request, now_ms)
        if error is not None:
            errors = tuple(PartitionError(p.topic, p.partition, error) for p in request.partitions)
            return errors, effects.build()
        group = self._groups[request.group_id]
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        results = []
        for partition in request.partitions:
            metadata = partition.metadata or ""
            if len(metadata.encode("utf-8")) > self._config.offset_metadata_max_bytes:
                error = ErrorCode.offset_metadata_too_large
                results.append(PartitionError(partition.topic, partition.partition, error))
                continue
            value = OffsetCommitValue(partition.offset, partition.leader_epoch, metadata, now_ms)
            pending[(partition.topic, partition.partition)] = value
            effects.records.append(
                OffsetCommitRecord(group.group_id, partition.topic, partition.partition, value)
            )
            results.append(PartitionError(partition.topic, partition.partition, ErrorCode.none))
        return tuple(results), effects.build()

    def _check_txn_commit(self, request: OffsetCommitRequest, now_ms: int) -> ErrorCode | None:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0 or request.member_id != UNKNOWN_MEMBER_ID:
                return ErrorCode.illegal_generation
            if len(self._groups) >= self._config.max_groups:
                return ErrorCode.coordinator_not_available
            self._groups[request.group_id] = _Group(request.group_id, GroupState.EMPTY, now_ms)
            return None
        if group.consumer is not None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                member = group.consumer.members.get(request.member_id)
                if member is None:
                    return ErrorCode.unknown_member_id
                if request.generation_id >= 0 and request.generation_id != member.member_epoch:
                    return ErrorCode.illegal_generation
            return None
        if group.is_fenced(request.member_id, request.group_instance_id):
            return ErrorCode.fenced_instance_id
        if request.member_id != UNKNOWN_MEMBER_ID and request.member_id not in group.members:
            return ErrorCode.unknown_member_id
        if request.generation_id >= 0 and request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    def restore_txn_offsets(
        self, producer_id: int, records: Iterable[OffsetCommitRecord], now_ms: int
    ) -> None:
        """Loading: offsets of a transaction whose marker is not in the log yet."""
        for record in records:
            if record.value is None:
                continue
            group = self._groups.get(record.group_id)
            if group is None:
                group = self._groups[record.group_id] = _Group(
                    record.group_id, GroupState.EMPTY, now_ms
                )
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            pending[(record.topic, record.partition)] = record.value

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> None:
        """The COMMIT (offsets become visible) or ABORT (dropped) marker of `producer_id`
        was written to this partition."""
        for group in self._groups.values():
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if committed and pending:
                group.offsets.update(pending)

    def offset_fetch(
        self,
        group_id: str,
        partitions: tuple[TopicPartition, ...] | None,
        *,
        require_stable: bool = False,
        member: tuple[str, int] | None = None,
    ) -> OffsetFetchResult:
        """`partitions=None` asks for every committed offset of the group (v2+).
        `require_stable` (KIP-447): a partition with transactional offsets still pending
        answers UNSTABLE_OFFSET_COMMIT (the consumer retries once the transaction ends).
        `member` (v9+): (member id, member epoch) of a KIP-848 member, checked like a commit
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        group = self._groups.get(group_id)
        if member is not None and group is not None and group.consumer is not None:
            error = group.consumer.check_offset_fetch(member[0], member[1])
            if error is not None:
                return OffsetFetchResult(error)
        offsets = group.offsets if group is not None else {}
        unstable: set[tuple[str, int]] = set()
        if require_stable and group is not None:
            for pending in group.pending_txn_offsets.values():
                unstable.update(pending)
        if partitions is None:
            keys = sorted(offsets)
        else:
            keys = [(p.topic, p.partition) for p in partitions]
        fetched = []
        for topic, partition in keys:
            value = offsets.get((topic, partition))
            if (topic, partition) in unstable:
                fetched.append(
                    FetchedOffset(
                        topic,
                        partition,
                        NO_OFFSET,
                        NO_LEADER_EPOCH,
                        "",
                        ErrorCode.unstable_offset_commit,
                    )
                )
            elif value is None:
                fetched.append(
                    FetchedOffset(topic, partition, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.none)
                )
            else:
                fetched.append(
                    FetchedOffset(
                        topic,
                        partition,
                        value.offset,
                        value.leader_epoch,
                        value.metadata,
                        ErrorCode.none,
                    )
                )
        return OffsetFetchResult(ErrorCode.none, tuple(fetched))

    def offset_delete(
        self, group_id: str, partitions: tuple[TopicPartition, ...], now_ms: int
    ) -> tuple[OffsetDeleteResult, Effects]:
        """KIP-496: delete committed offsets of topics the group does not consume."""
        effects = _EffectsBuilder()
        group = self._groups.get(group_id)
        if group is None:
            return OffsetDeleteResult(ErrorCode.group_id_not_found), effects.build()
        subscribed: frozenset[str] = frozenset()
        if group.consumer is not None:
            subscribed = group.consumer.subscribed_topic_names()
        elif group.state is not GroupState.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return OffsetDeleteResult(ErrorCode.non_empty_group), effects.build()
            subscribed = topics
        results = []
        for partition in partitions:
            if partition.topic in subscribed:
                error = ErrorCode.group_subscribed_to_topic
            else:
                error = ErrorCode.none
                if group.offsets.pop((partition.topic, partition.partition), None) is not None:
                    effects.records.append(
                        OffsetCommitRecord(group_id, partition.topic, partition.partition, None)
                    )
            results.append(PartitionError(partition.topic, partition.partition, error))
        self._drop_if_dead(group, now_ms, effects)
        return OffsetDeleteResult(ErrorCode.none, tuple(results)), effects.build()

    def _drop_if_dead(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        """An Empty group without offsets is Dead: tombstone and forget it (Kafka's
        `cleanupGroupMetadata`, after offset expiry and OffsetDelete)."""
        if group.state is GroupState.EMPTY and not group.offsets and not group.pending_members:
            if group.consumer is not None:
                if group.consumer.members:
                    return
                effects.records.extend(group.consumer.tombstones())
            group.transition_to(GroupState.DEAD, now_ms)
            effects.records.append(GroupMetadataRecord(group.group_id, None))
            del self._groups[group.group_id]

    # --- DescribeGroups / ListGroups / DeleteGroups --------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.none, GroupState.DEAD.kafka_name, "", "")
        if group.consumer is not None:
            return self._describe_consumer_group_classically(group.consumer)
        stable = group.state is GroupState.STABLE
        members = tuple(
            MemberDescription(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                metadata=member.metadata_for(group.protocol_name) if stable else b"",
                assignment=member.assignment if stable else b"",
            )
            for member in group.members.values()
        )
        return GroupDescription(
            group_id=group_id,
            error=ErrorCode.none,
            state=group.state.kafka_name,
            protocol_type=group.protocol_type or "",
            protocol=(group.protocol_name or "") if stable else "",
            members=members,
        )

    def _describe_consumer_group_classically(self, consumer: ConsumerGroup) -> GroupDescription:
        """DescribeGroups v0-5 on a KIP-848 group: the classic shape, with each member's
        subscription and current assignment encoded in the `consumer` protocol's layouts so
        classic tools can read them (Kafka 4 answers DescribeGroups v6 with
        GROUP_ID_NOT_FOUND; we do not advertise v6)."""
        names = consumer.topic_names_by_id()
        members = []
        for member in consumer.members.values():
            by_topic: dict[str, list[int]] = {}
            for topic_id, partition in sorted(member.assigned):
                by_topic.setdefault(names.get(topic_id, str(topic_id)), []).append(partition)
            members.append(
                MemberDescription(
                    member_id=member.member_id,
                    group_instance_id=member.instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    metadata=encode_subscription(
                        sorted(consumer.member_topic_names(member, consumer.subscribed_metadata))
                    ),
                    assignment=encode_assignment(by_topic),
                )
            )
        return GroupDescription(
            group_id=consumer.group_id,
            error=ErrorCode.none,
            state=consumer.state().value,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol=consumer.preferred_assignor(self._consumer_settings),
            members=tuple(members),
        )

    def list_groups(
        self,
        states: frozenset[GroupState] | None = None,
        *,
        state_names: frozenset[str] | None = None,
        types: frozenset[str] | None = None,
    ) -> tuple[GroupListing, ...]:
        """`states`: classic states (ListGroups v4 filter, compared by name so consumer
        group states such as Stable and Empty match too); `state_names`: lower-case state
        names; `types`: lower-case group types ("classic", "consumer"; ListGroups v5)."""
        wanted = set(state_names or ())
        if states is not None:
            wanted |= {state.kafka_name.lower() for state in states}
        listings = []
        for group in self._groups.values():
            if group.consumer is not None:
                listing = GroupListing(
                    group.group_id,
                    CONSUMER_PROTOCOL_TYPE,
                    group.consumer.state().value,
                    "consumer",
                )
            else:
                listing = GroupListing(
                    group.group_id, group.protocol_type or "", group.state.kafka_name, "classic"
                )
            if (states is not None or state_names is not None) and (
                listing.state.lower() not in wanted
            ):
                continue
            if types is not None and listing.group_type not in types:
                continue
            listings.append(listing)
        return tuple(listings)

    def delete_groups(
        self, group_ids: tuple[str, ...], now_ms: int
    ) -> tuple[tuple[GroupDeletion, ...], Effects]:
        effects = _EffectsBuilder()
        results = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None:
                error = ErrorCode.group_id_not_found
            elif group.state is not GroupState.EMPTY or (
                group.consumer is not None and group.consumer.members
            ):
                error = ErrorCode.non_empty_group
            else:
                error = ErrorCode.none
                self._delete_group(group, now_ms, effects)
            results.append(GroupDeletion(group_id, error))
        return tuple(results), effects.build()

    def _delete_group(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        for topic, partition in sorted(group.offsets):
            effects.records.append(OffsetCommitRecord(group.group_id, topic, partition, None))
        group.offsets.clear()
        if group.consumer is not None:
            effects.records.extend(group.consumer.tombstones())
        group.transition_to(GroupState.DEAD, now_ms)
        effects.records.append(GroupMetadataRecord(group.group_id, None))
        del self._groups[group.group_id]

    # --- time ----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int:
        """The earliest time `tick` has work to do (at latest the next retention check)."""
        deadline_ms = self._next_retention_check_ms
        for group in self._groups.values():
            for expiry_ms in group.pending_members.values():
                deadline_ms = min(deadline_ms, expiry_ms)
            for member in group.members.values():
                member_expiry_ms = member.expiry_ms(self._config)
                if member_expiry_ms is not None:
                    deadline_ms = min(deadline_ms, member_expiry_ms)
            if group.join_deadline_ms is not None:
                deadline_ms = min(deadline_ms, group.join_deadline_ms)
            if group.sync_deadline_ms is not None and group.pending_sync:
                deadline_ms = min(deadline_ms, group.sync_deadline_ms)
            if group.consumer is not None:
                consumer_deadline_ms = group.consumer.next_deadline_ms()
                if consumer_deadline_ms is not None:
                    deadline_ms = min(deadline_ms, consumer_deadline_ms)
        return deadline_ms

    def tick(self, now_ms: int) -> Effects:
        """Run every timer due at `now_ms`: expiries, rebalance timeouts, retention."""
        effects = _EffectsBuilder()
        for group in list(self._groups.values()):
            self._tick_group(group, now_ms, effects)
        if now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = (
                now_ms + self._config.offsets_retention_check_interval_ms
            )
            self._expire_offsets(now_ms, effects)
        return effects.build()

    def _tick_group(self, group: _Group, now_ms: int, effects: _EffectsBuilder) -> None:
        if group.consumer is not None:
            records: list[ConsumerGroupRecord] = []
            protocols = {m.member_id: m.classic for m in group.consumer.members.values()}
            epoch_before = group.consumer.epoch
            fenced = group.consumer.tick(now_ms, records)
            effects.records.extend(records)
            if any(protocols[m] is None for m in fenced):
                self._maybe_downgrade(group, epoch_before, now_ms, effects)
            return
        for member_id, pending_expiry_ms in list(group.pending_members.items()):
            if now_ms >= pending_expiry_ms:
                del group.pending_members[member_id]
        for member in list(group.members.values()):
            expiry_ms = member.expiry_ms(self._config)
            if expiry_ms is not None and now_ms >= expiry_ms and member.member_id in group.members:
                self._remove_member_and_update_group(group, member, now_ms, effects)
        if (
            group.sync_deadline_ms is not None
            and now_ms >= group.sync_deadline_ms
            and group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        ):
            unsynced = [group.members[m] for m in group.pending_sync if m in group.members]
            group.pending_sync.clear()
            group.sync_deadline_ms = None
            for member in unsynced:
                if member.member_id in group.members:
                    self._remove_member_and_update_group(group, member, now_ms, effects)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)

    def expire_offsets(self, now_ms: int) -> Effects:
        """`offsets.retention.minutes` (KIP-211): tombstone expired offsets, drop dead groups."""
        builder = _EffectsBuilder()
        self._expire_offsets(now_ms, builder)
        return builder.build()

    def _expire_offsets(self, now_ms: int, builder: _EffectsBuilder) -> None:
        retention_ms = self._config.offsets_retention_ms
        for group in list(self._groups.values()):
            subscribed: frozenset[str] = frozenset()
            if group.consumer is not None:
                if group.consumer.members:
                    subscribed, use_state_time = group.consumer.subscribed_topic_names(), False
                else:
                    group.state_timestamp_ms = group.consumer.state_timestamp_ms
                    use_state_time = True
            elif group.state is GroupState.EMPTY:
                use_state_time = group.protocol_type is not None
            elif group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                topics = group.subscribed_topics()
                if topics is None:
                    continue
                subscribed, use_state_time = topics, False
            else:
                continue
            for (topic, partition), value in sorted(group.offsets.items()):
                if topic in subscribed:
                    continue
                if value.expire_timestamp_ms >= 0:
                    expired = now_ms >= value.expire_timestamp_ms
                else:
                    base_ms = (
                        group.state_timestamp_ms if use_state_time else value.commit_timestamp_ms
                    )
                    expired = now_ms - base_ms >= retention_ms
                if expired:
                    del group.offsets[(topic, partition)]
                    builder.records.append(
                        OffsetCommitRecord(group.group_id, topic, partition, None)
                    )
            self._drop_if_dead(group, now_ms, builder)

    # --- introspection (tests, ktool through DescribeGroups) -----------------------------

    def group_state(self, group_id: str) -> GroupState | None:
        group = self._groups.get(group_id)
        return group.state if group is not None else None

    def group_ids(self) -> tuple[str, ...]:
        return tuple(self._groups)

    def generation_id(self, group_id: str) -> int | None:
        group = self._groups.get(group_id)
        return group.generation_id if group is not None else None

    def leader_id(self, group_id: str) -> str | None:
        group = self._groups.get(group_id)
        return group.leader_id if group is not None else None

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue]:
        group = self._groups.get(group_id)
        return dict(group.offsets) if group is not None else {}

    def stored_metadata(self, group_id: str) -> GroupMetadataValue | None:
        """What a GroupMetadata record for the group would hold now (None: no such group)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        value = group.metadata_record().value
        assert value is not None
        return value
