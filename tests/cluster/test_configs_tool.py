"""`ktool configs` against Kafka's own kafka-configs (org.apache.kafka.tools.ConfigCommand,
Kafka 4.x) on the same knode cluster: quotas written by one are read by the other, and both
print the same lines for topics, brokers, users, clients and ips (issue 17 item 4, issue 18
item 3).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.cluster.java_support import ToolResult, ToolShell, start_slowly
from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until
from trafka.tools.ktool import app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def shell() -> Iterator[ToolShell]:
    with ToolShell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def cluster(shell: ToolShell, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnodeCluster]:
    base = tmp_path_factory.mktemp("configs-tool")
    with KnodeCluster(base, node_count=1, start=False) as running:
        start_slowly(running)
        yield running


def kafka(shell: ToolShell, cluster: KnodeCluster, *args: str) -> ToolResult:
    return shell.run("kafka-configs", "--bootstrap-server", cluster.bootstrap_servers, *args).ok()


def ktool(cluster: KnodeCluster, *args: str) -> ToolResult:
    """In this process, with sys.argv as `ktool` sets it: configs pairs each --entity-name /
    --entity-default with the --entity-type before it from the command line's order."""
    argv = ["configs", "--bootstrap-server", cluster.bootstrap_servers, *args]
    saved = sys.argv
    sys.argv = ["ktool", *argv]
    try:
        result = CliRunner().invoke(app, argv)
    finally:
        sys.argv = saved
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return ToolResult(result.exit_code, result.stdout, result.stderr).ok()


def both(shell: ToolShell, cluster: KnodeCluster, *args: str) -> list[str]:
    """The lines both tools print for the same describe; they must agree."""
    theirs = sorted(kafka(shell, cluster, *args).lines)
    ours = sorted(ktool(cluster, *args).lines)
    assert ours == theirs, f"ktool:\n{ours}\nkafka-configs:\n{theirs}"
    return theirs


def test_quotas_written_by_kafka_configs_are_read_by_ktool_and_back(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    done = kafka(
        shell,
        cluster,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "c1",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=20000000",
    )
    assert done.lines == ["Completed updating config for client c1."]
    lines = both(shell, cluster, "--describe", "--entity-type", "clients", "--entity-name", "c1")
    assert lines == [
        "Quota configs for client-id 'c1' are consumer_byte_rate=2.0E7, "
        "producer_byte_rate=1048576.0"
    ] or lines == [
        "Quota configs for client-id 'c1' are producer_byte_rate=1048576.0, "
        "consumer_byte_rate=2.0E7"
    ]

    ours = ktool(
        cluster,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "request_percentage=12.5",
    )
    assert ours.lines == ["Completed updating config for user alice."]
    assert both(
        shell,
        cluster,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
    ) == [
        "Quota configs for user-principal 'alice', the default client-id are "
        "request_percentage=12.5"
    ]

    assert ktool(
        cluster,
        "--alter",
        "--entity-type",
        "users",
        "--entity-default",
        "--add-config",
        "consumer_byte_rate=300",
    ).lines == ["Completed updating default config for users in the cluster."]
    assert both(shell, cluster, "--describe", "--entity-type", "users", "--entity-default") == [
        "Quota configs for the default user-principal are consumer_byte_rate=300.0"
    ]
    kafka(
        shell,
        cluster,
        "--alter",
        "--entity-type",
        "ips",
        "--entity-name",
        "10.0.0.7",
        "--add-config",
        "connection_creation_rate=9",
    )
    assert both(shell, cluster, "--describe", "--entity-type", "ips") == [
        "Quota configs for ip '10.0.0.7' are connection_creation_rate=9.0"
    ]
    assert len(both(shell, cluster, "--describe", "--entity-type", "clients")) == 1
    assert len(both(shell, cluster, "--describe", "--entity-type", "users")) == 1

    # --delete-config from either tool
    ktool(
        cluster,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "c1",
        "--delete-config",
        "producer_byte_rate",
    )
    assert both(
        shell, cluster, "--describe", "--entity-type", "clients", "--entity-name", "c1"
    ) == ["Quota configs for client-id 'c1' are consumer_byte_rate=2.0E7"]
    kafka(
        shell,
        cluster,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "c1",
        "--delete-config",
        "consumer_byte_rate",
    )
    assert (
        both(shell, cluster, "--describe", "--entity-type", "clients", "--entity-name", "c1") == []
    )


def test_topic_and_broker_configs_print_as_kafka_configs(
    shell: ToolShell, cluster: KnodeCluster
) -> None:
    shell.run(
        "kafka-topics",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--create",
        "--topic",
        "cfg-tool",
        "--partitions",
        "1",
    ).ok()
    assert ktool(
        cluster,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg-tool",
        "--add-config",
        "retention.ms=1234567,cleanup.policy=[compact,delete]",
    ).lines == ["Completed updating config for topic cfg-tool."]
    lines = both(
        shell, cluster, "--describe", "--entity-type", "topics", "--entity-name", "cfg-tool"
    )
    assert "Dynamic configs for topic cfg-tool are:" in lines
    assert any(line.startswith("  retention.ms=1234567 sensitive=false") for line in lines)
    assert any(line.startswith("  cleanup.policy=compact,delete ") for line in lines)

    assert ktool(
        cluster,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "log.retention.ms=86400001",
    ).lines == ["Completed updating config for broker 1."]
    broker = both(shell, cluster, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert "Dynamic configs for broker 1 are:" in broker
    ktool(
        cluster,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=86400002",
    )

    def default_seen() -> list[str] | None:
        lines = both(shell, cluster, "--describe", "--entity-type", "brokers", "--entity-default")
        return lines if len(lines) > 1 else None

    assert sorted(wait_until(default_seen, timeout_s=30)) == sorted(
        [
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=86400002 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400002}",
        ]
    )
    both(shell, cluster, "--describe", "--entity-type", "brokers")
    ktool(
        cluster,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "log.retention.ms",
    )
    ktool(
        cluster,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--delete-config",
        "log.retention.ms",
    )
