"""Replication (SEEDS §3, REP-*): pure logic, and the two shells that drive it.

- `ids`: the named ids shared by the controller and the replica manager.
- `epoch_cache`: the leader-epoch cache and the follower's truncation decision (KIP-101/279).
- `leader`: the leader's bookkeeping of one partition: follower LEOs, the high watermark, ISR
  shrink/expand and the acks=all purgatory decisions.

The pure modules have no trio, no sockets and no clock reads. The shells:

- `replica_manager`: owns the partitions' roles, the logs' appends and reads, the acks=all
  purgatory and the ISR writes; calls into the pure modules with `now_ms`.
- `replica_fetcher`: one fetcher task per source broker for the partitions this node follows.
"""
