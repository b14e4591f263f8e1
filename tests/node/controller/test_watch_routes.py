"""`watch_routes`: which watched path of the controller a fired watch makes stale."""

from __future__ import annotations

import pytest

from trafka.node.controller.watch_routes import (
    EVERYTHING,
    NOTHING,
    Dirty,
    PendingChanges,
    WatchedPath,
    route,
)

W = WatchedPath


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/brokers/ids", Dirty(paths=frozenset({W.BROKERS}))),
        ("/brokers/ids/3", Dirty(paths=frozenset({W.BROKERS}))),
        ("/brokers/topics", Dirty(paths=frozenset({W.TOPICS}))),
        (
            "/brokers/topics/orders",
            Dirty(paths=frozenset({W.TOPICS}), topics=frozenset({"orders"})),
        ),
        ("/admin/delete_topics", Dirty(paths=frozenset({W.DELETIONS}))),
        ("/admin/delete_topics/orders", Dirty(paths=frozenset({W.DELETIONS}))),
        ("/admin/reassign_partitions", Dirty(paths=frozenset({W.REASSIGNMENT}))),
        ("/admin/preferred_replica_election", Dirty(paths=frozenset({W.PREFERRED}))),
        ("/isr_change_notification", Dirty(paths=frozenset({W.ISR_CHANGES}))),
        ("/isr_change_notification/isr_change_0000000007", Dirty(paths=frozenset({W.ISR_CHANGES}))),
        ("/brokers", EVERYTHING),
        ("/admin", EVERYTHING),
        # not watched by the controller: partition states, configs, other components' paths
        ("/brokers/topics/orders/partitions/0/state", NOTHING),
        ("/brokers/topics/orders/partitions", NOTHING),
        ("/brokers/ids/3/extra", NOTHING),
        ("/brokers/idsx", NOTHING),
        ("/config/topics/orders", NOTHING),
        ("/controller", NOTHING),
        ("/controller_epoch", NOTHING),
        ("/admin/reassign_partitions_old", NOTHING),
    ],
)
def test_route(path: str, expected: Dirty) -> None:
    assert route(path) == expected


def test_dirty_wants() -> None:
    assert EVERYTHING.wants(W.ISR_CHANGES) and not EVERYTHING.empty
    assert NOTHING.empty and not NOTHING.wants(W.BROKERS)
    assert route("/brokers/topics/t").wants(W.TOPICS)
    assert not route("/brokers/topics/t").wants(W.BROKERS)


def test_pending_changes_accumulate_until_taken() -> None:
    pending = PendingChanges()
    assert pending.empty and pending.take() == NOTHING
    pending.mark_path("/brokers/topics/a")
    pending.mark_path("/brokers/topics/b")
    pending.mark_path("/admin/reassign_partitions")
    pending.mark_path("/brokers/topics/a/partitions/0/state")
    assert not pending.empty
    assert pending.take() == Dirty(
        paths=frozenset({W.TOPICS, W.REASSIGNMENT}), topics=frozenset({"a", "b"})
    )
    assert pending.empty and pending.take() == NOTHING


def test_everything_absorbs_and_resets() -> None:
    pending = PendingChanges()
    pending.mark_path("/brokers/topics/a")
    pending.mark_everything()
    pending.mark_path("/brokers/ids")
    assert pending.take() == EVERYTHING
    pending.mark_path("/brokers/ids")
    assert pending.take() == Dirty(paths=frozenset({W.BROKERS}))


def test_too_many_dirty_topics_collapse_into_everything() -> None:
    pending = PendingChanges(max_dirty_topics=3)
    for name in "abc":
        pending.mark_path(f"/brokers/topics/{name}")
    assert pending.take().topics == frozenset("abc")
    for name in "abcd":
        pending.mark_path(f"/brokers/topics/{name}")
    assert pending.take() == EVERYTHING
