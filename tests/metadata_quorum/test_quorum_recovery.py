"""The documented recovery of a damaged voter (docs/metadata-quorum.md, "Recovering a damaged
quorum data dir"), on three real quorum processes: the damaged voter refuses to start; with
its quorum data dir moved aside it starts empty, catches up from the leader and serves the
same tree (same digest) while the other two kept committing."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from tests.metadata_quorum.proc_support import leader_of, quorum_cluster
from tests.support.waiting import wait_until
from trafka.metadata_quorum.datafiles import JOURNAL_HEADER_SIZE

pytestmark = [pytest.mark.slow]


def test_a_voter_with_a_damaged_journal_recovers_from_the_others(tmp_path: Path) -> None:
    with quorum_cluster(tmp_path, voters=3) as members:
        leader = leader_of(members)
        for index in range(20):
            leader.ok("create", path=f"/r{index}", data="v")
        damaged = next(m for m in members if m is not leader)
        damaged.ok("sync")
        damaged.kill()
        data_dir = Path(damaged.settings["data_dir"])
        journal = data_dir / "quorum.journal"
        raw = bytearray(journal.read_bytes())
        raw[JOURNAL_HEADER_SIZE : JOURNAL_HEADER_SIZE + 4] = struct.pack("<I", 0x7FFFFFF0)
        journal.write_bytes(bytes(raw))

        damaged.start()  # refuses: QuorumDataError before pysyncobj reads anything
        assert damaged.proc is not None
        assert damaged.proc.wait(timeout=60) != 0
        assert not damaged.ready.is_set()

        # the others go on committing meanwhile
        survivor = leader_of([m for m in members if m is not damaged])
        for index in range(20, 30):
            survivor.ok("create", path=f"/r{index}", data="v")

        # recovery: keep the damaged dir for inspection, start with an empty one
        shutil.move(data_dir, data_dir.with_name(data_dir.name + ".damaged"))
        damaged.start()
        wait_until(damaged.ready.is_set, timeout_s=30, what="the recovered voter ready")
        damaged.ok("sync")
        expected = survivor.ok("digest")
        wait_until(
            lambda: damaged.ok("digest")["digest"] == survivor.ok("digest")["digest"],
            timeout_s=20,
            what="the recovered voter's tree equal to the leader's",
        )
        assert damaged.ok("get_local", path="/r29")["data"] == "v"
        assert expected["zxid"] >= 30
