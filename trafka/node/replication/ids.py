"""Named ids of the replication and controller cores (STYLE 9).

Sentinels are Kafka's: a partition without a leader has leader -1 (`NO_LEADER`, REP-32,
CTL-42); a partition of a topic being deleted is announced with leader -2
(`LEADER_DURING_DELETE`, Kafka's `LeaderAndIsr.LeaderDuringDelete`); an unknown epoch or
offset in OffsetForLeaderEpoch answers is -1 (`UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`).
"""

from __future__ import annotations

from typing import NamedTuple, NewType

BrokerId = NewType("BrokerId", int)
LeaderEpoch = NewType("LeaderEpoch", int)
Offset = NewType("Offset", int)
ControllerEpoch = NewType("ControllerEpoch", int)
ZkVersion = NewType("ZkVersion", int)
"""A znode's data version (ZooKeeper's `stat.version`); -1 means "must not exist"."""

NO_LEADER = BrokerId(-1)
LEADER_DURING_DELETE = BrokerId(-2)
UNDEFINED_EPOCH = LeaderEpoch(-1)
UNDEFINED_EPOCH_OFFSET = Offset(-1)
INITIAL_LEADER_EPOCH = LeaderEpoch(0)
INITIAL_CONTROLLER_EPOCH = ControllerEpoch(0)
NO_VERSION = ZkVersion(-1)


class TopicPartition(NamedTuple):
    """A partition of a topic, e.g. `orders-0`. A named tuple: built, hashed and compared
    at C speed (as a frozen dataclass each replica-manager lookup of a Fetch's partition
    ran three Python calls; issue 19's commit-latency profile)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
