"""`bench/vs_kafka.py --smoke` runs (issue 19): Kafka's jars come from Maven, a KRaft Kafka and
a knode start, both load generators (confluent-kafka workers, Kafka's ProducerPerformance and
ConsumerPerformance) run against each, and the report has a trafka/Kafka ratio per figure.
Tiny sizes: this checks that the benchmark works, not how fast anything is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]


def test_the_smoke_run_measures_both_servers_with_both_load_generators() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "vs_kafka.py"), "--smoke", "--nice", "0"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "load average before:" in out and "load average after:" in out
    assert "Apache Kafka 4." in out
    for measurement in (
        "1 partition, python producer",
        "1 partition, ProducerPerformance",
        "python consumer",
        "ConsumerPerformance",
    ):
        row = next(line for line in out.splitlines() if f"| {measurement} |" in line)
        # trafka, Kafka and the ratio all filled in
        assert re.search(r"\| \*\*\d+\.\d\d\*\* \|", row), row
    assert "org.apache.kafka.tools.ProducerPerformance" in out
