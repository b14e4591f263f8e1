"""Broker registration: /brokers/ids/<id> comes back after the quorum session is lost."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.cluster import KnodeCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_registration_survives_a_lost_session(tmp_path: Path) -> None:
    """Three voters; node 3 is stopped past its session timeout, so the quorum expires its
    session and deletes /brokers/ids/3; after SIGCONT it registers again."""
    settings = ["broker.session.timeout.ms=1500", "broker.heartbeat.interval.ms=300"]
    with KnodeCluster(tmp_path, node_count=3, settings=settings) as cluster:

        def brokers() -> set[int]:
            # A fresh client each time asks node 1 itself: a long-lived one may pick the
            # SIGSTOPped node (its TCP connection stays up) and time out until it resumes.
            admin = AdminClient({"bootstrap.servers": cluster.address(1)})
            return set(admin.list_topics(timeout=5).brokers)

        wait_until(lambda: brokers() == {1, 2, 3}, timeout_s=30, what="3 brokers registered")
        process = cluster.nodes[3].process
        assert process is not None
        os.kill(process.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: 3 not in brokers(), timeout_s=30, what="node 3's session expiry")
        finally:
            os.kill(process.pid, signal.SIGCONT)
        wait_until(lambda: 3 in brokers(), timeout_s=30, what="broker 3 registered again")
        log_text = cluster.nodes[3].stderr_path.read_text()
        assert "registering again" in log_text, cluster.describe_failure()
