"""Coordinator settings, with Kafka's names and defaults (§14 of SEEDS.md, KIP-134/345/389)."""

from __future__ import annotations

from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker settings the coordinator obeys.

    group_initial_rebalance_delay_ms: `group.initial.rebalance.delay.ms` (KIP-134), 3000.
    group_min_session_timeout_ms / group_max_session_timeout_ms: 6000 / 1800000; a JoinGroup
        outside them gets INVALID_SESSION_TIMEOUT.
    group_max_size: `group.max.size` (KIP-389), unbounded in Kafka (Integer.MAX_VALUE).
    offsets_retention_minutes: `offsets.retention.minutes`, 10080 (7 days; the seeds' "1 day"
        is the pre-2.0 default, SEEDS §16-D20).
    offsets_retention_check_interval_ms: `offsets.retention.check.interval.ms`, 600000.
    offset_metadata_max_bytes: `offset.metadata.max.bytes`, 4096.
    offsets_topic_num_partitions: `offsets.topic.num.partitions`, 50.
    new_member_join_timeout_ms: how long a member that joined but never completed a join may
        wait in a rebalance (Kafka's `NewMemberJoinTimeoutMs`, 5 minutes).
    max_groups: our own bound on the number of groups one coordinator partition holds.
    consumer_session_timeout_ms: `group.consumer.session.timeout.ms` (KIP-848), 45000.
    consumer_heartbeat_interval_ms: `group.consumer.heartbeat.interval.ms`, 5000.
    consumer_min/max_session_timeout_ms, consumer_min/max_heartbeat_interval_ms:
        `group.consumer.min/max.session.timeout.ms` (45000 / 60000) and
        `group.consumer.min/max.heartbeat.interval.ms` (5000 / 15000): the bounds of the
        per-group `consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms`.
    consumer_migration_policy: `group.consumer.migration.policy` (KIP-848): `bidirectional`
        (Kafka 4's default), `upgrade`, `downgrade` or `disabled`.
    consumer_assignors: `group.consumer.assignors`, ("uniform", "range"); the first is the
        default of a group whose members name none.
    consumer_max_size: `group.consumer.max.size`, unbounded in Kafka.
    max_members_per_group: our own bound on members + KIP-394 pending members of one group,
        whatever `group.max.size` says (a client looping on JoinGroup with an empty member
        id must not grow the pending set without limit).
    """

    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    new_member_join_timeout_ms: int = 300_000
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_migration_policy: str = "bidirectional"
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1
    max_groups: int = 100_000
    max_members_per_group: int = 10_000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
