"""Issue 14 item 4: three real knodes whose inter-broker listener is SASL_SSL.

Each node has a ``CLIENT`` listener (PLAINTEXT, for the test's producer and consumer) and an
``INTERNAL`` listener (SASL_SSL, PLAIN, ``inter.broker.listener.name``): the controller's
requests, the replica fetchers and controlled shutdown all go through TLS and authenticate
as ``User:broker``. The leader of a partition is SIGKILLed while an idempotent acks=all
producer sends numbered messages (the scenario of test_replication's Must show 1): every
acknowledged message is read back exactly once and in order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.test_replication import (
    NUMBERED_PARTITIONS,
    NUMBERED_TOTAL,
    SETTINGS,
    _consume_all,
    _create_topic,
    _partition,
    _produce_numbered,
)
from tests.support.certs import CertificateAuthority
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)


def test_sasl_ssl_inter_broker_cluster_survives_a_leader_sigkill(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "certs")
    cluster = KnodeCluster(tmp_path, node_count=3, settings=SETTINGS, start=False)
    for node_id, node in cluster.nodes.items():
        broker = ca.issue(f"broker-{node_id}", "localhost", "Brokers")
        internal = free_port()
        node.extra = [
            f"listeners=CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{internal}",
            "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={JAAS}",
            f"ssl.keystore.location={broker.chain}",
            f"ssl.truststore.location={ca.ca_file}",
            "ssl.client.auth=required",
        ]
    with cluster:
        for node_id in cluster.nodes:
            cluster.start(node_id, wait=False)
        for node_id in cluster.nodes:
            cluster.wait_ready(node_id, timeout_s=240)  # three voters on 2 loaded cores
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        _create_topic(admin, "numbers", partitions=NUMBERED_PARTITIONS)
        wait_until(
            lambda: _partition(admin, "numbers")[1] == [1, 2, 3],
            timeout_s=60,
            what="a full ISR over the SASL_SSL inter-broker listener",
        )
        victim, _ = _partition(admin, "numbers")
        run = _produce_numbered(cluster, "numbers", victim)
        assert run.new_leader != victim
        cluster.wait_ready(victim)
        wait_until(
            lambda: all(
                _partition(admin, "numbers", p)[1] == [1, 2, 3] for p in range(NUMBERED_PARTITIONS)
            ),
            timeout_s=60,
            what="the restarted broker back in every ISR (it fetches over SASL_SSL)",
        )
        consumed = _consume_all(cluster, "numbers")
        assert sum(len(n) for n in run.acked.values()) + len(run.failed) == NUMBERED_TOTAL
        for partition in range(NUMBERED_PARTITIONS):
            numbers = consumed[partition]
            assert len(numbers) == len(set(numbers)), f"partition {partition}: duplicates"
            assert numbers == sorted(numbers), f"partition {partition}: out of order"
            lost = set(run.acked[partition]) - set(numbers)
            assert not lost, f"partition {partition}: acknowledged, then lost: {sorted(lost)[:10]}"
        logs = cluster.describe_failure(lines=100000)
        assert "refused" not in logs.split("start")[-1] or "CLUSTER_AUTHORIZATION" not in logs
