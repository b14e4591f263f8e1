"""compose/docker: the compose file is valid (`docker compose config`, where that client
exists) and the entrypoint's `knode start --config` lines form a three-node cluster outside
containers (these machines have no container engine): the compose's properties files with
hosts, ports and paths rewritten to free loopback ports and a temporary directory."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.waiting import port_accepts, wait_until
from trafka.node.config.broker import BrokerConfig, load_properties_file

DOCKER = Path(__file__).resolve().parents[2] / "compose" / "docker"
NODES = (1, 2, 3)


def _compose_client() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker client on this machine"
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["?"])[0][:120]
        return f"`docker compose` is not available here: {first}"
    return None


def test_compose_file_is_valid() -> None:
    reason = _compose_client()
    if reason is not None:
        pytest.skip(reason)
    out = subprocess.run(
        ["docker", "compose", "-f", str(DOCKER / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_compose_names_the_files_it_mounts() -> None:
    text = (DOCKER / "compose.yaml").read_text()
    for service in ("node1:", "node2:", "node3:", "prometheus:", "grafana:"):
        assert f"\n  {service}" in text
    for mounted in re.findall(r"- \./([\w./-]+):", text):
        assert (DOCKER / mounted).exists(), mounted
    dockerfile = (DOCKER / "Dockerfile").read_text()
    for copied in re.findall(r"compose/docker/([\w.-]+)", dockerfile):
        assert (DOCKER / copied).exists(), copied
    assert "ENTRYPOINT" in dockerfile


def test_no_fixed_secret_ships() -> None:
    for path in DOCKER.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not re.search(r"^controller\.quorum\.secret=", text, re.M), path
            assert "GF_SECURITY_ADMIN_PASSWORD" not in text, path


def test_scrape_config_and_dashboard_use_the_metric_names() -> None:
    from trafka.metrics.families import NodeState, families
    from trafka.metrics.registry import NodeMetrics

    counters = NodeMetrics()
    counters.request_done("Produce", [0], queue_ms=0, local_ms=0, remote_ms=0, send_ms=0)
    counters.connection_opened("PLAINTEXT")
    counters.connection_closed("PLAINTEXT")
    names = set()
    for family in families(counters, NodeState()):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    names.update({"process_cpu_seconds_total", "process_resident_memory_bytes"})
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "trafka.json").read_text())
    used = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used.update(re.findall(r"\b((?:kafka|process)_[a-z_]+)", target["expr"]))
    assert used and used <= names, sorted(used - names)
    scrape = (DOCKER / "prometheus.yml").read_text()
    assert all(f"node{n}:9404" in scrape for n in NODES)


def _entrypoint_command(node_id: int, config: Path) -> list[str]:
    """The entrypoint's knode line, with its config path pointing at `config`."""
    line = next(
        line.strip()
        for line in (DOCKER / "entrypoint.sh").read_text().splitlines()
        if line.strip().startswith("exec knode start")
    )
    args = line.removeprefix("exec ").replace('"', "").split()
    assert args[:3] == ["knode", "start", "--config"]
    assert args[3] == "/etc/trafka/node${NODE_ID}.properties"
    return [sys.executable, "-m", "trafka.tools.knode", *args[1:3], str(config)]


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[dict[int, tuple[int, int]]]:
    ports = {n: (free_port(), free_port(), free_port()) for n in NODES}
    voters = ",".join(f"{n}@127.0.0.1:{ports[n][1]}" for n in NODES)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for n in NODES:
            text = (DOCKER / f"node{n}.properties").read_text()
            client, _quorum, metrics = ports[n]
            text = re.sub(r"(?m)^listeners=.*$", f"listeners=PLAINTEXT://127.0.0.1:{client}", text)
            text = re.sub(
                r"(?m)^advertised\.listeners=.*$",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{client}",
                text,
            )
            text = re.sub(
                r"(?m)^controller\.quorum\.voters=.*$", f"controller.quorum.voters={voters}", text
            )
            text = re.sub(
                r"(?m)^metrics\.listener=.*$", f"metrics.listener=http://127.0.0.1:{metrics}", text
            )
            text = text.replace("/var/lib/trafka/data", str(tmp_path / f"node-{n}"))
            text = text.replace("/var/lib/trafka/shared", str(tmp_path / "shared"))
            config = tmp_path / f"node{n}.properties"
            config.write_text(text)
            BrokerConfig.build(None, load_properties_file(config))  # still a valid config
            with (tmp_path / f"node{n}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(_entrypoint_command(n, config), stdout=log, stderr=log)
                )
        for client, _quorum, _metrics in ports.values():
            wait_until(functools.partial(port_accepts, client), timeout_s=120)
        yield {n: (ports[n][0], ports[n][2]) for n in NODES}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.mark.cluster
@pytest.mark.slow
def test_entrypoint_commands_form_a_cluster(local_cluster: dict[int, tuple[int, int]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = ",".join(f"127.0.0.1:{client}" for client, _ in local_cluster.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("compose-check", 3, 3)])["compose-check"].result(timeout=60)

    def described() -> bool:
        topic = admin.list_topics(timeout=10).topics.get("compose-check")
        return topic is not None and all(
            len(p.replicas) == 3 and len(p.isrs) == 3 for p in topic.partitions.values()
        )

    wait_until(described, timeout_s=60)
    assert sorted(admin.list_topics(timeout=10).brokers) == list(NODES)

    def active_controllers() -> float:
        total = 0.0
        for _, metrics_port in local_cluster.values():
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=30) as response:
                text = response.read().decode()
            match = re.search(
                r"^kafka_controller_kafkacontroller_activecontrollercount (\S+)$", text, re.M
            )
            assert match, url
            total += float(match.group(1))
        return total

    wait_until(lambda: active_controllers() == 1, timeout_s=60)
