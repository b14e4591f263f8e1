"""The leader's session deadlines (pure, with an explicit clock)."""

from __future__ import annotations

from trafka.metadata_quorum.sessions import ExpiryDecision, SessionTracker
from trafka.metadata_quorum.tree import SessionInfo


def info(session_id: int, heartbeat_zxid: int, timeout_ms: int = 1000) -> SessionInfo:
    return SessionInfo(session_id, timeout_ms, "", heartbeat_zxid, ())


def test_deadline_is_last_heartbeat_plus_timeout() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    tracker.reset([info(1, 1)], now_ms=0)
    assert tracker.expired([info(1, 1)], 400) == []
    assert tracker.expired([info(1, 5)], 800) == []  # heartbeat seen at 800
    assert tracker.expired([info(1, 5)], 1200) == []
    assert tracker.expired([info(1, 5)], 1700) == []
    assert tracker.expired([info(1, 5)], 1850) == [ExpiryDecision(1, 5)]
    assert tracker.expired([info(1, 5)], 1900) == []  # proposed once
    tracker.forget_proposals()
    assert tracker.expired([info(1, 5)], 2000) == [ExpiryDecision(1, 5)]


def test_new_leader_restarts_every_deadline() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    tracker.reset([info(1, 1), info(2, 2)], now_ms=10_000)
    assert tracker.expired([info(1, 1), info(2, 2)], 10_400) == []
    assert tracker.expired([info(1, 1), info(2, 2)], 10_800) == []
    assert [d.session_id for d in tracker.expired([info(1, 1), info(2, 2)], 11_000)] == [1, 2]


def test_a_pause_of_the_leader_resets_instead_of_expiring_everybody() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    tracker.reset([info(1, 1)], now_ms=0)
    assert tracker.expired([info(1, 1)], 5_000) == []  # jumped 5 s: reset
    assert tracker.expired([info(1, 1)], 5_400) == []
    assert tracker.expired([info(1, 1)], 5_800) == []
    assert tracker.expired([info(1, 1)], 6_100) == [ExpiryDecision(1, 1)]


def test_sessions_that_vanish_are_forgotten() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    tracker.reset([info(1, 1)], now_ms=0)
    assert tracker.expired([], 100) == []
    assert tracker.expired([info(2, 9)], 200) == []
    assert tracker.expired([info(2, 9)], 600) == []
    assert tracker.expired([info(2, 9)], 1_000) == []
    assert tracker.expired([info(2, 9)], 1_300) == [ExpiryDecision(2, 9)]
