"""`knode cluster up --security sasl_ssl` (issue 14 item 5), with real processes.

Two nodes (a replicated topic, so the replica fetches cross the SASL_SSL inter-broker
listener): what `up` prints and writes (private files), confluent-kafka with the written
librdkafka settings produces (acks=all) and consumes in a group, `ktool --command-config
client.properties` lists the topic, and a client without credentials is refused.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port, free_port_range
from trafka.client.command_config import parse_properties

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KNODE_CLUSTER_UP = [sys.executable, "-m", "trafka.tools.knode", "cluster", "up"]
TOPIC = "secured"
COUNT = 20


def _read_until(process: subprocess.Popen[str], marker: str, directory: Path) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    while True:
        line = process.stdout.readline()
        if not line:
            logs = "\n".join(p.read_text()[-3000:] for p in directory.glob("node-*.log"))
            raise AssertionError(f"knode cluster up ended early: {lines}\n{logs}")
        lines.append(line)
        if marker in line:
            return lines


def test_cluster_up_with_sasl_ssl_serves_the_printed_client_settings(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    port, internal, quorum_port = free_port_range(2), free_port_range(2), free_port_range(2)
    directory = tmp_path / "cluster"
    command = [*KNODE_CLUSTER_UP, "--nodes", "2", "--dir", str(directory), "--security"]
    command += ["sasl_ssl", "--port", str(port), "--internal-port", str(internal)]
    command += ["--quorum-port", str(quorum_port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
    try:
        lines = _read_until(process, "ssl.truststore.location=", directory)
        bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        assert f"bootstrap.servers={bootstrap}\n" in lines
        assert any("client settings (the admin user)" in line for line in lines)
        assert "security.protocol=SASL_SSL\n" in lines
        assert "sasl.mechanism=SCRAM-SHA-512\n" in lines
        client_file = directory / "client.properties"
        printed = "".join(lines[lines.index("security.protocol=SASL_SSL\n") - 1 :])
        assert printed == client_file.read_text()
        for private in [
            "client.properties",
            "client-librdkafka.properties",
            "security/ca.key",
            "security/node-1.pem",
            "security/credentials.properties",
            "node-1.properties",
        ]:
            assert (directory / private).stat().st_mode & 0o077 == 0, private

        conf = {
            "bootstrap.servers": bootstrap,
            **parse_properties((directory / "client-librdkafka.properties").read_text()),
        }
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(60)
        producer = Producer({**conf, "acks": "all", "message.timeout.ms": 60000})
        for number in range(COUNT):
            producer.produce(TOPIC, f"v-{number}".encode())
        assert producer.flush(90) == 0
        consumer = Consumer({**conf, "group.id": "secured-group", "auto.offset.reset": "earliest"})
        consumer.subscribe([TOPIC])
        values: list[bytes] = []
        deadline = time.monotonic() + 90
        try:
            while len(values) < COUNT and time.monotonic() < deadline:
                values += [m.value() or b"" for m in consumer.consume(50, 1.0) if not m.error()]
        finally:
            consumer.close()
        assert sorted(values) == sorted(f"v-{n}".encode() for n in range(COUNT))

        def ktool_list(config: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    *(sys.executable, "-m", "trafka.tools.ktool", "topics", "list"),
                    *("--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(config)),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        listed = ktool_list(client_file)
        assert listed.returncode == 0, listed.stderr
        assert TOPIC in listed.stdout.split()
        # With the wrong password the listener lets nobody in.
        password = parse_properties((directory / "client-librdkafka.properties").read_text())[
            "sasl.password"
        ]
        wrong_file = tmp_path / "wrong.properties"
        wrong_file.write_text(client_file.read_text().replace(password, "wrong-password"))
        refused = ktool_list(wrong_file)
        assert refused.returncode != 0
        assert "Authentication failed" in refused.stderr, refused.stderr
        del admin, producer  # no librdkafka threads left to retry a stopped cluster
    finally:
        process.send_signal(signal.SIGTERM)
        remaining = process.communicate(timeout=90)[0]
    assert remaining.endswith("knode cluster: stopped\n")
    assert process.returncode == 0


def test_cluster_up_refuses_an_unknown_security(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *KNODE_CLUSTER_UP,
            *("--dir", str(tmp_path / "c"), "--security", "kerberos", "--port", str(free_port())),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--security kerberos: expected plaintext or sasl_ssl" in result.stderr
