"""Named listeners with Kafka's rules (trafka.node.security.listeners)."""

from __future__ import annotations

import pytest

from trafka.node.config.broker import BrokerConfig, ConfigError
from trafka.node.security.listeners import listener_value, resolve_listeners


def _build(*overrides: str) -> BrokerConfig:
    return BrokerConfig.build(1, {}, list(overrides))


def test_one_listener_serves_clients_and_brokers() -> None:
    specs = resolve_listeners(
        _build("listeners=CLIENT://:9092", "listener.security.protocol.map=CLIENT:PLAINTEXT")
    )
    assert [(s.name, s.inter_broker) for s in specs] == [("CLIENT", True)]
    default = resolve_listeners(_build())
    assert [(s.name, s.security_protocol, s.inter_broker) for s in default] == [
        ("PLAINTEXT", "PLAINTEXT", True)
    ]


def test_named_listeners_with_advertised_endpoints_and_inter_broker_name() -> None:
    config = _build(
        "listeners=CLIENT://0.0.0.0:9092,INTERNAL://10.0.0.1:9094",
        "advertised.listeners=CLIENT://kafka.example.com:19092",
        "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
    )
    specs = {s.name: s for s in resolve_listeners(config)}
    assert (specs["CLIENT"].advertised_host, specs["CLIENT"].advertised_port) == (
        "kafka.example.com",
        19092,
    )
    assert (specs["INTERNAL"].advertised_host, specs["INTERNAL"].advertised_port) == (
        "10.0.0.1",
        9094,
    )
    assert specs["INTERNAL"].inter_broker and not specs["CLIENT"].inter_broker


def test_two_listeners_default_to_the_one_named_after_the_inter_broker_protocol() -> None:
    specs = resolve_listeners(
        _build(
            "listeners=PLAINTEXT://:9092,SSL2://:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL2:PLAINTEXT",
        )
    )
    assert [s.name for s in specs if s.inter_broker] == ["PLAINTEXT"]


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (("listeners=CLIENT://:9092",), "No security protocol defined for listener CLIENT"),
        (
            (
                "listeners=A://:1,B://:2",
                "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT",
            ),
            "inter.broker.listener.name must be a listener name defined in advertised.listeners",
        ),
        (
            (
                "inter.broker.listener.name=PLAINTEXT",
                "security.inter.broker.protocol=PLAINTEXT",
            ),
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        (("advertised.listeners=OTHER://:1",), "OTHER is not in listeners"),
        (("listener.security.protocol.map=PLAINTEXT:BOGUS",), "expected NAME:PROTOCOL"),
        (("listener.name.x.no.such.key=1",), "unknown configuration"),
    ],
)
def test_bad_listener_configs_give_one_line_errors(
    overrides: tuple[str, ...], fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_listeners(_build(*overrides))
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_per_listener_overrides() -> None:
    config = _build(
        "ssl.client.auth=none",
        "listener.name.plaintext.ssl.client.auth=required",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config=x",
    )
    assert listener_value(config, "PLAINTEXT", "ssl.client.auth") == "required"
    assert listener_value(config, "OTHER", "ssl.client.auth") == "none"
    assert listener_value(config, "PLAINTEXT", "scram-sha-512.sasl.jaas.config") == "x"
