"""The audit on a real standalone Spark cluster: a master and two workers (issue 17 item 2).

Three JVMs started with the pyspark package's own `bin/spark-class` (the Master and Worker
main classes, as `sbin/start-master.sh` / `start-worker.sh` run them) on loopback, free ports,
one core and 1 GiB per worker. `ktool audit export` and `ktool audit check` run once with
`--master spark://127.0.0.1:PORT` and once with `--master local[2]` over the same log dirs
(tests/spark/logdirs.py: three brokers, every codec, __consumer_offsets); the exported rows
and the check's verdict must be the same. Both workers must have run tasks (their work dirs
hold an executor for the application). Every Spark process is killed afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyspark
import pytest

from tests.spark.logdirs import write_cluster
from tests.support.ports import free_port
from tests.support.waiting import port_accepts, wait_until

# Three Spark processes and two audits: `make soak`, not `make test` (docs/status.md).
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.soak]

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
START_TIMEOUT_S = 120.0


def _env() -> dict[str, str]:
    """No PYSPARK_PYTHON: `ktool audit` must hand its own interpreter to the executors."""
    env = dict(os.environ)
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_HOME"] = str(SPARK_CLASS.parent.parent)
    return env


class StandaloneCluster:
    """A master and two workers, each a process group of its own (killed on exit)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.created = time.monotonic()
        self.started_s = 0.0

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.base / f"{name}.log"
        self.logs.append(log)
        env = _env()
        # The master's REST submission server would take the fixed port 6066: off.
        env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["nice", "-n", "5", str(SPARK_CLASS), *args],
                stdout=out, stderr=out, env=env, start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def start(self) -> None:
        self._spawn(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(free_port()),
        )  # fmt: skip
        wait_until(
            lambda: port_accepts(self.port),
            timeout_s=START_TIMEOUT_S, what="the Spark master's port",
        )  # fmt: skip
        for index in (1, 2):
            work = self.base / f"worker-{index}"
            work.mkdir()
            self._spawn(
                f"worker-{index}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                "--work-dir", str(work), self.master_url,
            )  # fmt: skip
        wait_until(
            lambda: self.registered_workers() >= 2,
            timeout_s=START_TIMEOUT_S, what="two workers registered with the master",
        )  # fmt: skip
        self.started_s = time.monotonic() - self.created

    def registered_workers(self) -> int:
        text = (self.base / "master.log").read_text(errors="replace")
        return text.count("Registering worker 127.0.0.1")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)

    def describe(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}"
            for log in self.logs
            if log.exists()
        )


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path)
    try:
        cluster.start()
        yield cluster
    except BaseException:
        print(cluster.describe())
        raise
    finally:
        cluster.stop()
    assert all(p.poll() is not None for p in cluster.processes)


def _ktool(tmp_path: Path, name: str, *args: str) -> tuple[int, str]:
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        code = subprocess.run(
            ["nice", "-n", "5", sys.executable, "-m", "trafka.tools.ktool", "audit", *args],
            stdout=out, stderr=out, env=_env(), timeout=900, check=False,
        ).returncode  # fmt: skip
    return code, log.read_text(errors="replace")


def _records(out: Path) -> list[tuple[Any, ...]]:
    table = ds.dataset(str(out / "records"), format="parquet", partitioning="hive").to_table()
    columns = ["topic", "partition", "broker", "offset", "key", "value", "compression"]
    rows = table.select(columns).to_pylist()
    return sorted(tuple(str(r[c]) for c in columns) for r in rows)


def test_audit_on_a_standalone_cluster_matches_local(
    standalone: StandaloneCluster, tmp_path: Path
) -> None:
    cluster = write_cluster(str(tmp_path / "logs"))
    log_dirs = ",".join(cluster.log_dirs[b] for b in sorted(cluster.log_dirs))
    results: dict[str, tuple[list[tuple[Any, ...]], dict[str, Any]]] = {}
    timings = [f"cluster up in {standalone.started_s:.0f} s"]
    for name, master in (("local", "local[2]"), ("standalone", standalone.master_url)):
        out = tmp_path / f"out-{name}"
        started = time.monotonic()
        code, log = _ktool(
            tmp_path, f"export-{name}", "export", "--log-dirs", log_dirs,
            "--out", str(out), "--master", master,
        )  # fmt: skip
        assert code == 0, log[-4000:] + standalone.describe()
        timings.append(f"{name} export {time.monotonic() - started:.0f} s")
        started = time.monotonic()
        report = tmp_path / f"report-{name}.json"
        code, log = _ktool(
            tmp_path, f"check-{name}", "check", "--log-dirs", log_dirs,
            "--report", str(report), "--master", master,
        )  # fmt: skip
        assert code == 0, log[-4000:] + standalone.describe()
        timings.append(f"{name} check {time.monotonic() - started:.0f} s")
        results[name] = (_records(out), json.loads(report.read_text()))

    local_rows, local_report = results["local"]
    cluster_rows, cluster_report = results["standalone"]
    expected = sum(len(cluster.replicas[(m.topic, m.partition)]) for m in cluster.messages)
    assert cluster_rows == local_rows
    # every message once per replica, besides the __consumer_offsets records
    assert len([r for r in local_rows if r[0] != "__consumer_offsets"]) == expected
    assert local_report["ok"] and local_report["error_count"] == 0
    assert cluster_report == local_report
    # The work really ran on the workers: each has an executor dir of the applications.
    for index in (1, 2):
        apps = list((tmp_path / f"worker-{index}").glob("app-*/*"))
        assert apps, f"worker {index} ran no executor"
    print(
        f"\nspark standalone audit: {len(cluster_rows)} rows, check ok on both masters; "
        + ", ".join(timings)
    )
