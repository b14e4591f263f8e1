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
  move from the most to the least loaded while the difference exceeds one). It ignores racks.
* `range` (`RangeAssignor`): per topic, the members subscribed to it, sorted by instance id
  (else member id), get contiguous ranges; the first `partitions % members` get one more.
  Co-partitioned topics land on the same member. Unlike Kafka's server-side range assignor
  it is not sticky beyond what the sorted order gives.

Cost: homogeneous groups O(P log P); the heterogeneous balance loop moves one partition per
step, at most P steps of O(M log M + P/M x M), so a large heterogeneous group costs more;
the coordinator bounds the members of a group (`max_members_per_group`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
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


AssignorFunction = Callable[
    [Mapping[str, AssignorMember], Mapping[uuid.UUID, int]], dict[str, Assignment]
]


def uniform_assign(
    members: Mapping[str, AssignorMember], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """`partition_counts`: topic id -> number of partitions (subscribed topics only)."""
    subscriptions = {
        frozenset(m.subscribed_topic_ids & partition_counts.keys()) for m in members.values()
    }
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partition_counts, subscriptions.pop())
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
            chosen = min(candidates, key=lambda m: (len(result[m]), m))
            result[chosen].add((topic_id, partition))
            owner[(topic_id, partition)] = chosen
    # 3. balance: move from the most loaded while some eligible member has two fewer
    for _ in range(len(owner) + 1):
        if not _move_one(result, eligible):
            break
    return {member_id: frozenset(partitions) for member_id, partitions in result.items()}


def _uniform_homogeneous(
    members: Mapping[str, AssignorMember],
    partition_counts: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
) -> dict[str, Assignment]:
    """Every member subscribes to the same topics: quotas computed directly, O(P log P).
    Each member keeps up to its quota of its current target (the first `extra` members
    with more than `base` keep base + 1), then the partitions nobody kept fill the members
    below their quota."""
    everything = [(t, p) for t in sorted(topics) for p in range(partition_counts[t])]
    order = sorted(members)
    base, extra = divmod(len(everything), len(order))
    valid = set(everything)
    kept: dict[str, list[TopicIdPartition]] = {}
    taken: set[TopicIdPartition] = set()
    for member_id in order:
        mine = [tp for tp in sorted(members[member_id].current) if tp in valid and tp not in taken]
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
    free = iter(tp for tp in everything if tp not in taken)
    for member_id in order:
        while len(kept[member_id]) < base:
            kept[member_id].append(next(free))
    for member_id in order:
        if extra_left == 0:
            break
        if len(kept[member_id]) == base:
            kept[member_id].append(next(free))
            extra_left -= 1
    return {member_id: frozenset(partitions) for member_id, partitions in kept.items()}


def _move_one(
    result: dict[str, set[TopicIdPartition]], eligible: dict[uuid.UUID, list[str]]
) -> bool:
    for donor in sorted(result, key=lambda m: (-len(result[m]), m)):
        donor_load = len(result[donor])
        if donor_load < 2:
            return False
        for topic_id, partition in sorted(result[donor], reverse=True):
            receivers = [m for m in eligible[topic_id] if len(result[m]) <= donor_load - 2]
            if receivers:
                receiver = min(receivers, key=lambda m: (len(result[m]), m))
                result[donor].remove((topic_id, partition))
                result[receiver].add((topic_id, partition))
                return True
    return False


def range_assign(
    members: Mapping[str, AssignorMember], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
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
        start = 0
        for index, member in enumerate(subscribers):
            length = per_member + (1 if index < extra else 0)
            result[member.member_id].update((topic_id, p) for p in range(start, start + length))
            start += length
    return {member_id: frozenset(partitions) for member_id, partitions in result.items()}


ASSIGNORS: dict[str, AssignorFunction] = {UNIFORM: uniform_assign, RANGE: range_assign}
