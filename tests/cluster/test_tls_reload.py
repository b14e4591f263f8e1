"""Certificate reload on a real knode (docs/security.md, "Certificate rotation").

One knode with an SSL client listener. Its keystore file is replaced (a new key and
certificate for the same subject, renamed over the old file): new connections get the new
certificate within seconds while a producer connected before keeps working; a keystore
for another subject is refused and the node keeps serving the current one.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.support.certs import CertificateAuthority
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _served(port: int, ca: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def test_a_rotated_keystore_is_served_without_a_restart(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ca = CertificateAuthority(tmp_path / "certs")
    broker = ca.issue("broker", "localhost", "Brokers")
    cluster = KnodeCluster(tmp_path, node_count=1, start=False)
    node = cluster.nodes[1]
    ssl_port = free_port()
    node.extra = [
        f"listeners=SSL://127.0.0.1:{ssl_port},INTERNAL://127.0.0.1:{node.port}",
        "listener.security.protocol.map=SSL:SSL,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        f"ssl.keystore.location={broker.chain}",
        f"ssl.truststore.location={ca.ca_file}",
    ]
    conf = {
        "bootstrap.servers": f"127.0.0.1:{ssl_port}",
        "security.protocol": "ssl",
        "ssl.ca.location": str(ca.ca_file),
    }
    with cluster:
        cluster.start_all()
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("rotated", 1, 1)])["rotated"].result(60)
        producer = Producer(conf)
        producer.produce("rotated", b"before")
        assert producer.flush(30) == 0
        old = _served(ssl_port, ca.ca_file)

        os.replace(ca.issue("broker-next", "localhost", "Brokers").chain, broker.chain)
        wait_until(
            lambda: _served(ssl_port, ca.ca_file) != old,
            timeout_s=30,
            what="new connections served the rotated certificate",
        )
        rotated = _served(ssl_port, ca.ca_file)
        producer.produce("rotated", b"after")  # its connection predates the rotation
        assert producer.flush(30) == 0

        # Another subject: refused (Kafka's ssl.allow.dn.changes=false), the rotated one stays.
        os.replace(ca.issue("intruder", "intruder", "Brokers").chain, broker.chain)
        time.sleep(3)  # three check intervals
        assert _served(ssl_port, ca.ca_file) == rotated
        assert "not taken" in cluster.nodes[1].stderr_path.read_text()

        consumer = Consumer({**conf, "group.id": "rotation", "auto.offset.reset": "earliest"})
        consumer.subscribe(["rotated"])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(values) < 2 and time.monotonic() < deadline:
                values += [m.value() or b"" for m in consumer.consume(10, 1.0) if not m.error()]
        finally:
            consumer.close()
        assert values == [b"before", b"after"]
