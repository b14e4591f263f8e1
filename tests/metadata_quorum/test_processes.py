"""Real processes: three voters (and a learner) on loopback, killed and stopped for real."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import threading
import zlib
from pathlib import Path

import pytest

from tests.metadata_quorum.proc_support import (
    Member,
    leader_of,
    now,
    ports_of,
    quorum_cluster,
    settings_for,
)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
SESSION_TIMEOUT_S = 1.5
WRITES = 400


def same_digest(members: list[Member]) -> bool:
    members[0].ok("sync")
    replies = [m.ok("digest") for m in members]
    return len({(r["zxid"], r["digest"]) for r in replies}) == 1


def test_leader_sigkill_fails_over_fast_and_loses_no_committed_write(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        follower = next(m for m in members if m is not leader)
        follower.ok("create", path="/w")
        acknowledged = [follower.ok("create", path=f"/w/a{i}")["path"] for i in range(30)]
        old_term = leader.ok("status")["term"]
        leader.signal(signal.SIGKILL)
        killed_at = now()
        survivors = [m for m in members if m is not leader]

        def new_leader() -> bool:
            statuses = [m.request("status", timeout_s=2) for m in survivors]
            ids = {s["leader_id"] for s in statuses}
            return len(ids) == 1 and ids != {leader.node_id} and -1 not in ids

        wait_until(new_leader, timeout_s=5, interval_s=0.02, what="a new leader")
        assert now() - killed_at < 2.0
        assert survivors[0].ok("status")["term"] > old_term
        acknowledged += [survivors[i % 2].ok("create", path=f"/w/b{i}")["path"] for i in range(20)]
        for member in survivors:
            member.ok("sync")
            children = set(member.ok("children_local", path="/w")["children"])
            assert {p.rsplit("/", 1)[1] for p in acknowledged} <= children
        leader.start()  # the old leader rejoins from its journal and catches up
        wait_until(leader.ready.is_set, timeout_s=20, what="old leader restarted")
        wait_until(lambda: same_digest(members), timeout_s=10, what="replicas converge")


def test_leader_killed_during_concurrent_writes_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    """Chaos: the leader dies while two followers write concurrently; retries with the same
    request id keep every write at most once, and every acknowledged write survives."""
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        followers = [m for m in members if m is not leader]
        leader.ok("create", path="/load")
        for member in followers:
            member.ok("sync")
        results: dict[int, dict[str, object]] = {}

        def burst(member: Member) -> None:
            results[member.node_id] = member.request(
                "burst", timeout_s=60, path=f"/load/n{member.node_id}", n=WRITES, tasks=8
            )

        threads = [threading.Thread(target=burst, args=(m,)) for m in followers]
        for thread in threads:
            thread.start()

        def written() -> list[int]:
            return [
                leader.ok("stat_children", path=f"/load/n{m.node_id}")["count"] for m in followers
            ]

        wait_until(lambda: min(written()) >= 20, timeout_s=15, what="both writers under way")
        in_flight = written()
        leader.signal(signal.SIGKILL)
        for thread in threads:
            thread.join(timeout=90)
        leader.start()
        wait_until(leader.ready.is_set, timeout_s=20, what="old leader restarted")
        wait_until(lambda: same_digest(members), timeout_s=15, what="replicas converge")
        assert min(in_flight) < WRITES, in_flight  # the leader died mid-burst
        for member in followers:
            reply = results[member.node_id]
            assert reply["ok"] and reply["failed"] == [], reply
            acknowledged = reply["acknowledged"]
            assert isinstance(acknowledged, list) and len(acknowledged) == WRITES
            names = leader.ok("children_local", path=f"/load/n{member.node_id}")["children"]
            # Every acknowledged write is there, exactly once (no duplicate from a retry).
            assert sorted(p.rsplit("/", 1)[1] for p in acknowledged) == names


def test_sigkilled_nodes_ephemerals_vanish_within_the_session_timeout(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        victim = next(m for m in members if m is not leader)
        others = [m for m in members if m is not victim]
        leader.ok("create", path="/brokers")
        victim.ok("keep_ephemeral", path="/brokers/victim", data="reg")
        for member in others:
            member.ok("sync")
            assert member.ok("exists_local", path="/brokers/victim")["exists"]
        victim.signal(signal.SIGKILL)
        killed_at = now()
        for member in others:
            wait_until(
                lambda m=member: not m.ok("exists_local", path="/brokers/victim")["exists"],
                timeout_s=SESSION_TIMEOUT_S + 3,
                interval_s=0.02,
                what="ephemeral gone",
            )
        assert now() - killed_at <= SESSION_TIMEOUT_S + 1.0


def test_sigstopped_node_expires_and_recreates_its_ephemerals(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        sleeper = next(m for m in members if m is not leader)
        leader.ok("create", path="/brokers")
        sleeper.ok("keep_ephemeral", path="/brokers/sleeper", data="reg")
        old_session = sleeper.ok("session")["session_id"]
        leader.ok("sync")
        assert leader.ok("exists_local", path="/brokers/sleeper")["owner"] == old_session
        sleeper.signal(signal.SIGSTOP)
        wait_until(
            lambda: not leader.ok("exists_local", path="/brokers/sleeper")["exists"],
            timeout_s=SESSION_TIMEOUT_S + 3,
            interval_s=0.02,
            what="stopped node's ephemeral expired",
        )
        sleeper.signal(signal.SIGCONT)
        wait_until(
            lambda: any(e["event"] == "expired" for e in sleeper.events),
            timeout_s=10,
            what="the resumed node notices its expiry",
        )
        event = next(e for e in sleeper.events if e["event"] == "expired")
        assert event["old_session"] == old_session and event["recreated"] == ["/brokers/sleeper"]

        def recreated() -> bool:
            found = leader.ok("exists_local", path="/brokers/sleeper")
            return bool(found["exists"]) and found["owner"] == event["new_session"]

        wait_until(recreated, timeout_s=5, what="ephemeral re-created by the new session")


def test_a_paused_leader_does_not_expire_everybody_when_it_resumes(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader = leader_of(members)
        others = [m for m in members if m is not leader]
        leader.ok("create", path="/brokers")
        for member in members:
            member.ok("keep_ephemeral", path=f"/brokers/{member.node_id}", data="reg")
        sessions = {m.node_id: m.ok("session")["session_id"] for m in others}
        leader.signal(signal.SIGSTOP)
        gone = f"/brokers/{leader.node_id}"
        wait_until(
            lambda: not others[0].ok("exists_local", path=gone)["exists"],
            timeout_s=SESSION_TIMEOUT_S + 5,
            what="the paused leader's ephemeral expired by the new leader",
        )
        leader.signal(signal.SIGCONT)
        wait_until(
            lambda: any(e["event"] == "expired" for e in leader.events),
            timeout_s=10,
            what="the resumed node notices its expiry",
        )
        wait_until(
            lambda: others[0].ok("exists_local", path=gone)["exists"],
            timeout_s=5,
            what="re-created",
        )
        # The resumed ex-leader's clock jumped: it must not have expired the others.
        for member in others:
            member.ok("sync")
            assert member.ok("session")["session_id"] == sessions[member.node_id]
            assert not any(e["event"] == "expired" for e in member.events)
            for node in others:
                found = member.ok("exists_local", path=f"/brokers/{node.node_id}")
                assert found["exists"] and found["owner"] == sessions[node.node_id]


def test_all_voters_sigkilled_and_restarted_keep_the_tree(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path) as members:
        leader_of(members)
        members[0].ok("create", path="/config")
        for i in range(25):
            members[i % 3].ok("create", path=f"/config/c{i}", data=f"v{i}")
        for member in members:  # snapshots mid-way: the restart loads dump + journal
            member.ok("snapshot")
        for member in members:
            dump = Path(member.settings["data_dir"]) / "quorum.dump"
            wait_until(dump.exists, timeout_s=10, what="snapshot written")
        members[2].ok("set", path="/config/c3", data="changed")
        for i in range(25, 30):
            members[i % 3].ok("create", path=f"/config/c{i}", data=f"v{i}")
        for member in members:
            member.signal(signal.SIGKILL)
        for member in members:
            member.proc.wait(timeout=10)  # type: ignore[union-attr]
            member.start()
        for member in members:
            wait_until(member.ready.is_set, timeout_s=20, what="restarted")
        for member in members:
            member.ok("sync")
            assert member.ok("children_local", path="/config")["children"] == sorted(
                f"c{i}" for i in range(30)
            )
            assert member.ok("get_local", path="/config/c3")["data"] == "changed"
            assert member.ok("get_local", path="/config/c7")["data"] == "v7"
        wait_until(lambda: same_digest(members), timeout_s=10, what="replicas converge")


def test_learner_sees_every_change_and_its_watches_fire(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path, voters=3, learners=1) as members:
        voters, learner = members[:3], members[3]
        leader = leader_of(voters)
        leader.ok("create", path="/topics")
        learner.ok("sync")
        assert learner.ok("children_local", path="/topics", watch=True)["children"] == []
        voters[1].ok("create", path="/topics/orders", data="x")
        wait_until(
            lambda: any(
                e["event"] == "NODE_CHILDREN_CHANGED" and e["path"] == "/topics"
                for e in learner.events
            ),
            timeout_s=5,
            what="learner child watch fired",
        )
        assert learner.ok("get_local", path="/topics/orders", watch=True)["data"] == "x"
        voters[2].ok("set", path="/topics/orders", data="y")
        wait_until(
            lambda: any(e["event"] == "NODE_DATA_CHANGED" for e in learner.events),
            timeout_s=5,
            what="learner data watch fired",
        )
        learner.ok("create", path="/topics/from-learner")  # forwarded to the leader
        leader.ok("sync")
        assert leader.ok("exists_local", path="/topics/from-learner")["exists"]
        wait_until(lambda: same_digest(members), timeout_s=10, what="learner converges")
        assert 4 not in {m.ok("status")["leader_id"] for m in members}


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (os.system, (f"touch {self.path}",))


def test_pickled_payload_on_the_quorum_port_executes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with quorum_cluster(tmp_path) as members:
        leader_of(members)
        payload = zlib.compress(pickle.dumps(_Marker(str(marker))), 3)
        frame = struct.pack("i", len(payload)) + payload
        for port in ports_of(members).values():
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(frame)
                # The node parsed the frame and hung up on it (it failed to authenticate).
                try:
                    assert sock.recv(1) == b""
                except ConnectionResetError:
                    pass
        # The cluster keeps working.
        members[0].ok("create", path="/after")
        for member in members:
            member.ok("sync")
            assert member.ok("exists_local", path="/after")["exists"]
        assert not marker.exists()
        # Control: the same frame really would run if unpickled.
        pickle.loads(zlib.decompress(payload))
        assert marker.exists()


def test_settings_helper_uses_short_timeouts(tmp_path: Path) -> None:
    settings = settings_for(1, "1@127.0.0.1:20000", tmp_path)
    assert settings["session_timeout_ms"] == 1500 and settings["election_timeout_ms"] == 200
