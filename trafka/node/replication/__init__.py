"""Pure replication logic (SEEDS §3, REP-*): no trio, no sockets, no clock reads.

- `ids`: the named ids shared by the controller and the replica manager.
- `epoch_cache`: the leader-epoch cache and the follower's truncation decision (KIP-101/279).
- `leader`: the leader's bookkeeping of one partition: follower LEOs, the high watermark, ISR
  shrink/expand and the acks=all purgatory decisions.

The replica manager (the shell that owns logs, fetchers and the purgatory's timers) lives
elsewhere in `trafka.node` and calls into these modules with `now_ms`.
"""
