"""kafkajs 2.2.4 (Node.js) against one real knode.

Needs `node` and `tests/js/node_modules/kafkajs` (`make test` runs `npm install` in tests/js).
When either is missing the test FAILS with the reason: it is not skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.messages import BASE_TIMESTAMP_MS, check_order_per_partition
from tests.support.cluster import KnodeCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
KAFKAJS = REPO / "tests" / "js" / "node_modules" / "kafkajs"
SCRIPT = Path(__file__).with_name("kafkajs_client.js")


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("kafkajs tests need Node.js: `node` is not on PATH")
    if not KAFKAJS.is_dir():
        pytest.fail(
            f"kafkajs is not installed: run `make test-deps` (npm install in {KAFKAJS.parents[1]})"
        )
    return node


def test_kafkajs_produce_consume_admin(knode: KnodeCluster) -> None:
    node = _node()
    count = 10_000
    completed = subprocess.run(
        [node, str(SCRIPT), knode.bootstrap_servers, str(KAFKAJS), "kjs-topic", str(count)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["afterValidateOnly"] is False
    assert result["retentionMs"] == "3600000"
    received = result["received"]
    assert len(received) == count
    assert sorted(int(v.split("-")[2]) for _, _, v, _, _, _ in received) == list(range(count))
    check_order_per_partition((p, o, v.encode()[3:]) for p, o, v, _, _, _ in received)
    for _partition, _offset, value, key, header, timestamp in received:
        number = int(value.split("-")[2])
        assert key == f"key-{number % 97}"
        assert header == str(number)
        assert timestamp == BASE_TIMESTAMP_MS + number
    for entry in result["offsets"]:
        partition = int(entry["partition"])
        last = max(o for p, o, *_ in received if p == partition)
        assert int(entry["high"]) == last + 1
    assert result["partitionsAfterAdd"] == 3
    assert result["afterDelete"] is False
