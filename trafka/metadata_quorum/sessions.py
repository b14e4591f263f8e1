"""Session expiry decisions, made only by the quorum leader (KR-02), as a pure object.

The leader keeps, for every session in the tree, a local deadline = the time it last heard
a heartbeat (applied a Heartbeat entry, or the session's creation) + the session timeout.
When a deadline passes it proposes `ExpireSession(session_id, last_heartbeat_zxid)`; the
tree ignores the proposal if a newer heartbeat was applied meanwhile.

Deadlines live only in the leader's memory and use its monotonic clock. Heartbeats are log
entries, so every node applies them; a follower notes, on its own clock, when it first saw
each session's latest heartbeat applied (`observe`). A node that becomes leader
(`take_over`) starts each deadline from that observation, but never sooner than a grace
period from now (the live members need a moment to reach the new leader with a heartbeat);
a session it has no observation of gets a full timeout from now (ZooKeeper's rule for every
session). So a session whose owner died together with the old leader (a combined node: its
broker, its controller and the quorum leader at once) expires about one session timeout
after its last heartbeat, not an election plus a full timeout later. An observation is never
earlier than the commit of the heartbeat it notes, so no deadline is earlier than the old
leader's would have been. A clock jump larger than
`pause_threshold_ms` between two `expired()` calls (the leader itself was SIGSTOPped,
swapped out, or its VM paused) is treated the same way: the leader cannot tell who was alive
while it was not looking, so it restarts every deadline instead of expiring everybody.

Kafka's names for the two settings: `broker.session.timeout.ms` (default 9000) and
`broker.heartbeat.interval.ms` (default 2000).
"""

from __future__ import annotations

from dataclasses import dataclass

from trafka.metadata_quorum.tree import SessionInfo

BROKER_SESSION_TIMEOUT_MS_DEFAULT = 9000
BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT = 2000


@dataclass(frozen=True, slots=True)
class ExpiryDecision:
    session_id: int
    last_heartbeat_zxid: int


class SessionTracker:
    """Leader-side deadlines. Feed it the tree's sessions and the time; ask who expired."""

    def __init__(self, pause_threshold_ms: int = 1000) -> None:
        self._deadline_ms: dict[int, int] = {}
        self._heartbeat_zxid: dict[int, int] = {}
        self._proposed: dict[int, int] = {}
        self._last_check_ms: int | None = None
        self._pause_threshold_ms = pause_threshold_ms
        self._observed: dict[int, tuple[int, int]] = {}
        """As a follower: session id -> (latest heartbeat zxid, when first seen here)."""

    def observe(self, sessions: list[SessionInfo], now_ms: int) -> None:
        """As a follower: note when each session's latest heartbeat was first seen applied."""
        observed = {}
        for session in sessions:
            seen = self._observed.get(session.session_id)
            if seen is None or seen[0] != session.last_heartbeat_zxid:
                seen = (session.last_heartbeat_zxid, now_ms)
            observed[session.session_id] = seen
        self._observed = observed

    def take_over(self, sessions: list[SessionInfo], now_ms: int, grace_ms: int) -> None:
        """Become leader: each deadline from this node's observation of the session's latest
        heartbeat (+ its timeout), but at least `grace_ms` from now; a full timeout from now
        for a session not observed at its current heartbeat."""
        self.reset(sessions, now_ms)
        for session in sessions:
            seen = self._observed.get(session.session_id)
            if seen is not None and seen[0] == session.last_heartbeat_zxid:
                grace = min(grace_ms, session.timeout_ms)
                self._deadline_ms[session.session_id] = max(
                    seen[1] + session.timeout_ms, now_ms + grace
                )
        self._observed.clear()

    def reset(self, sessions: list[SessionInfo], now_ms: int) -> None:
        """Become leader (or resume after a pause): every deadline restarts from now."""
        self._deadline_ms = {s.session_id: now_ms + s.timeout_ms for s in sessions}
        self._heartbeat_zxid = {s.session_id: s.last_heartbeat_zxid for s in sessions}
        self._proposed.clear()
        self._last_check_ms = now_ms

    def expired(self, sessions: list[SessionInfo], now_ms: int) -> list[ExpiryDecision]:
        """Sessions whose deadline passed; each is returned once per heartbeat zxid."""
        if self._last_check_ms is None or now_ms - self._last_check_ms > self._pause_threshold_ms:
            self.reset(sessions, now_ms)
            return []
        self._last_check_ms = now_ms
        live: set[int] = set()
        decisions: list[ExpiryDecision] = []
        for session in sessions:
            session_id = session.session_id
            live.add(session_id)
            if self._heartbeat_zxid.get(session_id) != session.last_heartbeat_zxid:
                # New session or a heartbeat applied since the last look: heard from now.
                self._heartbeat_zxid[session_id] = session.last_heartbeat_zxid
                self._deadline_ms[session_id] = now_ms + session.timeout_ms
                self._proposed.pop(session_id, None)
                continue
            if now_ms < self._deadline_ms[session_id]:
                continue
            if self._proposed.get(session_id) == session.last_heartbeat_zxid:
                continue  # already proposed; the entry is on its way
            self._proposed[session_id] = session.last_heartbeat_zxid
            decisions.append(ExpiryDecision(session_id, session.last_heartbeat_zxid))
        for gone in set(self._deadline_ms) - live:
            self._deadline_ms.pop(gone, None)
            self._heartbeat_zxid.pop(gone, None)
            self._proposed.pop(gone, None)
        return decisions

    def forget_proposals(self) -> None:
        """A proposal may have been lost (leader change, timeout): allow proposing again."""
        self._proposed.clear()
