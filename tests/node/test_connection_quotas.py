"""Broker-wide and per-listener connection creation rates (KIP-612) in the quota manager,
and the connection limit keys as dynamic broker configs (KIP-306/KIP-402). Pure."""

from __future__ import annotations

from trafka.node.quota.entities import QuotaEntity
from trafka.node.quota.manager import QuotaManager

# ---- broker-wide and per-listener connection creation rates (KIP-612) ----------------------


def test_accept_rates_throttle_the_listener_and_exempt_the_protected_one() -> None:
    manager = QuotaManager()
    assert manager.record_accept("CLIENT", False, 0) == 0  # no rate configured
    manager.set_connection_creation_rates(2, {"CLIENT": 10})
    assert manager.record_accept("CLIENT", False, 0) == 0
    assert manager.record_accept("CLIENT", False, 0) == 0
    assert manager.record_accept("CLIENT", False, 0) == 500  # 3/s over a 2/s broker rate
    assert manager.record_accept("BROKER", True, 0) == 0  # protected: not the broker rate
    # A connection the per-IP rate refuses is taken back from the broker rate too.
    manager.set_configs({QuotaEntity(ip="10.0.0.1"): {"connection_creation_rate": 0.0}})
    manager.set_connection_creation_rates(100, {})
    assert manager.record_accept("CLIENT", False, 1_000) == 0
    assert manager.record_connection("10.0.0.1", 1_000, listener="CLIENT") > 0
    broker_sensor = manager._accept_rate_broker
    assert broker_sensor is not None
    assert broker_sensor.rate.total(1_000) == 3.0  # 4 recorded, one taken back
    manager.set_connection_creation_rates(None, {})
    assert manager.record_accept("CLIENT", False, 1_000) == 0


def test_listener_connection_limits_are_dynamic_broker_configs() -> None:
    from trafka.node import startup
    from trafka.node.config.broker import BrokerConfig, definition

    assert definition("listener.name.client.max.connections").dynamic
    assert definition("listener.name.client.max.connection.creation.rate").dynamic
    assert definition("max.connection.creation.rate").dynamic
    assert not definition("listener.name.client.connections.max.reauth.ms").dynamic
    config = BrokerConfig.build(
        1, {"max.connections": "50", "listener.name.client.max.connections": "7"}
    ).with_dynamic(
        {"listener.name.client.max.connection.creation.rate": 3},
        {"listener.name.client.max.connections": 9, "max.connection.creation.rate": 20},
    )
    server = startup.server_config(config, "PLAINTEXT")
    assert server.max_connections == 50
    assert server.max_connections_per_listener == (("CLIENT", 9),)  # dynamic default wins
    assert server.inter_broker_listener == "PLAINTEXT"
    assert startup.connection_creation_rates(config) == (20, {"CLIENT": 3})
    assert startup.connection_creation_rates(BrokerConfig.build(1)) == (None, {})


def test_bad_per_ip_overrides_are_refused_when_set() -> None:
    import pytest

    from trafka.node.config.broker import ConfigError, definition

    overrides = definition("max.connections.per.ip.overrides")
    assert overrides.parse("10.0.0.1:5, host.example:7") == "10.0.0.1:5, host.example:7"
    for bad in ("10.0.0.1", "10.0.0.1:x", ":5"):
        with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
            overrides.parse(bad)
