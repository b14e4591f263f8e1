"""Fetch from follower (KIP-392): which replica a consumer should read a partition from.

Pure (STYLE 1): the leader's bookkeeping, the brokers' racks and `now_ms` in, a broker id
(or None: read from the leader) out. The replica manager calls `preferred_read_replica`
for a consumer Fetch v11+ (the request carries client metadata) on a partition it leads;
a result other than None is sent as `preferred_read_replica` with no records, and the
consumer fetches from that follower from then on (librdkafka, the Java client).

`replica.selector.class` (Kafka's broker config, default none = always the leader):

* unset or empty: no selection, every consumer reads from the leader;
* `org.apache.kafka.common.replica.RackAwareReplicaSelector` (`RACK_AWARE_SELECTOR`):
  Kafka's selector. A client without `client.rack`, or whose rack has no eligible replica,
  or whose rack holds the leader, reads from the leader; otherwise the eligible replica of
  its rack with the highest log end offset, ties broken by the most recent catch-up;
* anything else is refused at startup (Kafka fails to load an unknown class); custom
  selector classes are not supported.

Eligible followers (Kafka's `ReplicaManager.findPreferredReadReplica`): in the ISR, alive
(registered, so it has an endpoint), and with a log end offset (as the leader last saw it)
at or past the consumer's fetch offset, so the follower can answer the offset at once.
Kafka also requires the follower's log start offset to be at or before the fetch offset;
trafka's leader does not track followers' log start offsets (followers follow the
leader's by retention/DeleteRecords), so that check is left out: a follower that deleted
the offset answers OFFSET_OUT_OF_RANGE and the consumer goes back to the leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trafka.node.replication.leader import PartitionLeaderState

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = frozenset({RACK_AWARE_SELECTOR})


class UnknownReplicaSelector(ValueError):
    """`replica.selector.class` names a class trafka does not implement."""


def check_selector_class(name: str | None) -> str | None:
    """The configured selector (None: none); `UnknownReplicaSelector` for any other class."""
    if name is None or not name.strip():
        return None
    name = name.strip()
    if name not in SELECTORS:
        raise UnknownReplicaSelector(
            f"replica.selector.class: {name!r} is not supported (only {RACK_AWARE_SELECTOR})"
        )
    return name


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the selector sees it (Kafka's `ReplicaView`)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def rack_aware_select(
    client_rack: str, leader: ReplicaView, candidates: list[ReplicaView]
) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector over `candidates` (which include the leader)."""
    if not client_rack:
        return leader
    same_rack = [r for r in candidates if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))


def preferred_read_replica(
    state: PartitionLeaderState,
    *,
    selector: str | None,
    client_rack: str,
    fetch_offset: int,
    leader_log_end_offset: int,
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int | None:
    """The follower a consumer should read from, or None for the leader (this broker).

    `racks` maps every live broker to its `broker.rack`; a replica absent from it has no
    endpoint and is never chosen."""
    if selector is None:
        return None
    leader = ReplicaView(
        int(state.local_broker), racks.get(int(state.local_broker)), leader_log_end_offset, 0
    )
    candidates = [leader]
    for broker_id, follower in state.followers.items():
        if broker_id not in state.isr or int(broker_id) not in racks:
            continue
        if int(follower.log_end_offset) < fetch_offset:
            continue
        candidates.append(
            ReplicaView(
                int(broker_id),
                racks[int(broker_id)],
                int(follower.log_end_offset),
                max(0, now_ms - follower.last_caught_up_time_ms),
            )
        )
    chosen = rack_aware_select(client_rack, leader, candidates)
    return None if chosen is leader else chosen.broker_id
