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


def test_a_new_leader_starts_deadlines_from_what_it_saw_as_a_follower() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    # Following: session 1's heartbeat 5 first seen at 0 (and again at 300: same zxid);
    # session 2 heartbeats until 1200; session 3 appears only at the take-over.
    tracker.observe([info(1, 5), info(2, 6)], 0)
    tracker.observe([info(1, 5), info(2, 6)], 300)
    tracker.observe([info(1, 5), info(2, 8)], 1_200)
    sessions = [info(1, 5), info(2, 8), info(3, 9)]
    tracker.take_over(sessions, now_ms=1_500, grace_ms=400)
    # 1: seen at 0 + 1000 = 1000 has passed: the grace decides (1900), not 1500 + 1000.
    assert tracker.expired(sessions, 1_850) == []
    assert tracker.expired(sessions, 1_900) == [ExpiryDecision(1, 5)]
    # 2: seen at 1200 + 1000 = 2200, later than the grace; 3: a full timeout from 1500.
    assert tracker.expired(sessions, 2_150) == []
    assert tracker.expired(sessions, 2_200) == [ExpiryDecision(2, 8)]
    assert tracker.expired(sessions, 2_450) == []
    assert tracker.expired(sessions, 2_500) == [ExpiryDecision(3, 9)]


def test_an_observation_later_than_the_grace_wins_and_a_stale_one_is_not_used() -> None:
    tracker = SessionTracker(pause_threshold_ms=500)
    tracker.observe([info(1, 5), info(2, 6)], 1_000)
    # Session 2 heartbeated again (zxid 7) after the last look: not observed at zxid 7.
    sessions = [info(1, 5), info(2, 7)]
    tracker.take_over(sessions, now_ms=1_200, grace_ms=100)
    assert tracker.expired(sessions, 1_600) == []
    assert tracker.expired(sessions, 2_000) == [ExpiryDecision(1, 5)]  # 1000 + 1000
    assert tracker.expired(sessions, 2_150) == []
    assert tracker.expired(sessions, 2_200) == [ExpiryDecision(2, 7)]  # 1200 + 1000


def test_observations_are_used_once() -> None:
    tracker = SessionTracker(pause_threshold_ms=5_000)
    tracker.observe([info(1, 5)], 0)
    tracker.take_over([info(1, 5)], now_ms=100, grace_ms=100)
    # Leadership lost and regained without observing in between: a full timeout again.
    tracker.take_over([info(1, 5)], now_ms=400, grace_ms=100)
    assert tracker.expired([info(1, 5)], 1_350) == []
    assert tracker.expired([info(1, 5)], 1_400) == [ExpiryDecision(1, 5)]


def test_the_grace_never_exceeds_the_session_timeout() -> None:
    tracker = SessionTracker(pause_threshold_ms=5_000)
    tracker.observe([info(1, 5)], 0)
    tracker.take_over([info(1, 5)], now_ms=3_000, grace_ms=4_000)
    assert tracker.expired([info(1, 5)], 3_950) == []
    assert tracker.expired([info(1, 5)], 4_000) == [ExpiryDecision(1, 5)]
