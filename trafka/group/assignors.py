"""Server-side partition assignors of KIP-848 consumer groups (`group.consumer.assignors`).

The coordinator, not a group leader, computes the *target assignment* whenever the group
epoch moves past the assignment epoch. An assignor is a pure function of the members'
subscriptions (topic ids), their current target assignment (for stickiness) and the
subscribed topics' partition counts.

* `uniform` (Kafka's default, `UniformAssignor`): every partition of the subscribed topics is
  given to exactly one member subscribed to its topic, the counts differ by at most one
  between members that could take each other's partitions, and it is *sticky*: a member keeps
  the partitions of its current target that are still valid, partitions of members that left
  go to the least-loaded members, and a member joining takes partitions only from the
  members above the new quota. So a leave moves only the leaver's partitions and a join
  moves only the partitions the newcomer needs. Like Kafka, two builders: homogeneous
  subscriptions (every member the same topics) compute the quotas directly in
  O(P log P); heterogeneous ones run a greedy algorithm (keep, fill the least loaded, then
  move from the most to the least loaded while the difference exceeds one).
* `range` (`RangeAssignor`): per topic, the members subscribed to it, sorted by instance id
  (else member id), get contiguous ranges; the first `partitions % members` get one more.
  Co-partitioned topics land on the same member. Unlike Kafka's server-side range assignor
  it is not sticky beyond what the sorted order gives.

Racks (KIP-881's rule, applied to the server-side assignors): when members have a `rack_id`
(`client.rack`) and some partition is not replicated on every member's rack, partitions are
placed on a member of a rack holding a replica where the other properties allow:

* `uniform`: balance and stickiness first (a member keeps its partitions even if they live
  on another rack, so adding racks never causes revocations by itself); a partition that
  must be (re)assigned goes to a member with room in a rack of one of its replicas, else to
  any member with room; a member over its quota keeps its partitions of its own rack first;
  in the balance step a receiver in a matching rack is preferred.
* `range`: every member gets as many partitions of a topic as without racks, but picks the
  partitions of its rack first (co-partitioning across topics is then not guaranteed, as
  with Kafka's client-side rack-aware RangeAssignor).

Without member racks, without partition racks, or when every partition has a replica on
every member's rack, the result is exactly the rack-unaware one. Note: Kafka 4.x's own
server-side `uniform` and `range` ignore racks (its 3.7 uniform builders had this rule; it
was removed, and KIP-1101 only re-triggers assignment on rack changes); trafka keeps it
because consumers with `client.rack` otherwise read across racks when a partition's
replicas do not span every rack.

Cost: homogeneous groups O(P log P); the heterogeneous balance loop moves one partition per
step, at most P steps of O(M log M + P/M x M), so a large heterogeneous group costs more;
the coordinator bounds the members of a group (`max_members_per_group`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

TopicIdPartition = tuple[uuid.UUID, int]
Assignment = frozenset[TopicIdPartition]

UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class AssignorMember:
    """What an assignor knows of a member."""

    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Assignment  # the member's current *target* assignment (stickiness)
    rack: str | None = None  # `rack_id` (the client's `client.rack`)


PartitionRacks = Mapping[uuid.UUID, Sequence[Sequence[str]]]
"""Topic id -> per partition, the racks of its replicas (missing or empty: unknown)."""

AssignorFunction = Callable[
    [Mapping[str, AssignorMember], Mapping[uuid.UUID, int], PartitionRacks],
    dict[str, Assignment],
]


class _Racks:
    """KIP-881's `useRackAwareAssignment`: racks matter when members have racks, partitions
    have racks, and some partition lacks a replica on some member's rack."""

    def __init__(
        self,
        members: Mapping[str, AssignorMember],
        partition_counts: Mapping[uuid.UUID, int],
        partition_racks: PartitionRacks,
    ) -> None:
        self.member_racks = {m.member_id: m.rack for m in members.values() if m.rack}
        wanted = set(self.member_racks.values())
        self.by_partition: dict[TopicIdPartition, frozenset[str]] = {}
        useful = False
        for topic_id, racks in partition_racks.items():
            count = partition_counts.get(topic_id, 0)
            for partition, names in enumerate(racks[:count]):
                if names:
                    replica_racks = frozenset(names)
                    self.by_partition[(topic_id, partition)] = replica_racks
                    useful = useful or not wanted <= replica_racks
        self.enabled = bool(wanted) and bool(self.by_partition) and useful

    def matches(self, member_id: str, partition: TopicIdPartition) -> bool:
        rack = self.member_racks.get(member_id)
        return rack is not None and rack in self.by_partition.get(partition, ())

    def mismatch(self, member_id: str, partition: TopicIdPartition) -> int:
        """0 when the member's rack holds a replica (or racks do not matter), else 1."""
        return 0 if not self.enabled or self.matches(member_id, partition) else 1


def uniform_assign(
    members: Mapping[str, AssignorMember],
    partition_counts: Mapping[uuid.UUID, int],
    partition_racks: PartitionRacks | None = None,
) -> dict[str, Assignment]:
    """`partition_counts`: topic id -> number of partitions (subscribed topics only)."""
    racks = _Racks(members, partition_counts, partition_racks or {})
    subscriptions = {
        frozenset(m.subscribed_topic_ids & partition_counts.keys()) for m in members.values()
    }
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partition_counts, subscriptions.pop(), racks)
    eligible: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic_id in members[member_id].subscribed_topic_ids:
            if topic_id in partition_counts:
                eligible.setdefault(topic_id, []).append(member_id)
    result: dict[str, set[TopicIdPartition]] = {member_id: set() for member_id in members}
    owner: dict[TopicIdPartition, str] = {}
    # 1. keep what is still valid (sticky)
    for member_id in sorted(members):
        member = members[member_id]
        for topic_id, partition in sorted(member.current):
            if (
                topic_id in member.subscribed_topic_ids
                and 0 <= partition < partition_counts.get(topic_id, 0)
                and (topic_id, partition) not in owner
            ):
                result[member_id].add((topic_id, partition))
                owner[(topic_id, partition)] = member_id
    # 2. give every partition nobody holds to the least-loaded member that may take it
    for topic_id in sorted(eligible):
        candidates = eligible[topic_id]
        for partition in range(partition_counts[topic_id]):
            if (topic_id, partition) in owner:
                continue
            tp = (topic_id, partition)
            chosen = min(candidates, key=lambda m: (len(result[m]), racks.mismatch(m, tp), m))
            result[chosen].add((topic_id, partition))
            owner[(topic_id, partition)] = chosen
    # 3. balance: move from the most loaded while some eligible member has two fewer
    for _ in range(len(owner) + 1):
        if not _move_one(result, eligible, racks):
            break
    return {member_id: frozenset(partitions) for member_id, partitions in result.items()}


def _uniform_homogeneous(
    members: Mapping[str, AssignorMember],
    partition_counts: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
    racks: _Racks,
) -> dict[str, Assignment]:
    """Every member subscribes to the same topics: quotas computed directly, O(P log P).
    Each member keeps up to its quota of its current target (the first `extra` members
    with more than `base` keep base + 1), then the partitions nobody kept fill the members
    below their quota (with racks: first each partition to a member of a matching rack)."""
    everything = [(t, p) for t in sorted(topics) for p in range(partition_counts[t])]
    order = sorted(members)
    base, extra = divmod(len(everything), len(order))
    valid = set(everything)
    kept: dict[str, list[TopicIdPartition]] = {}
    taken: set[TopicIdPartition] = set()
    for member_id in order:
        mine = [
            tp
            for tp in sorted(
                members[member_id].current, key=lambda tp: (racks.mismatch(member_id, tp), tp)
            )
            if tp in valid and tp not in taken
        ]
        kept[member_id] = mine[: base + 1]
        taken.update(kept[member_id])
    extra_left = extra
    for member_id in order:
        if len(kept[member_id]) > base:
            if extra_left > 0:
                extra_left -= 1
            else:
                taken.difference_update(kept[member_id][base:])
                kept[member_id] = kept[member_id][:base]
    quota = {member_id: max(len(kept[member_id]), base) for member_id in order}
    for member_id in order:
        if extra_left == 0:
            break
        if len(kept[member_id]) <= base:
            quota[member_id] = base + 1
            extra_left -= 1
    free_list = [tp for tp in everything if tp not in taken]
    if racks.enabled:
        free_list = _place_by_rack(free_list, kept, quota, racks)
    free = iter(free_list)
    for member_id in order:
        while len(kept[member_id]) < base:
            kept[member_id].append(next(free))
    for member_id in order:
        while len(kept[member_id]) < quota[member_id]:
            kept[member_id].append(next(free))
    return {member_id: frozenset(partitions) for member_id, partitions in kept.items()}


def _place_by_rack(
    free: list[TopicIdPartition],
    kept: dict[str, list[TopicIdPartition]],
    quota: Mapping[str, int],
    racks: _Racks,
) -> list[TopicIdPartition]:
    """Give each free partition to a member of a rack holding one of its replicas that is
    below its quota (the one with the most room); returns the partitions left over."""
    by_rack: dict[str, list[str]] = {}
    for member_id in kept:
        rack = racks.member_racks.get(member_id)
        if rack is not None:
            by_rack.setdefault(rack, []).append(member_id)
    left = []
    for tp in free:
        candidates = [
            m
            for rack in sorted(racks.by_partition.get(tp, ()))
            for m in by_rack.get(rack, ())
            if len(kept[m]) < quota[m]
        ]
        if candidates:
            chosen = min(candidates, key=lambda m: (len(kept[m]) - quota[m], m))
            kept[chosen].append(tp)
        else:
            left.append(tp)
    return left


def _move_one(
    result: dict[str, set[TopicIdPartition]],
    eligible: dict[uuid.UUID, list[str]],
    racks: _Racks,
) -> bool:
    for donor in sorted(result, key=lambda m: (-len(result[m]), m)):
        donor_load = len(result[donor])
        if donor_load < 2:
            return False
        for topic_id, partition in sorted(result[donor], reverse=True):
            receivers = [m for m in eligible[topic_id] if len(result[m]) <= donor_load - 2]
            if receivers:
                tp = (topic_id, partition)
                receiver = min(receivers, key=lambda m: (len(result[m]), racks.mismatch(m, tp), m))
                result[donor].remove((topic_id, partition))
                result[receiver].add((topic_id, partition))
                return True
    return False


def range_assign(
    members: Mapping[str, AssignorMember],
    partition_counts: Mapping[uuid.UUID, int],
    partition_racks: PartitionRacks | None = None,
) -> dict[str, Assignment]:
    racks = _Racks(members, partition_counts, partition_racks or {})
    result: dict[str, set[TopicIdPartition]] = {member_id: set() for member_id in members}
    for topic_id in sorted(partition_counts):
        subscribers = sorted(
            (m for m in members.values() if topic_id in m.subscribed_topic_ids),
            key=lambda m: (m.instance_id or m.member_id, m.member_id),
        )
        if not subscribers:
            continue
        count = partition_counts[topic_id]
        per_member, extra = divmod(count, len(subscribers))
        lengths = [per_member + (1 if index < extra else 0) for index in range(len(subscribers))]
        if racks.enabled:
            _range_by_rack(topic_id, count, subscribers, lengths, racks, result)
            continue
        start = 0
        for member, length in zip(subscribers, lengths, strict=True):
            result[member.member_id].update((topic_id, p) for p in range(start, start + length))
            start += length
    return {member_id: frozenset(partitions) for member_id, partitions in result.items()}


def _range_by_rack(
    topic_id: uuid.UUID,
    count: int,
    subscribers: list[AssignorMember],
    lengths: list[int],
    racks: _Racks,
    result: dict[str, set[TopicIdPartition]],
) -> None:
    """Range with racks: the same counts per member, each member first taking the lowest
    partitions with a replica on its rack, then the lowest ones left."""
    free = list(range(count))
    taken: dict[str, list[int]] = {m.member_id: [] for m in subscribers}
    for member, length in zip(subscribers, lengths, strict=True):
        mine = [p for p in free if racks.matches(member.member_id, (topic_id, p))][:length]
        taken[member.member_id] = mine
        chosen = set(mine)
        free = [p for p in free if p not in chosen]
    for member, length in zip(subscribers, lengths, strict=True):
        need = length - len(taken[member.member_id])
        taken[member.member_id] += free[:need]
        free = free[need:]
    for member_id, partitions in taken.items():
        result[member_id].update((topic_id, p) for p in partitions)


ASSIGNORS: dict[str, AssignorFunction] = {UNIFORM: uniform_assign, RANGE: range_assign}
