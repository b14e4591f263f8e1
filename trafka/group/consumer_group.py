"""KIP-848 consumer groups (ConsumerGroupHeartbeat) as pure logic.

One `ConsumerGroup` per group id of this `__consumer_offsets` partition whose members speak
the new protocol. Everything here takes `now_ms` and a topics image and appends the
records to write to a list; `GroupCoordinator` glues it to offsets and the classic groups.

Epochs (KIP-848):

* The **group epoch** moves when the group changes: a member joins, leaves or is fenced, a
  member's subscription or server assignor changes, or the metadata of the subscribed topics
  changes (a topic created or deleted that a name or regex subscribes to, new partitions).
  Kafka's `ConsumerGroupMetadata` record holds it.
* The **assignment epoch** is the group epoch the *target assignment* was computed for. When
  the group epoch is ahead, the next heartbeat computes a new target with the group's
  assignor (the members' most requested `server_assignor`, else the first of
  `group.consumer.assignors`) and records the members whose target changed.
* Each **member epoch** is the assignment epoch the member has converged to.

Reconciliation (Kafka's `CurrentAssignmentBuilder`) moves a member from its current
assignment toward its target, one heartbeat at a time, so that a partition is never owned by
two members at once:

* A member whose epoch is behind the target: partitions it holds that are not in its target
  must be revoked first. While it still owns any (as its heartbeat's owned partitions say) it
  stays in `UNREVOKED_PARTITIONS` at its old epoch, assigned only what it keeps.
* Once revoked (or if nothing is to be revoked) the member moves to the target epoch; target
  partitions still held by another member (assigned or pending revocation) are withheld
  (`UNRELEASED_PARTITIONS`) and handed over on a later heartbeat, after their owner
  released them. Otherwise the member is `STABLE`.
* A member that does not revoke within its rebalance timeout is fenced (removed); one that
  does not heartbeat within `group.consumer.session.timeout.ms` too.

Request rules (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`):

* member epoch 0 joins (or rejoins after being fenced); it must carry the rebalance timeout,
  a subscription (names or regex) and an empty owned-partition list. v1+ members choose their
  own member id (a UUID); v0 members get one.
* A larger epoch than the member's, or a smaller one that is not the previous epoch with
  owned partitions inside the assignment (a lost response), gets FENCED_MEMBER_EPOCH; an
  unknown member id gets UNKNOWN_MEMBER_ID; the client rejoins with epoch 0.
* member epoch -1 leaves (the group epoch moves); -2 is a static member's temporary leave: it
  keeps its assignment until its session expires or it comes back with the same instance id
  (any member id, epoch 0), which takes over the assignment without a rebalance. A second
  live member with the same instance id gets UNRELEASED_INSTANCE_ID; an instance id that
  belongs to another member id gets FENCED_INSTANCE_ID.
* Regex subscriptions (KIP-848 says RE2/J `matches`) are evaluated here with Python's `re`
  `fullmatch`, against non-internal topics. Differences from RE2: Python's syntax (look-arounds
  and back-references are accepted, RE2 refuses them; RE2's `\\pN`-style classes differ), and
  no linear-time guarantee, which is why a regex is bounded to `MAX_REGEX_LENGTH` characters.

Racks: a member's `rack_id` and the partitions' replica racks (in the topics image) go to the
assignors (`assignors.py`, KIP-881's rule); a member's rack change moves the group epoch like
any metadata change of the member, and a change of a subscribed partition's racks too.

Classic members (KIP-848 online migration): `classic_join` / `classic_sync` /
`classic_heartbeat` / `classic_leave` serve the classic protocol's members of a consumer
group through the same target assignment and reconciliation (`ClassicMemberMetadata` holds
their protocols and session timeout); `consumer_group_from_classic` converts a classic group.

Not implemented: client-side assignors,
ConsumerGroupHeartbeat v0's `subscribed_topic_regex` (v1 only, as Kafka).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from kio.schema.errors import ErrorCode

from trafka.group.assignors import ASSIGNORS, Assignment, AssignorMember, TopicIdPartition
from trafka.group.consumer_protocol import (
    assigned_partitions,
    encode_assignment,
    parse_subscription,
)
from trafka.group.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerGroupRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    CurrentAssignmentValue,
    MemberMetadataValue,
    TopicMetadataEntry,
    TopicPartitions,
)
from trafka.group.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupRequest,
    JoinGroupResult,
    SyncGroupRequest,
    SyncGroupResult,
)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_REGEX_LENGTH = 1000
MAX_KEY_STRING_BYTES = 0x7FFF
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
CLASSIC_PROTOCOL_TYPE = "consumer"  # the protocol type of classic members of a consumer group

TopicsImage = Mapping[str, TopicMetadataEntry]
"""Topic name -> (id, name, partition count): the cluster's topics, as the shell sees them.
A *new* mapping whenever a topic changes: groups compare images by identity to skip
re-resolving their subscriptions on every heartbeat."""


class MemberState(enum.IntEnum):
    """Kafka's `MemberState` (the byte stored in ConsumerGroupCurrentMemberAssignment)."""

    STABLE = 0
    UNRELEASED_PARTITIONS = 1
    UNREVOKED_PARTITIONS = 2


class ConsumerGroupState(enum.Enum):
    """Kafka's `ConsumerGroup.ConsumerGroupState` (names as ListGroups/Describe show them).

    EMPTY: no members (offsets may remain). ASSIGNING: the group epoch is ahead of the
    target assignment's. RECONCILING: some member has not converged to the target.
    STABLE: every member is at the assignment epoch with its whole target.
    """

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged
    subscribed_topic_regex: str | None  # None: unchanged
    server_assignor: str | None
    owned: TopicPartitions | None  # None: unchanged
    client_id: str
    client_host: str
    api_version: int


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = frozenset()
    pending_revocation: Assignment = frozenset()
    session_deadline_ms: int = 0
    rebalance_deadline_ms: int | None = None
    classic: ClassicMemberMetadata | None = None  # a classic-protocol member (online migration)
    classic_deadline_ms: int | None = None  # a classic member's join or sync timeout

    def session_timeout_ms(self, settings: ConsumerGroupSettings) -> int:
        """A classic member keeps its JoinGroup session timeout (Kafka's)."""
        return (
            self.classic.session_timeout_ms
            if self.classic is not None
            else (settings.session_timeout_ms)
        )

    def metadata_value(self) -> MemberMetadataValue:
        return MemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic=self.classic,
        )

    def assignment_value(self) -> CurrentAssignmentValue:
        return CurrentAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned=group_by_topic(self.assigned),
            pending_revocation=group_by_topic(self.pending_revocation),
        )

    def is_converged(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch


def group_by_topic(partitions: Assignment) -> TopicPartitions:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in sorted(partitions):
        by_topic.setdefault(topic_id, []).append(partition)
    return tuple((topic_id, tuple(numbers)) for topic_id, numbers in by_topic.items())


def flatten(partitions: TopicPartitions) -> Assignment:
    return frozenset((topic_id, p) for topic_id, numbers in partitions for p in numbers)


def regex_error(regex: str) -> str | None:
    if len(regex) > MAX_REGEX_LENGTH:
        return f"the regular expression is longer than {MAX_REGEX_LENGTH} characters"
    try:
        re.compile(regex)
    except re.error as error:
        return f"invalid regular expression: {error}"
    return None


def matching_topics(regex: str, image: TopicsImage) -> frozenset[str]:
    pattern = re.compile(regex)  # validated on the way in; `re` caches compiled patterns
    return frozenset(
        name for name in image if name not in INTERNAL_TOPICS and pattern.fullmatch(name)
    )


# --- reconciliation (pure function of a member and its target) --------------------------------


@dataclass(frozen=True, slots=True)
class Reconciled:
    member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owners: Mapping[TopicIdPartition, str],
) -> Reconciled:
    """The member's next step toward `target` (Kafka's `CurrentAssignmentBuilder`).

    `owned`: the partitions the member says it owns (None: not said in this heartbeat).
    `owners`: partition -> the member holding it (assigned or pending revocation).
    """
    unchanged = Reconciled(
        member.member_epoch, member.state, member.assigned, member.pending_revocation
    )
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owned & member.pending_revocation:
            return unchanged  # still waiting for the revocation
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return unchanged
    current = member.assigned
    kept = current & target
    revoke = current - target
    if revoke and (owned is None or owned & revoke):
        return Reconciled(member.member_epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoke)
    free = frozenset(p for p in target - current if owners.get(p) in (None, member.member_id))
    unreleased = (target - current) - free
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(target_epoch, state, kept | free, frozenset())


# --- the group -------------------------------------------------------------------------------


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)
    assignment_epoch: int = 0
    subscribed_metadata: dict[str, TopicMetadataEntry] = field(default_factory=dict)
    owners: dict[TopicIdPartition, str] = field(default_factory=dict)
    state_timestamp_ms: int = 0  # when it last became Empty (offset retention)
    # the image the subscriptions were last resolved against, and regex -> matches in it
    resolved_image: TopicsImage | None = None
    regex_matches: dict[str, frozenset[str]] = field(default_factory=dict)

    # --- views ----------------------------------------------------------------------------

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_converged(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def preferred_assignor(self, settings: ConsumerGroupSettings) -> str:
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda name: votes[name])
        return settings.assignors[0]

    def member_topic_names(self, member: ConsumerMember, image: TopicsImage) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex:
            if image is not self.resolved_image:
                names |= matching_topics(regex, image)
            else:  # members usually share one regex: matched once per image
                matches = self.regex_matches.get(regex)
                if matches is None:
                    matches = self.regex_matches[regex] = matching_topics(regex, image)
                names |= matches
        return frozenset(names)

    def subscribed_topic_names(self) -> frozenset[str]:
        """Topics the group consumes (names, and regex matches as last resolved)."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
        names.update(self.subscribed_metadata)
        return frozenset(names)

    def topic_names_by_id(self) -> dict[uuid.UUID, str]:
        return {entry.topic_id: entry.name for entry in self.subscribed_metadata.values()}

    # --- records --------------------------------------------------------------------------

    def _member_records(self, member: ConsumerMember, records: list[ConsumerGroupRecord]) -> None:
        records.append(
            ConsumerGroupMemberMetadataRecord(
                self.group_id, member.member_id, member.metadata_value()
            )
        )

    def _assignment_record(
        self, member: ConsumerMember, records: list[ConsumerGroupRecord]
    ) -> None:
        records.append(
            ConsumerGroupCurrentMemberAssignmentRecord(
                self.group_id, member.member_id, member.assignment_value()
            )
        )

    def creation_records(self) -> list[ConsumerGroupRecord]:
        """Every record of the group as it is (Kafka's `createConsumerGroupRecords`): the
        members, the subscribed topics, the epoch, the target assignment, the current
        assignments."""
        records: list[ConsumerGroupRecord] = []
        for member in self.members.values():
            self._member_records(member, records)
        records.append(
            ConsumerGroupPartitionMetadataRecord(
                self.group_id, tuple(self.subscribed_metadata.values())
            )
        )
        records.append(ConsumerGroupMetadataRecord(self.group_id, self.epoch))
        for member_id, partitions in self.target.items():
            records.append(
                ConsumerGroupTargetAssignmentMemberRecord(
                    self.group_id, member_id, group_by_topic(partitions)
                )
            )
        records.append(
            ConsumerGroupTargetAssignmentMetadataRecord(self.group_id, self.assignment_epoch)
        )
        for member in self.members.values():
            self._assignment_record(member, records)
        return records

    def tombstones(self) -> list[ConsumerGroupRecord]:
        """Records deleting the whole group (Kafka's order: members first, metadata last)."""
        records: list[ConsumerGroupRecord] = []
        for member_id in self.members:
            records += self._member_tombstones(member_id)
        records += [
            ConsumerGroupTargetAssignmentMetadataRecord(self.group_id, None),
            ConsumerGroupPartitionMetadataRecord(self.group_id, None),
            ConsumerGroupMetadataRecord(self.group_id, None),
        ]
        return records

    def _member_tombstones(self, member_id: str) -> list[ConsumerGroupRecord]:
        return [
            ConsumerGroupCurrentMemberAssignmentRecord(self.group_id, member_id, None),
            ConsumerGroupTargetAssignmentMemberRecord(self.group_id, member_id, None),
            ConsumerGroupMemberMetadataRecord(self.group_id, member_id, None),
        ]

    # --- ownership ------------------------------------------------------------------------

    def _release(self, member: ConsumerMember) -> None:
        for partition in member.assigned | member.pending_revocation:
            if self.owners.get(partition) == member.member_id:
                del self.owners[partition]

    def _claim(self, member: ConsumerMember) -> None:
        for partition in member.assigned | member.pending_revocation:
            self.owners[partition] = member.member_id

    # --- heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self,
        request: ConsumerHeartbeatRequest,
        image: TopicsImage,
        settings: ConsumerGroupSettings,
        new_member_id: str,
        now_ms: int,
        records: list[ConsumerGroupRecord],
    ) -> ConsumerHeartbeatResult:
        """`new_member_id`: the id a v0 member joining without one gets."""
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, settings, now_ms, records)
        joined = self._member_for(request, settings, new_member_id, now_ms, records)
        if isinstance(joined, ConsumerHeartbeatResult):
            return joined
        member, bump = joined
        resolve = bump or image is not self.resolved_image
        if self._update_member(member, request):
            bump = resolve = True
            self._member_records(member, records)
        if resolve and self._refresh_metadata(image, records):
            bump = True
        if bump:
            self.epoch += 1
            records.append(ConsumerGroupMetadataRecord(self.group_id, self.epoch))
        if self.epoch > self.assignment_epoch:
            self._compute_target(settings, records)
        owned = flatten(request.owned) if request.owned is not None else None
        changed = self._reconcile(member, owned, records)
        member.classic = None  # a ConsumerGroupHeartbeat member speaks the consumer protocol
        member.session_deadline_ms = now_ms + settings.session_timeout_ms
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_deadline_ms is None:
                member.rebalance_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            member.rebalance_deadline_ms = None
        send_assignment = (
            request.member_epoch == JOIN_EPOCH
            or changed
            or (owned is not None and owned != member.assigned)
        )
        return ConsumerHeartbeatResult(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            assignment=group_by_topic(member.assigned) if send_assignment else None,
        )

    def _member_for(
        self,
        request: ConsumerHeartbeatRequest,
        settings: ConsumerGroupSettings,
        new_member_id: str,
        now_ms: int,
        records: list[ConsumerGroupRecord],
    ) -> tuple[ConsumerMember, bool] | ConsumerHeartbeatResult:
        """The member the heartbeat is for, and whether it is new (moves the group epoch)."""
        member_id = request.member_id or new_member_id
        instance_id = request.instance_id
        if request.member_epoch != JOIN_EPOCH:
            member = self.members.get(member_id)
            if member is None:
                return _error(
                    ErrorCode.unknown_member_id, f"member {member_id} is not in the group"
                )
            if instance_id is not None and self.static_members.get(instance_id) != member_id:
                return _error(ErrorCode.fenced_instance_id, f"instance {instance_id} is fenced")
            error = _epoch_error(member, request.member_epoch, request.owned)
            if error is not None:
                return error
            return member, False
        if instance_id is not None and instance_id in self.static_members:
            current_id = self.static_members[instance_id]
            current = self.members[current_id]
            if current_id == member_id:
                return current, False
            if current.member_epoch != STATIC_LEAVE_EPOCH:
                return _error(
                    ErrorCode.unreleased_instance_id,
                    f"instance {instance_id} is still used by member {current_id}",
                )
            return self._replace_static(current, member_id, records), False
        existing = self.members.get(member_id)
        if existing is not None:
            return existing, False  # a rejoin after a fence: its assignment is sent in full
        if len(self.members) >= settings.max_size:
            return _error(ErrorCode.group_max_size_reached, "the group is full")
        member = ConsumerMember(member_id=member_id, instance_id=instance_id)
        self.members[member_id] = member
        if instance_id is not None:
            self.static_members[instance_id] = member_id
        self._member_records(member, records)
        return member, True

    def _replace_static(
        self, old: ConsumerMember, new_member_id: str, records: list[ConsumerGroupRecord]
    ) -> ConsumerMember:
        """A static member back after a temporary leave: the new id takes over (KIP-848)."""
        records += self._member_tombstones(old.member_id)
        self._release(old)
        del self.members[old.member_id]
        target = self.target.pop(old.member_id, frozenset())
        old.member_id = new_member_id
        old.member_epoch = old.previous_member_epoch
        self.members[new_member_id] = old
        assert old.instance_id is not None
        self.static_members[old.instance_id] = new_member_id
        self.target[new_member_id] = target
        self._claim(old)
        self._member_records(old, records)
        records.append(
            ConsumerGroupTargetAssignmentMemberRecord(
                self.group_id, new_member_id, group_by_topic(target)
            )
        )
        self._assignment_record(old, records)
        return old

    def _update_member(self, member: ConsumerMember, request: ConsumerHeartbeatRequest) -> bool:
        """Apply the request's non-null fields; True if the subscription changed."""
        metadata_before = member.metadata_value()
        subscription_before = (
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
            member.server_assignor,
        )
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        member.client_id = request.client_id
        member.client_host = request.client_host
        changed_subscription = subscription_before != (
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
            member.server_assignor,
        )
        return changed_subscription or metadata_before != member.metadata_value()

    def _refresh_metadata(self, image: TopicsImage, records: list[ConsumerGroupRecord]) -> bool:
        """Re-resolve the subscribed topics against the image; True if they changed."""
        self.resolved_image = image
        self.regex_matches = {}
        names: set[str] = set()
        for member in self.members.values():
            names |= self.member_topic_names(member, image)
        metadata = {name: image[name] for name in sorted(names) if name in image}
        if metadata == self.subscribed_metadata:
            return False
        self.subscribed_metadata = metadata
        records.append(
            ConsumerGroupPartitionMetadataRecord(self.group_id, tuple(metadata.values()))
        )
        return True

    def _compute_target(
        self, settings: ConsumerGroupSettings, records: list[ConsumerGroupRecord]
    ) -> None:
        ids = {name: entry.topic_id for name, entry in self.subscribed_metadata.items()}
        image = self.resolved_image or self.subscribed_metadata
        assignor_members = {
            member.member_id: AssignorMember(
                member_id=member.member_id,
                instance_id=member.instance_id,
                subscribed_topic_ids=frozenset(
                    ids[name] for name in self.member_topic_names(member, image) if name in ids
                ),
                current=self.target.get(member.member_id, frozenset()),
                rack=member.rack_id,
            )
            for member in self.members.values()
        }
        counts = {entry.topic_id: entry.partitions for entry in self.subscribed_metadata.values()}
        racks = {entry.topic_id: entry.racks for entry in self.subscribed_metadata.values()}
        assignor = ASSIGNORS.get(self.preferred_assignor(settings), ASSIGNORS["uniform"])
        new_target = assignor(assignor_members, counts, racks)
        for member_id, partitions in sorted(new_target.items()):
            if self.target.get(member_id) != partitions:
                records.append(
                    ConsumerGroupTargetAssignmentMemberRecord(
                        self.group_id, member_id, group_by_topic(partitions)
                    )
                )
        self.target = dict(new_target)
        self.assignment_epoch = self.epoch
        records.append(ConsumerGroupTargetAssignmentMetadataRecord(self.group_id, self.epoch))

    # --- classic members (KIP-848 online migration) ------------------------------------------

    def classic_join(
        self,
        request: JoinGroupRequest,
        image: TopicsImage,
        settings: ConsumerGroupSettings,
        new_member_id: str,
        now_ms: int,
        records: list[ConsumerGroupRecord],
    ) -> JoinGroupResult:
        """A classic JoinGroup to this non-empty consumer group (Kafka's
        `classicGroupJoinToConsumerGroup`): the member joins or rejoins at once, with its
        subscription, owned partitions and rack read from its first protocol's metadata; the
        answer's generation is its member epoch and it is never the leader (the coordinator
        assigns: SyncGroup hands it its partitions). As Kafka, a member id the group does
        not know joins as a new member (the id of a KIP-394 MEMBER_ID_REQUIRED answer is
        not remembered)."""
        member_id = request.member_id or new_member_id
        failed = JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id=request.member_id)
        if request.protocol_type != CLASSIC_PROTOCOL_TYPE or not request.protocols:
            return failed
        subscription = parse_subscription(request.protocols[0].metadata)
        if subscription is None:
            return failed
        instance_id = request.group_instance_id
        member = self.members.get(member_id)
        known = self.static_members.get(instance_id) if instance_id is not None else None
        is_new = member is None and known is None
        if is_new and len(self.members) >= settings.max_size:
            return JoinGroupResult(ErrorCode.group_max_size_reached, member_id=request.member_id)
        if (
            request.member_id == UNKNOWN_MEMBER_ID
            and instance_id is None
            and request.api_version >= 4  # KIP-394: the member rejoins with this id
        ):
            return JoinGroupResult(ErrorCode.member_id_required, member_id=member_id)
        if known is not None and known != member_id:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return JoinGroupResult(ErrorCode.fenced_instance_id, member_id=request.member_id)
            member = self._replace_static(self.members[known], member_id, records)
        bump = False
        if member is None:
            member = ConsumerMember(member_id=member_id, instance_id=instance_id)
            self.members[member_id] = member
            if instance_id is not None:
                self.static_members[instance_id] = member_id
            bump = True
        before = member.metadata_value()
        subscription_before = (member.subscribed_topic_names, member.subscribed_topic_regex)
        member.rack_id = subscription.rack_id or member.rack_id
        member.rebalance_timeout_ms = max(request.rebalance_timeout_ms, 0)
        member.subscribed_topic_names = tuple(sorted(set(subscription.topics)))
        member.subscribed_topic_regex = None
        member.server_assignor = None
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.classic = ClassicMemberMetadata(
            request.session_timeout_ms,
            tuple((protocol.name, protocol.metadata) for protocol in request.protocols),
        )
        if (member.subscribed_topic_names, member.subscribed_topic_regex) != subscription_before:
            bump = True
        if bump or member.metadata_value() != before:
            self._member_records(member, records)
        if (bump or image is not self.resolved_image) and self._refresh_metadata(image, records):
            bump = True
        if bump:
            self.epoch += 1
            records.append(ConsumerGroupMetadataRecord(self.group_id, self.epoch))
        if self.epoch > self.assignment_epoch:
            self._compute_target(settings, records)
        ids = {entry.name: entry.topic_id for entry in image.values()}
        owned = frozenset(
            (ids[topic], partition)
            for topic, partitions in subscription.owned.items()
            if topic in ids
            for partition in partitions
        )
        self._reconcile(member, owned, records)
        member.session_deadline_ms = now_ms + request.session_timeout_ms
        member.classic_deadline_ms = now_ms + member.rebalance_timeout_ms  # SyncGroup due
        return JoinGroupResult(
            ErrorCode.none,
            member_id=member_id,
            generation_id=member.member_epoch,
            protocol_type=CLASSIC_PROTOCOL_TYPE,
            protocol_name=request.protocols[0].name,
            leader="",
        )

    def _reconcile(
        self, member: ConsumerMember, owned: Assignment | None, records: list[ConsumerGroupRecord]
    ) -> bool:
        """One reconciliation step of `member` (see `reconcile`); True if it changed."""
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        step = reconcile(
            member,
            self.assignment_epoch,
            self.target.get(member.member_id, frozenset()),
            owned,
            self.owners,
        )
        if (step.member_epoch, step.state, step.assigned, step.pending_revocation) == before:
            return False
        self._release(member)
        if step.member_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = step.member_epoch
        member.state = step.state
        member.assigned = step.assigned
        member.pending_revocation = step.pending_revocation
        self._claim(member)
        self._assignment_record(member, records)
        return True

    def _classic_member(
        self, member_id: str, instance_id: str | None
    ) -> ConsumerMember | ErrorCode:
        """Kafka's `validateConsumerGroupMember` + `throwIfMemberDoesNotUseClassicProtocol`."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            if known != member_id:
                return ErrorCode.fenced_instance_id
        member = self.members.get(member_id)
        if member is None or member.classic is None:
            return ErrorCode.unknown_member_id
        return member

    def classic_sync(
        self,
        request: SyncGroupRequest,
        settings: ConsumerGroupSettings,
        now_ms: int,
    ) -> SyncGroupResult:
        """SyncGroup of a classic member: its current assignment in the consumer protocol's
        layout; REBALANCE_IN_PROGRESS if the group moved on since its join (Kafka's
        `classicGroupSyncToConsumerGroup`)."""
        member = self._classic_member(request.member_id, request.group_instance_id)
        if isinstance(member, ErrorCode):
            return SyncGroupResult(member)
        assert member.classic is not None
        if request.generation_id != member.member_epoch:
            return SyncGroupResult(ErrorCode.illegal_generation)
        protocol_name = member.classic.protocols[0][0] if member.classic.protocols else ""
        if (
            request.protocol_type is not None and request.protocol_type != CLASSIC_PROTOCOL_TYPE
        ) or (request.protocol_name is not None and request.protocol_name != protocol_name):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        if (
            self.epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            if member.classic_deadline_ms is None:
                member.classic_deadline_ms = now_ms + member.rebalance_timeout_ms
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        member.classic_deadline_ms = None
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        names = self.topic_names_by_id()
        by_topic: dict[str, list[int]] = {}
        for topic_id, partitions in group_by_topic(member.assigned):
            if topic_id in names:
                by_topic[names[topic_id]] = list(partitions)
        return SyncGroupResult(
            ErrorCode.none, CLASSIC_PROTOCOL_TYPE, protocol_name, encode_assignment(by_topic)
        )

    def classic_heartbeat(
        self, member_id: str, instance_id: str | None, generation_id: int, now_ms: int
    ) -> ErrorCode:
        """Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it must rejoin (the
        group epoch moved past its epoch, it has partitions to revoke, or partitions it waits
        for were released); Kafka's `classicGroupHeartbeatToConsumerGroup`."""
        member = self._classic_member(member_id, instance_id)
        if isinstance(member, ErrorCode):
            return member
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        target = self.target.get(member.member_id, frozenset())
        released = all(
            self.owners.get(p) in (None, member.member_id) for p in target - member.assigned
        )
        if (
            member.member_epoch < self.epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and released)
        ):
            if member.classic_deadline_ms is None:
                member.classic_deadline_ms = now_ms + member.rebalance_timeout_ms
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave(
        self,
        member_id: str,
        instance_id: str | None,
        now_ms: int,
        records: list[ConsumerGroupRecord],
    ) -> ErrorCode:
        """LeaveGroup of a classic member (by member id, or by instance id alone)."""
        if instance_id is not None and member_id == UNKNOWN_MEMBER_ID:
            member_id = self.static_members.get(instance_id, "")
        member = self._classic_member(member_id, instance_id)
        if isinstance(member, ErrorCode):
            return member
        self.remove_member(member, now_ms, records)
        return ErrorCode.none

    def all_classic_except(self, member_id: str) -> bool:
        """Every member but `member_id` speaks the classic protocol (Kafka's
        `allMembersUseClassicProtocolExcept`)."""
        return all(m.classic is not None for m in self.members.values() if m.member_id != member_id)

    # --- leaving and fencing ----------------------------------------------------------------

    def _leave(
        self,
        request: ConsumerHeartbeatRequest,
        settings: ConsumerGroupSettings,
        now_ms: int,
        records: list[ConsumerGroupRecord],
    ) -> ConsumerHeartbeatResult:
        member_id = request.member_id
        if request.instance_id is not None:
            known = self.static_members.get(request.instance_id)
            if known is None:
                return _error(ErrorCode.unknown_member_id, "unknown instance id")
            if known != member_id:
                return _error(
                    ErrorCode.fenced_instance_id, f"instance {request.instance_id} is fenced"
                )
        member = self.members.get(member_id)
        if member is None:
            return _error(ErrorCode.unknown_member_id, f"member {member_id} is not in the group")
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Temporary leave: keep the assignment for the member's return (session permitting).
            self._release(member)
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.pending_revocation = frozenset()
            member.state = MemberState.STABLE
            member.rebalance_deadline_ms = None
            self._claim(member)
            self._assignment_record(member, records)
            return ConsumerHeartbeatResult(
                ErrorCode.none, member_id=member_id, member_epoch=STATIC_LEAVE_EPOCH
            )
        self.remove_member(member, now_ms, records)
        return ConsumerHeartbeatResult(
            ErrorCode.none, member_id=member_id, member_epoch=LEAVE_EPOCH
        )

    def remove_member(
        self, member: ConsumerMember, now_ms: int, records: list[ConsumerGroupRecord]
    ) -> None:
        """Leave or fence: the member's partitions are free, the group epoch moves."""
        self._release(member)
        del self.members[member.member_id]
        self.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]
        records += self._member_tombstones(member.member_id)
        self.epoch += 1
        records.append(ConsumerGroupMetadataRecord(self.group_id, self.epoch))
        self.resolved_image = None  # the next heartbeat re-resolves the subscribed topics
        if not self.members:
            self.state_timestamp_ms = now_ms

    # --- time -----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [
            m.rebalance_deadline_ms
            for m in self.members.values()
            if m.rebalance_deadline_ms is not None
        ]
        deadlines += [
            m.classic_deadline_ms
            for m in self.members.values()
            if m.classic_deadline_ms is not None
        ]
        return min(deadlines, default=None)

    def tick(self, now_ms: int, records: list[ConsumerGroupRecord]) -> list[str]:
        """Fence members whose session expired or who did not revoke (or, classic members,
        rejoin or sync) in time; returns the fenced member ids."""
        fenced: list[str] = []
        for member in list(self.members.values()):
            expired = now_ms >= member.session_deadline_ms
            slow = (
                member.rebalance_deadline_ms is not None and now_ms >= member.rebalance_deadline_ms
            ) or (member.classic_deadline_ms is not None and now_ms >= member.classic_deadline_ms)
            if expired or slow:
                self.remove_member(member, now_ms, records)
                fenced.append(member.member_id)
        return fenced

    # --- validation for offsets (KIP-848 OffsetCommit v9 / OffsetFetch v9) -----------------

    def check_offset_commit(
        self, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode | None:
        """Kafka's `ConsumerGroup.validateOffsetCommit` (not transactional)."""
        if member_epoch < 0 and not self.members:
            return None  # an admin client or a consumer without group management
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is not None:  # a classic member commits with its generation
            return None if member_epoch == member.member_epoch else ErrorCode.illegal_generation
        if api_version < 9:
            return ErrorCode.unsupported_version
        return _stale_or_fenced(member_epoch, member.member_epoch)

    def check_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_id is None or member_epoch < 0:
            return None  # admin or classic-style fetch
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        return _stale_or_fenced(member_epoch, member.member_epoch)


def _stale_or_fenced(received: int, expected: int) -> ErrorCode | None:
    if received > expected:
        return ErrorCode.fenced_member_epoch
    if received < expected:
        return ErrorCode.stale_member_epoch
    return None


def _epoch_error(
    member: ConsumerMember, received: int, owned: TopicPartitions | None
) -> ConsumerHeartbeatResult | None:
    """Kafka's `throwIfMemberEpochIsInvalid`."""
    if received > member.member_epoch:
        return _error(
            ErrorCode.fenced_member_epoch,
            f"epoch {received} is ahead of the member's {member.member_epoch}",
        )
    if received < member.member_epoch:
        lost_response = (
            received == member.previous_member_epoch
            and owned is not None
            and flatten(owned) <= member.assigned
        )
        if not lost_response:
            return _error(
                ErrorCode.fenced_member_epoch,
                f"epoch {received} is behind the member's {member.member_epoch}",
            )
    return None


def _error(code: ErrorCode, message: str) -> ConsumerHeartbeatResult:
    return ConsumerHeartbeatResult(code, error_message=message, member_epoch=-1)


def validate_heartbeat(
    request: ConsumerHeartbeatRequest, settings: ConsumerGroupSettings
) -> ConsumerHeartbeatResult | None:
    """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` -> INVALID_REQUEST etc."""
    if not request.group_id:
        return _error(ErrorCode.invalid_group_id, "GroupId can't be empty.")
    if request.instance_id == "":
        return _error(ErrorCode.invalid_request, "InstanceId can't be empty.")
    for name, value in (("GroupId", request.group_id), ("MemberId", request.member_id)):
        if len(value.encode("utf-8")) > MAX_KEY_STRING_BYTES:
            # the record keys of __consumer_offsets hold int16-length strings
            return _error(ErrorCode.invalid_request, f"{name} is too long.")
    if request.rack_id == "":
        return _error(ErrorCode.invalid_request, "RackId can't be empty.")
    if request.api_version >= 1 and not request.member_id:
        return _error(ErrorCode.invalid_request, "MemberId can't be empty.")
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms < 0:
            return _error(
                ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            )
        if request.owned is None or request.owned:
            return _error(
                ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            )
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return _error(
                ErrorCode.invalid_request,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            return _error(ErrorCode.invalid_request, "InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        return _error(ErrorCode.invalid_request, f"MemberEpoch {request.member_epoch} is invalid.")
    elif request.member_epoch > 0 and not request.member_id:
        return _error(ErrorCode.invalid_request, "MemberId can't be empty.")
    if request.server_assignor is not None and request.server_assignor not in settings.assignors:
        return _error(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {request.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(settings.assignors)}.",
        )
    if request.subscribed_topic_regex:
        problem = regex_error(request.subscribed_topic_regex)
        if problem is not None:
            return _error(ErrorCode.invalid_regular_expression, problem)
    return None


# --- ConsumerGroupDescribe -----------------------------------------------------------------

NamedPartitions = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: NamedPartitions
    target_assignment: NamedPartitions
    classic: bool = False  # a classic-protocol member (online migration)


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def describe(
    group: ConsumerGroup, image: TopicsImage, settings: ConsumerGroupSettings
) -> ConsumerGroupDescription:
    names = {entry.topic_id: entry.name for entry in image.values()}
    names.update(group.topic_names_by_id())

    def named(partitions: Assignment) -> NamedPartitions:
        return tuple(
            (topic_id, names.get(topic_id, ""), numbers)
            for topic_id, numbers in group_by_topic(partitions)
        )

    members = tuple(
        DescribedConsumerMember(
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            assignment=named(member.assigned),
            target_assignment=named(group.target.get(member.member_id, frozenset())),
            classic=member.classic is not None,
        )
        for member in group.members.values()
    )
    return ConsumerGroupDescription(
        group_id=group.group_id,
        error=ErrorCode.none,
        state=group.state().value,
        epoch=group.epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.preferred_assignor(settings),
        members=members,
    )


# --- online upgrade (a classic group becomes a consumer group) -------------------------------


@dataclass(frozen=True, slots=True)
class ClassicMemberState:
    """A member of a classic group being converted (what `consumer_group_from_classic` needs)."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    selected_protocol: str
    assignment: bytes


def consumer_group_from_classic(
    group_id: str,
    generation_id: int,
    members: list[ClassicMemberState],
    image: TopicsImage,
    now_ms: int,
) -> ConsumerGroup | None:
    """Kafka's `ConsumerGroup.fromClassicGroup`: every classic member becomes a classic
    member of a consumer group at epoch = the generation, its current assignment (read from
    its assignment bytes) both its target and its assigned partitions; the group and
    assignment epochs are the generation. None if a subscription or assignment does not
    parse (Kafka then answers GROUP_ID_NOT_FOUND). `creation_records` are its records."""
    ids = {entry.name: entry.topic_id for entry in image.values()}
    group = ConsumerGroup(
        group_id, epoch=generation_id, assignment_epoch=generation_id, state_timestamp_ms=now_ms
    )
    for state in members:
        metadata = dict(state.protocols).get(state.selected_protocol)
        subscription = parse_subscription(metadata) if metadata is not None else None
        assignment = assigned_partitions(state.assignment)
        if subscription is None or assignment is None:
            return None
        assigned = frozenset(
            (ids[topic], partition)
            for topic, partitions in assignment.items()
            if topic in ids
            for partition in partitions
        )
        member = ConsumerMember(
            member_id=state.member_id,
            instance_id=state.instance_id,
            rack_id=subscription.rack_id,
            client_id=state.client_id,
            client_host=state.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=state.rebalance_timeout_ms,
            member_epoch=generation_id,
            previous_member_epoch=generation_id,
            assigned=assigned,
            session_deadline_ms=now_ms + state.session_timeout_ms,
            classic=ClassicMemberMetadata(state.session_timeout_ms, state.protocols),
        )
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        group.target[member.member_id] = assigned
        group._claim(member)
    names: set[str] = set()
    for member in group.members.values():
        names.update(member.subscribed_topic_names)
    group.subscribed_metadata = {name: image[name] for name in sorted(names) if name in image}
    group.resolved_image = image
    return group


# --- loading ---------------------------------------------------------------------------------


def load_consumer_group(
    group_id: str, records: list[ConsumerGroupRecord], now_ms: int, settings: ConsumerGroupSettings
) -> ConsumerGroup | None:
    """Rebuild a group from its records in log order (the last record of a key wins);
    None if the group was deleted. Sessions restart at `now_ms`."""
    epoch: int | None = None
    assignment_epoch = 0
    topics: tuple[TopicMetadataEntry, ...] = ()
    metadata: dict[str, MemberMetadataValue] = {}
    targets: dict[str, TopicPartitions] = {}
    current: dict[str, CurrentAssignmentValue] = {}
    for record in records:
        if isinstance(record, ConsumerGroupMetadataRecord):
            epoch = record.epoch
        elif isinstance(record, ConsumerGroupPartitionMetadataRecord):
            topics = record.topics or ()
        elif isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
            assignment_epoch = record.assignment_epoch or 0
        elif isinstance(record, ConsumerGroupMemberMetadataRecord):
            _put(metadata, record.member_id, record.value)
        elif isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
            _put(targets, record.member_id, record.partitions)
        else:
            _put(current, record.member_id, record.value)
    if epoch is None:
        return None
    group = ConsumerGroup(group_id, epoch=epoch, assignment_epoch=assignment_epoch)
    group.subscribed_metadata = {entry.name: entry for entry in topics}
    group.state_timestamp_ms = now_ms
    for member_id, value in metadata.items():
        member = ConsumerMember(
            member_id=member_id,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=max(value.rebalance_timeout_ms, 0),
            server_assignor=value.server_assignor,
            classic=value.classic,
        )
        member.session_deadline_ms = now_ms + member.session_timeout_ms(settings)
        assignment = current.get(member_id)
        if assignment is not None:
            member.member_epoch = assignment.member_epoch
            member.previous_member_epoch = assignment.previous_member_epoch
            try:
                member.state = MemberState(assignment.state)
            except ValueError:
                member.state = MemberState.STABLE
            member.assigned = flatten(assignment.assigned)
            member.pending_revocation = flatten(assignment.pending_revocation)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                member.rebalance_deadline_ms = now_ms + member.rebalance_timeout_ms
        group.members[member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member_id
        group.target[member_id] = flatten(targets.get(member_id, ()))
        group._claim(member)
    return group


_V = TypeVar("_V")


def _put(mapping: dict[str, _V], key: str, value: _V | None) -> None:
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value
