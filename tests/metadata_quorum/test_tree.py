"""ZooKeeper's rules on the pure znode tree, one behaviour per test."""

from __future__ import annotations

import pickle

import pytest

import trafka.metadata_quorum.tree as tree_module
from trafka.metadata_quorum.tree import (
    MAX_DATA_BYTES,
    MAX_PATH_DEPTH,
    Applied,
    BadArgumentsError,
    Change,
    Check,
    Chroot,
    CloseSession,
    Create,
    CreateResult,
    Delete,
    DeleteResult,
    Entry,
    ErrorCode,
    ErrorResult,
    EventType,
    ExpireSession,
    Heartbeat,
    Multi,
    MultiResult,
    NoNodeError,
    Noop,
    NoopResult,
    OpenSession,
    Operation,
    SessionResult,
    SetData,
    SetDataResult,
    WatchEvent,
    WatchManager,
    ZNodeTree,
    validate_path,
)

_counter = iter(range(1, 10**9))


def run(tree: ZNodeTree, op: Operation, *, session: int = 0, request_id: str = "") -> Applied:
    return tree.apply(Entry(request_id, session, 1_000 + next(_counter), op))


def ok(tree: ZNodeTree, op: Operation, *, session: int = 0) -> object:
    result = run(tree, op, session=session).result
    assert not isinstance(result, ErrorResult), result
    return result


def code(tree: ZNodeTree, op: Operation, *, session: int = 0) -> ErrorCode:
    result = run(tree, op, session=session).result
    assert isinstance(result, ErrorResult), result
    return result.code


def open_session(tree: ZNodeTree, owner: str = "", timeout_ms: int = 2000) -> int:
    result = ok(tree, OpenSession(timeout_ms, owner))
    assert isinstance(result, SessionResult)
    return result.session_id


def test_create_get_and_stat() -> None:
    tree = ZNodeTree()
    assert ok(tree, Create("/a", b"x")) == CreateResult("/a")
    data, stat = tree.get("/a")
    assert data == b"x"
    assert (stat.version, stat.cversion, stat.data_length, stat.num_children) == (0, 0, 1, 0)
    assert stat.czxid == stat.mzxid == tree.last_zxid
    assert stat.ephemeral_owner == 0
    _, root = tree.get("/")
    assert root.num_children == 1 and root.cversion == 1 and root.pzxid == stat.czxid


def test_create_requires_parent_and_rejects_duplicates() -> None:
    tree = ZNodeTree()
    assert code(tree, Create("/a/b")) == ErrorCode.NO_NODE
    ok(tree, Create("/a"))
    assert code(tree, Create("/a")) == ErrorCode.NODE_EXISTS
    assert code(tree, Create("/")) == ErrorCode.NODE_EXISTS


def test_set_data_with_expected_version() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/a", b"0"))
    result = ok(tree, SetData("/a", b"1", version=0))
    assert isinstance(result, SetDataResult) and result.stat.version == 1
    assert code(tree, SetData("/a", b"2", version=0)) == ErrorCode.BAD_VERSION
    assert tree.get("/a")[0] == b"1"
    ok(tree, SetData("/a", b"3"))  # -1: any version
    _, stat = tree.get("/a")
    assert stat.version == 2 and stat.mzxid == tree.last_zxid and stat.czxid < stat.mzxid
    assert code(tree, SetData("/missing", b"")) == ErrorCode.NO_NODE


def test_delete_rules() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/a"))
    ok(tree, Create("/a/b"))
    assert code(tree, Delete("/a")) == ErrorCode.NOT_EMPTY
    assert code(tree, Delete("/a/b", version=5)) == ErrorCode.BAD_VERSION
    assert ok(tree, Delete("/a/b", version=0)) == DeleteResult()
    assert code(tree, Delete("/a/b")) == ErrorCode.NO_NODE
    assert code(tree, Delete("/")) == ErrorCode.BAD_ARGUMENTS
    ok(tree, Delete("/a"))
    assert tree.children("/") == []


def test_sequential_numbering_uses_parent_cversion() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/q"))
    first = ok(tree, Create("/q/n-", sequential=True))
    assert first == CreateResult("/q/n-0000000000")
    ok(tree, Create("/q/plain"))
    ok(tree, Delete("/q/plain"))
    third = ok(tree, Create("/q/n-", sequential=True))
    # cversion counts creates and deletes of children, as in ZooKeeper.
    assert third == CreateResult("/q/n-0000000003")
    assert ok(tree, Create("/q/", sequential=True)) == CreateResult("/q/0000000004")
    assert tree.children("/q") == ["0000000004", "n-0000000000", "n-0000000003"]


def test_ephemerals_need_a_live_session_and_have_no_children() -> None:
    tree = ZNodeTree()
    assert code(tree, Create("/e", ephemeral=True)) == ErrorCode.BAD_ARGUMENTS
    assert code(tree, Create("/e", ephemeral=True), session=999) == ErrorCode.SESSION_EXPIRED
    session = open_session(tree)
    ok(tree, Create("/e", ephemeral=True), session=session)
    assert tree.get("/e")[1].ephemeral_owner == session
    assert code(tree, Create("/e/child")) == ErrorCode.NO_CHILDREN_FOR_EPHEMERALS
    seq = ok(tree, Create("/s-", ephemeral=True, sequential=True), session=session)
    assert isinstance(seq, CreateResult)
    info = tree.session(session)
    assert info is not None and info.ephemerals == ("/e", seq.path)


def test_close_session_deletes_its_ephemerals_in_the_same_entry() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/brokers"))
    s1, s2 = open_session(tree, "a"), open_session(tree, "b")
    ok(tree, Create("/brokers/1", ephemeral=True), session=s1)
    ok(tree, Create("/brokers/2", ephemeral=True), session=s2)
    applied = run(tree, CloseSession(s1))
    assert isinstance(applied.result, SessionResult)
    assert tree.children("/brokers") == ["2"]
    assert Change(EventType.NODE_DELETED, "/brokers/1") in applied.changes
    assert applied.ended_sessions[0].deleted_paths == ("/brokers/1",)
    assert not applied.ended_sessions[0].expired
    assert code(tree, Create("/x", ephemeral=True), session=s1) == ErrorCode.SESSION_EXPIRED
    assert code(tree, Create("/y"), session=s1) == ErrorCode.SESSION_EXPIRED


def test_expire_session_is_ignored_when_a_heartbeat_came_later() -> None:
    tree = ZNodeTree()
    session = open_session(tree)
    ok(tree, Create("/e", ephemeral=True), session=session)
    seen = tree.session(session)
    assert seen is not None
    ok(tree, Heartbeat(session))
    assert code(tree, ExpireSession(session, seen.last_heartbeat_zxid)) == ErrorCode.SESSION_EXPIRED
    assert tree.exists("/e") is not None
    fresh = tree.session(session)
    assert fresh is not None
    applied = run(tree, ExpireSession(session, fresh.last_heartbeat_zxid))
    assert applied.ended_sessions[0].expired
    assert tree.exists("/e") is None
    assert code(tree, Heartbeat(session)) == ErrorCode.SESSION_EXPIRED


def test_reopening_with_the_same_owner_replaces_the_old_session() -> None:
    tree = ZNodeTree()
    old = open_session(tree, "node-1")
    ok(tree, Create("/e", ephemeral=True), session=old)
    new = open_session(tree, "node-1")
    assert new != old and tree.exists("/e") is None
    assert [s.session_id for s in tree.sessions()] == [new]


def test_multi_is_all_or_nothing() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/a", b"v0"))
    before = tree.digest()
    result = ok(
        tree,
        Multi((Create("/b"), SetData("/a", b"v1"), Check("/a", 7), Create("/c"))),
    )
    assert isinstance(result, MultiResult)
    assert result.error_index == 2
    assert [getattr(r, "code", None) for r in result.results] == [
        ErrorCode.OK,
        ErrorCode.OK,
        ErrorCode.BAD_VERSION,
        ErrorCode.RUNTIME_INCONSISTENCY,
    ]
    assert tree.exists("/b") is None and tree.get("/a")[0] == b"v0"
    # Only the zxid moved: the failed multi left nothing else behind.
    assert tree.get("/a")[1].version == 0 and tree.get("/")[1].cversion == 1
    assert before != tree.digest()
    good = ok(tree, Multi((Create("/b"), SetData("/a", b"v1", 0), Check("/a", 1), Delete("/b"))))
    assert isinstance(good, MultiResult) and good.error_index == -1
    assert tree.get("/a")[0] == b"v1" and tree.exists("/b") is None
    _, root = tree.get("/")
    assert root.cversion == 3  # create + delete of /b


def test_failed_multi_restores_sessions_and_sequence_numbers() -> None:
    tree = ZNodeTree()
    session = open_session(tree)
    ok(tree, Create("/q"))
    ok(tree, Create("/q/e", ephemeral=True), session=session)
    failed = ok(
        tree,
        Multi((Delete("/q/e"), Create("/q/s-", sequential=True), Delete("/nope"))),
        session=session,
    )
    assert isinstance(failed, MultiResult) and failed.error_index == 2
    info = tree.session(session)
    assert info is not None and info.ephemerals == ("/q/e",)
    assert ok(tree, Create("/q/s-", sequential=True)) == CreateResult("/q/s-0000000001")


def test_check_outside_multi_is_rejected() -> None:
    tree = ZNodeTree()
    assert code(tree, Check("/", 0)) == ErrorCode.BAD_ARGUMENTS


def test_request_ids_apply_at_most_once() -> None:
    tree = ZNodeTree()
    ok(tree, Create("/q"))
    first = run(tree, Create("/q/n-", sequential=True), request_id="r1")
    again = run(tree, Create("/q/n-", sequential=True), request_id="r1")
    assert again.duplicate and again.result == first.result and again.changes == ()
    assert tree.children("/q") == ["n-0000000000"]
    failed = run(tree, Create("/q"), request_id="r2")
    assert run(tree, Create("/q"), request_id="r2").result == failed.result


def test_request_id_window_is_bounded_and_weighs_multis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_module, "REQUEST_ID_WINDOW", 10)
    tree = ZNodeTree()
    for index in range(10):
        run(tree, Noop(), request_id=f"r{index}")
    assert run(tree, Noop(), request_id="r0").duplicate  # still remembered
    run(tree, Multi(tuple(Create(f"/m{i}") for i in range(5))), request_id="big")
    # The 6-unit multi pushed the 6 oldest ids out: r0 would now apply again.
    assert not run(tree, Noop(), request_id="r0").duplicate
    assert run(tree, Noop(), request_id="big").duplicate


def test_limits_on_data_and_paths() -> None:
    tree = ZNodeTree()
    assert code(tree, Create("/big", b"x" * (MAX_DATA_BYTES + 1))) == ErrorCode.BAD_ARGUMENTS
    deep = "/a" * (MAX_PATH_DEPTH + 1)
    assert code(tree, Create(deep)) == ErrorCode.BAD_ARGUMENTS
    for bad in ("", "a", "/a/", "//", "/a/./b", "/a/../b", "/a\x00"):
        with pytest.raises(BadArgumentsError):
            validate_path(bad)
        assert code(tree, Create(bad)) == ErrorCode.BAD_ARGUMENTS
    with pytest.raises(NoNodeError):
        tree.get("/nothing")


def test_malformed_commands_never_raise() -> None:
    tree = ZNodeTree()
    for op in (Create(5, b""), SetData("/", "str"), Multi([Create("/x")]), Multi((Noop(),))):  # type: ignore[arg-type]
        result = run(tree, op).result
        assert isinstance(result, ErrorResult | MultiResult)
    assert tree.children("/") == []


def test_noop_is_a_barrier_with_a_zxid() -> None:
    tree = ZNodeTree()
    assert ok(tree, Noop()) == NoopResult(1)


def test_snapshot_round_trip_keeps_everything() -> None:
    tree = ZNodeTree()
    session = open_session(tree, "n")
    ok(tree, Create("/a", b"1"))
    ok(tree, Create("/a/e", ephemeral=True), session=session)
    clone = pickle.loads(pickle.dumps(tree))
    assert clone.digest() == tree.digest()
    ok(clone, CloseSession(session))
    ok(tree, CloseSession(session))
    assert clone.digest() == tree.digest()


def test_watches_fire_once() -> None:
    tree = ZNodeTree()
    watches = WatchManager()
    watches.add_data_watch("/a")  # exists-watch on an absent node
    watches.add_child_watch("/")
    applied = run(tree, Create("/a"))
    events = watches.trigger(applied.zxid, applied.changes)
    assert events == [
        WatchEvent(EventType.NODE_CREATED, "/a", applied.zxid),
        WatchEvent(EventType.NODE_CHILDREN_CHANGED, "/", applied.zxid),
    ]
    applied = run(tree, SetData("/a", b"x"))
    assert watches.trigger(applied.zxid, applied.changes) == []  # one-shot
    watches.add_data_watch("/a")
    watches.add_child_watch("/a")
    applied = run(tree, Delete("/a"))
    assert watches.trigger(applied.zxid, applied.changes) == [
        WatchEvent(EventType.NODE_DELETED, "/a", applied.zxid)
    ]
    assert watches.watch_count == 0


def test_fire_all_after_a_gap() -> None:
    watches = WatchManager()
    watches.add_data_watch("/b")
    watches.add_child_watch("/a")
    assert [e.path for e in watches.fire_all(9)] == ["/b", "/a"]
    assert watches.watch_count == 0


def test_watch_count_is_bounded() -> None:
    watches = WatchManager(max_watches=1)
    watches.add_data_watch("/a")
    with pytest.raises(BadArgumentsError):
        watches.add_child_watch("/a")


def test_chroot_maps_paths_both_ways() -> None:
    chroot = Chroot("/kafka")
    assert chroot.to_server("/") == "/kafka"
    assert chroot.to_server("/brokers/ids") == "/kafka/brokers/ids"
    assert chroot.to_client("/kafka/brokers") == "/brokers"
    assert chroot.to_client("/kafka") == "/"
    assert chroot.to_client("/kafkaesque") is None
    assert Chroot("").to_server("/a") == "/a" and Chroot("/").to_client("/a") == "/a"
    with pytest.raises(BadArgumentsError):
        Chroot("kafka")
