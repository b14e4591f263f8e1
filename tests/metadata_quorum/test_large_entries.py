"""Large quorum entries: replicated whole, or refused before they are proposed.

pysyncobj sends an entry whose command is at least `appendEntriesBatchSizeBytes` long in
chunks and marks the last chunk by the command's length, although what it sends is the
pickled entry (longer: bytes above 0x7f take two bytes in pickle protocol 2). The followers
then unpickled a truncated entry (EOFError in `_onTick`, logged as "failed _onTick in
_autoTickThread") and could never append it: with pysyncobj's default of 64 KiB, one write of
100 KB of binary data stalled every node (the fuzzer's open finding, docs/reliability.md).
"""

from __future__ import annotations

import base64
import os
import pickle
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from tests.metadata_quorum.test_bridge import make_config
from tests.support.ports import free_ports
from trafka.metadata_quorum.bridge import open_metadata_quorum
from trafka.metadata_quorum.config import Voter
from trafka.metadata_quorum.local import LocalTransport
from trafka.metadata_quorum.tree import (
    MAX_DATA_BYTES,
    MAX_ENTRY_BYTES,
    BadArgumentsError,
    Create,
    Entry,
    Multi,
    SetData,
    entry_size,
)


def test_entry_size_is_exact_or_a_bound_below_the_limit() -> None:
    small = Entry("r", 1, 2, Create("/a/é", b"\xff" * 1000))
    assert len(pickle.dumps(small, protocol=2)) <= entry_size(small) <= MAX_ENTRY_BYTES
    big = Entry(
        "r", 1, 2, Multi(tuple(SetData(f"/n{i}", os.urandom(MAX_DATA_BYTES)) for i in range(6)))
    )
    assert entry_size(big) == len(pickle.dumps(big, protocol=2)) > MAX_ENTRY_BYTES
    ascii_big = Entry(
        "r", 1, 2, Multi(tuple(SetData(f"/n{i}", b"a" * MAX_DATA_BYTES) for i in range(5)))
    )
    assert entry_size(ascii_big) == len(pickle.dumps(ascii_big, protocol=2)) < MAX_ENTRY_BYTES


async def test_an_entry_over_the_limit_is_refused_before_it_is_proposed(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = make_config(1, (Voter(1, "127.0.0.1", port),), tmp_path)
    async with open_metadata_quorum(config, transport_factory=LocalTransport) as quorum:
        with trio.fail_after(10):
            await quorum.wait_ready()
        ops = [Create(f"/big{i}", os.urandom(MAX_DATA_BYTES)) for i in range(6)]
        with trio.fail_after(15), pytest.raises(BadArgumentsError, match="over"):
            await quorum.multi(ops)
        assert quorum.exists_local("/big0") is None
        with trio.fail_after(15), pytest.raises(BadArgumentsError, match="data over"):
            await quorum.create("/one", b"x" * (MAX_DATA_BYTES + 1))
        assert quorum.exists_local("/one") is None
        await quorum.multi(ops[:1])  # one MiB of binary data is fine
        assert quorum.exists_local("/big0") is not None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["binary", "text"])
async def test_a_large_write_reaches_every_voter(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    ports = free_ports(3)
    voters = tuple(Voter(i + 1, "127.0.0.1", port) for i, port in enumerate(ports))
    # 100 KB of binary data: a command of ~150 KB, pickled to ~225 KB, of which
    # pysyncobj's chunked transfer delivered 192 KiB; 900 KB of base64 text: a large JSON.
    data = os.urandom(100_000) if kind == "binary" else base64.b64encode(os.urandom(675_000))
    async with AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(
                open_metadata_quorum(make_config(i, voters, tmp_path, election_timeout_ms=1000))
            )
            for i in (1, 2, 3)
        ]
        with trio.fail_after(15):
            for node in nodes:
                await node.wait_ready()
        with trio.fail_after(20):  # without the fix: no follower appends it, no commit
            await nodes[0].create("/large", data)
            await nodes[0].create("/after", b"x")
        with trio.fail_after(20):
            for node in nodes:
                while node.exists_local("/after") is None:
                    await trio.sleep(0.02)
                assert node.get_local("/large")[0] == data
    # Without the fix the followers' tick threads raised ("failed _onTick in
    # _autoTickThread": the truncated pickle) until the leader happened to send the entry
    # together with others, seconds later.
    failed_ticks = [r for r in caplog.records if "_onTick" in r.getMessage()]
    assert failed_ticks == []
