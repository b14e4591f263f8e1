"""Property tests: replicas fed the same log agree on state and on fired watch events."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from trafka.metadata_quorum.tree import (
    Check,
    CloseSession,
    Create,
    Delete,
    Entry,
    ErrorResult,
    ExpireSession,
    Heartbeat,
    Multi,
    MultiOp,
    MultiResult,
    Noop,
    OpenSession,
    Operation,
    SetData,
    WatchEvent,
    WatchManager,
    ZNodeTree,
)

PATHS = ["/a", "/b", "/a/x", "/a/y", "/b/z", "/a/x/deep", "/q", "/q/"]
paths = st.sampled_from(PATHS)
versions = st.sampled_from([-1, 0, 1, 2])
data = st.binary(max_size=8)
sessions = st.integers(min_value=0, max_value=40)

single_ops: st.SearchStrategy[MultiOp] = st.one_of(
    st.builds(Create, paths, data, st.booleans(), st.booleans()),
    st.builds(Delete, paths, versions),
    st.builds(SetData, paths, data, versions),
    st.builds(Check, paths, versions),
)
operations: st.SearchStrategy[Operation] = st.one_of(
    single_ops,
    single_ops,
    st.builds(Multi, st.lists(single_ops, max_size=4).map(tuple)),
    st.builds(OpenSession, st.integers(0, 5000), st.sampled_from(["", "n1", "n2"])),
    st.builds(Heartbeat, sessions),
    st.builds(CloseSession, sessions),
    st.builds(ExpireSession, sessions, st.integers(0, 40)),
    st.just(Noop()),
)
entries = st.builds(
    Entry, st.sampled_from(["", "r1", "r2", "r3"]), sessions, st.integers(0, 9), operations
)
# A step is either a log entry or a local watch registration at that point of the log.
steps = st.lists(
    st.one_of(entries, st.tuples(st.sampled_from(["data", "child"]), paths)), max_size=60
)


class Replica:
    def __init__(self) -> None:
        self.tree = ZNodeTree()
        self.watches = WatchManager()
        self.events: list[WatchEvent] = []

    def step(self, step: Entry | tuple[str, str]) -> None:
        if isinstance(step, Entry):
            before = (list(self.tree.walk()), self.tree.sessions())
            applied = self.tree.apply(step)
            failed = isinstance(applied.result, ErrorResult) or (
                isinstance(applied.result, MultiResult) and applied.result.error_index >= 0
            )
            if failed or applied.duplicate:
                # A failed command (a multi above all) leaves no trace but the zxid.
                assert (list(self.tree.walk()), self.tree.sessions()) == before
                assert applied.changes == ()
            self.events += self.watches.trigger(applied.zxid, applied.changes)
        elif step[0] == "data":
            self.watches.add_data_watch(step[1])
        else:
            self.watches.add_child_watch(step[1])


@given(steps, st.integers(min_value=0, max_value=60))
def test_two_replicas_agree_and_a_snapshot_resumes_identically(
    log: list[Entry | tuple[str, str]], cut: int
) -> None:
    first, second = Replica(), Replica()
    for index, step in enumerate(log):
        first.step(step)
        if index == cut:
            # The second replica installs a snapshot of the first (as a lagging follower
            # does) and must continue in lockstep.
            second.tree = pickle.loads(pickle.dumps(first.tree))
            second.watches = pickle.loads(pickle.dumps(first.watches))
            second.events = list(first.events)
        else:
            second.step(step)
        assert first.tree.digest() == second.tree.digest()
    assert first.events == second.events
    check_invariants(first.tree)


def check_invariants(tree: ZNodeTree) -> None:
    """Structural invariants that hold after any sequence of entries."""
    live = {s.session_id: s for s in tree.sessions()}
    seen = 0
    for path, _data, stat in tree.walk():
        seen += 1
        assert stat.num_children == len(tree.children(path))
        if stat.ephemeral_owner:
            assert stat.num_children == 0
            assert path in live[stat.ephemeral_owner].ephemerals
    assert seen == tree.node_count
    for session in live.values():
        for path in session.ephemerals:
            found = tree.exists(path)
            assert found is not None and found.ephemeral_owner == session.session_id


def random_log(seed: int, count: int) -> list[Entry]:
    rng = random.Random(seed)
    log: list[Entry] = []
    for index in range(count):
        path = rng.choice(PATHS)
        kind = rng.randrange(6)
        op: Operation
        if kind == 0:
            op = OpenSession(1000, rng.choice(["", "n1"]))
        elif kind == 1:
            op = CloseSession(rng.randrange(0, index + 1))
        elif kind == 2:
            op = Delete(path)
        elif kind == 3:
            op = SetData(path, bytes([rng.randrange(256)]))
        else:
            op = Create(path, b"d", rng.random() < 0.3, rng.random() < 0.3)
        log.append(Entry("", rng.randrange(0, index + 1), index, op))
    return log


def test_replicas_agree_across_hash_seeds() -> None:
    """Set iteration order depends on PYTHONHASHSEED; the tree must not."""
    script = (
        "import sys\n"
        "from tests.metadata_quorum.test_tree_properties import random_log\n"
        "from trafka.metadata_quorum.tree import ZNodeTree\n"
        "t = ZNodeTree()\n"
        "for e in random_log(7, 400): t.apply(e)\n"
        "print(t.digest())\n"
    )
    digests = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        digests.append(out.stdout.strip())
    tree = ZNodeTree()
    for entry in random_log(7, 400):
        tree.apply(entry)
    assert digests == [tree.digest(), tree.digest()]
    assert json.dumps(digests)
