"""A knode process does not import hypothesis (kio would, when it is installed: issue 19,
T1); any other process that imports trafka keeps it."""

from __future__ import annotations

import re
import subprocess
import sys


def _imported(command: list[str]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", result.stderr, re.M))


def test_a_knode_process_skips_hypothesis() -> None:
    modules = _imported(["-m", "trafka.tools.knode", "--help"])
    assert "kio.static._phantom" in modules
    assert "hypothesis" not in modules


def test_other_processes_keep_hypothesis() -> None:
    modules = _imported(["-c", "import trafka.tools.knode, hypothesis.strategies"])
    assert "hypothesis" in modules
