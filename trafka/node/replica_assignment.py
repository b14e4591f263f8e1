"""Kafka's replica assignment for topic creation and added partitions (CTL-24, CTL-26).

The algorithm of Kafka's `AdminUtils.assignReplicasToBrokers` (ZooKeeper-era admin path),
reproduced so that `ktool topics create` places replicas where `kafka-topics.sh` would.
Its goals: spread replicas evenly over brokers; for the partitions led by one broker spread
their followers over the other brokers; with racks on every broker, put each partition's
replicas on different racks where possible.

Rack-unaware: the first replica of partition p is broker `(p + start_index) % n` of the
(sorted) broker list; the j-th follower (j = 0, 1, ...) is at

    (first + 1 + (replica_shift + j) % (n - 1)) % n

where `replica_shift` starts random and grows by one each time p wraps around the broker
list. With start_index = replica_shift = 0 and brokers 0..4::

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4       (1st replica)
    p5        p6        p7        p8        p9       (1st replica)
    p4        p0        p1        p2        p3       (2nd replica)
    p8        p9        p5        p6        p7       (2nd replica)

Rack-aware: the brokers are first arranged rack-alternated (racks sorted by name, brokers
sorted within a rack, one broker per rack in turn), then the same round robin runs on that
list with the shift multiplied by the number of racks; a candidate follower is skipped while
some rack (or some broker) still has no replica of the partition.

This is the one replica assignment of trafka: CreateTopics, CreatePartitions and Metadata's
auto-creation (`trafka.node.topics`) and `ktool reassign generate` all use it, with the
brokers' racks as `placements_of` gives them: rack-aware when every live broker has a
`broker.rack`, rack-unaware when none or only some have one (Kafka's RackAwareMode.Safe; the
CreateTopics path of Kafka's ZooKeeper mode would refuse a partly racked cluster instead).

Randomness is an input (STYLE 5): pass `fixed_start_index` for Kafka's deterministic form, or
a `random.Random` to draw the start index and the shift (two draws, in Kafka's order).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerPlacement:
    """A broker as assignment sees it: its id and optional rack (`broker.rack`)."""

    broker_id: int
    rack: str | None = None


class AssignmentError(ValueError):
    """Bad assignment input; `error_name` is the Kafka error the caller should answer."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def placements_of(racks: Mapping[int, str | None]) -> list[BrokerPlacement]:
    """The brokers sorted by id, with their racks only if every one has a rack."""
    use_racks = all(rack is not None for rack in racks.values())
    return [BrokerPlacement(b, racks[b] if use_racks else None) for b in sorted(racks)]


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerPlacement],
    partition_count: int,
    replication_factor: int,
    *,
    rng: random.Random | None = None,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas, like `AdminUtils.assignReplicasToBrokers`.

    `brokers` is taken in the given order (Kafka's callers sort it by id). Raises
    `AssignmentError` with INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR /
    INVALID_REPLICA_ASSIGNMENT (some but not all brokers have a rack).
    """
    if partition_count <= 0:
        raise AssignmentError("INVALID_PARTITIONS", "number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AssignmentError(
            "INVALID_REPLICATION_FACTOR", "replication factor must be larger than 0"
        )
    if replication_factor > len(brokers):
        raise AssignmentError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}",
        )
    if fixed_start_index < 0 and rng is None:
        raise ValueError("pass rng or fixed_start_index")
    if all(b.rack is None for b in brokers):
        broker_list = [b.broker_id for b in brokers]
        start_index, shift = _start(len(broker_list), fixed_start_index, rng)
        return _rack_unaware(
            partition_count, replication_factor, broker_list, start_index, shift, start_partition_id
        )
    if any(b.rack is None for b in brokers):
        raise AssignmentError(
            "INVALID_REPLICA_ASSIGNMENT",
            "Not all brokers have rack information for replica rack aware assignment",
        )
    rack_of = {b.broker_id: b.rack for b in brokers if b.rack is not None}
    arranged = rack_alternated_broker_list(rack_of)
    start_index, shift = _start(len(arranged), fixed_start_index, rng)
    return _rack_aware(
        partition_count, replication_factor, rack_of, arranged, start_index, shift,
        start_partition_id,
    )  # fmt: skip


def _start(broker_count: int, fixed_start_index: int, rng: random.Random | None) -> tuple[int, int]:
    """Kafka draws the start index, then the shift, each uniform in [0, broker_count)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    assert rng is not None
    start_index = rng.randrange(broker_count)
    return start_index, rng.randrange(broker_count)


def _replica_index(first_index: int, shift: int, replica: int, broker_count: int) -> int:
    return (first_index + 1 + (shift + replica) % (broker_count - 1)) % broker_count


def _rack_unaware(
    partition_count: int,
    replication_factor: int,
    broker_list: list[int],
    start_index: int,
    shift: int,
    start_partition_id: int,
) -> dict[int, tuple[int, ...]]:
    n = len(broker_list)
    result: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition_id)
    for _ in range(partition_count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [broker_list[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[_replica_index(first, shift, j, n)])
        result[partition] = tuple(replicas)
        partition += 1
    return result


def _rack_aware(
    partition_count: int,
    replication_factor: int,
    rack_of: Mapping[int, str],
    arranged: list[int],
    start_index: int,
    shift: int,
    start_partition_id: int,
) -> dict[int, tuple[int, ...]]:
    n = len(arranged)
    rack_count = len(set(rack_of.values()))
    result: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition_id)
    for _ in range(partition_count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {rack_of[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, n)]
                rack = rack_of[broker]
                k += 1
                rack_ok = rack not in racks_with_replicas or len(racks_with_replicas) == rack_count
                broker_ok = broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        result[partition] = tuple(replicas)
        partition += 1
    return result


def rack_alternated_broker_list(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers alternated by rack: racks sorted by name, brokers sorted within each rack.

    rack1: 0,1,2; rack2: 3,4,5; rack3: 6,7,8 -> 0,3,6,1,4,7,2,5,8.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    iterators = {rack: iter(sorted(by_rack[rack])) for rack in racks}
    result: list[int] = []
    rack_index = 0
    while len(result) < len(rack_of):
        candidate = next(iterators[racks[rack_index]], None)
        if candidate is not None:
            result.append(candidate)
        rack_index = (rack_index + 1) % len(racks)
    return result


def start_index_for_added_partitions(
    brokers: Sequence[BrokerPlacement], first_replica_of_partition_zero: int
) -> int:
    """Kafka's start index when partitions are added (CTL-26, `AdminUtils.addPartitions`):

    the position of the first broker whose id >= partition 0's first replica (or 0).
    Pass it as `fixed_start_index` with `start_partition_id` = the current partition count.
    """
    for index, broker in enumerate(brokers):
        if broker.broker_id >= first_replica_of_partition_zero:
            return index
    return 0
