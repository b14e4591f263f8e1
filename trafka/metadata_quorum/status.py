"""The quorum's status as plain values, shaped like Kafka's DescribeQuorum (API 55) answer.

Mapping from pysyncobj: LeaderEpoch = the Raft term; HighWatermark = the leader's commit
index; LogEndOffset of a voter = its match index as seen by the leader (the leader's own =
its last log index). Per-voter figures are only known on the leader; elsewhere they are -1.
Observers (learners) are listed by the node ids of sessions whose owner is `node-<id>` and
who are not voters; pysyncobj does not tell the leader which learner is which, so their
offsets are -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True, slots=True)
class ReplicaState:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int
    status: str  # "Leader", "Follower" or "Observer"

    def lag(self, leader_log_end_offset: int) -> int:
        if self.log_end_offset < 0 or leader_log_end_offset < 0:
            return -1
        return max(0, leader_log_end_offset - self.log_end_offset)


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    cluster_id: str
    node_id: int
    leader_id: int  # -1: unknown
    leader_epoch: int
    high_watermark: int
    last_applied: int
    is_leader: bool
    has_quorum: bool
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    now_ms: int

    @property
    def leader_log_end_offset(self) -> int:
        leader = next((v for v in self.voters if v.node_id == self.leader_id), None)
        return leader.log_end_offset if leader else -1

    @property
    def max_follower_lag(self) -> int:
        lags = [
            v.lag(self.leader_log_end_offset) for v in self.voters if v.node_id != self.leader_id
        ]
        known = [lag for lag in lags if lag >= 0]
        return max(known, default=0)

    @property
    def max_follower_lag_time_ms(self) -> int:
        """Kafka: now - the oldest last-caught-up time among followers; -1 when unknown."""
        times = [
            v.last_caught_up_timestamp_ms
            for v in self.voters
            if v.node_id != self.leader_id and v.last_caught_up_timestamp_ms >= 0
        ]
        if not times:
            return 0 if len(self.voters) == 1 and self.leader_id >= 0 else -1
        return max(0, self.now_ms - min(times))


def describe_quorum_topics(status: QuorumStatus) -> list[dict[str, Any]]:
    """DescribeQuorum (API 55) v0-v1 `topics`, as plain dicts with kio's field names.

    For the node's handler: `build(DescribeQuorumResponse, {"error_code": 0, "topics":
    describe_quorum_topics(quorum.status())})`. One partition, `__cluster_metadata`-0, as
    KRaft reports it; the timestamps are dropped by v0's encoder.
    """

    def replica(state: ReplicaState) -> dict[str, Any]:
        return {
            "replica_id": state.node_id,
            "log_end_offset": state.log_end_offset,
            "last_fetch_timestamp": state.last_fetch_timestamp_ms,
            "last_caught_up_timestamp": state.last_caught_up_timestamp_ms,
        }

    return [
        {
            "topic_name": METADATA_TOPIC,
            "partitions": [
                {
                    "partition_index": 0,
                    "error_code": 0,
                    "leader_id": status.leader_id,
                    "leader_epoch": status.leader_epoch,
                    "high_watermark": status.high_watermark,
                    "current_voters": [replica(v) for v in status.voters],
                    "observers": [replica(o) for o in status.observers],
                }
            ],
        }
    ]
