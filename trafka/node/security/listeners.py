"""Named listeners and their security protocols (Kafka's listener configuration).

Keys (Kafka's names and rules, `KafkaConfig`):

* ``listeners=CLIENT://:9092,INTERNAL://:9094``: the names to bind;
* ``advertised.listeners``: what Metadata and the broker registration give per name (the
  names must be a subset of ``listeners``; unset names advertise their bound address);
* ``listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SSL``: each name's protocol
  (Kafka's default maps PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL to themselves);
* ``inter.broker.listener.name`` or ``security.inter.broker.protocol`` (not both): the
  listener brokers use between themselves. Unset: the listener named after
  ``security.inter.broker.protocol`` (PLAINTEXT) as in Kafka - or, when only one listener is
  configured, that one (one listener serves clients and brokers).
* per listener overrides ``listener.name.<name>.<key>`` for ssl.*, sasl.* and
  connections.max.reauth.ms (`listener_value`).

Pure: `resolve_listeners(config)` returns the `ListenerSpec`s or raises ConfigError with one
line (Kafka's message where Kafka has one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from trafka.node.config.broker import BrokerConfig, ConfigError, Listener, listener_key
from trafka.security.mapping import parse_rules
from trafka.security.sasl import SUPPORTED_MECHANISMS, parse_jaas

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One listener: where it binds, what it advertises, its security protocol."""

    name: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    security_protocol: str
    inter_broker: bool

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def protocol_map(config: BrokerConfig) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in config.get("listener.security.protocol.map") or []:
        name, sep, protocol = str(item).partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"invalid value {item!r} for configuration listener.security.protocol.map: "
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in result:
            raise ConfigError(
                f"invalid configuration listener.security.protocol.map: {name} repeated"
            )
        result[name] = protocol
    return result


def inter_broker_listener_name(config: BrokerConfig, names: list[str]) -> str:
    explicit = config.get("inter.broker.listener.name")
    if explicit and config.is_set("security.inter.broker.protocol"):
        raise ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set."
        )
    if explicit:
        return str(explicit).upper()
    if config.is_set("security.inter.broker.protocol") or len(names) != 1:
        return str(config.get("security.inter.broker.protocol")).upper()
    return names[0]


def resolve_listeners(config: BrokerConfig) -> list[ListenerSpec]:
    listeners: list[Listener] = config.listeners
    protocols = protocol_map(config)
    names = [listener.name for listener in listeners]
    advertised: dict[str, Listener] = {}
    for entry in config.advertised_listeners:
        if entry.name not in names:
            raise ConfigError(
                f"invalid configuration advertised.listeners: {entry.name} is not in listeners "
                f"({','.join(names)})"
            )
        if entry.name in advertised:
            raise ConfigError(f"invalid configuration advertised.listeners: {entry.name} repeated")
        advertised[entry.name] = entry
    inter_broker = inter_broker_listener_name(config, names)
    if inter_broker not in advertised and inter_broker not in names:
        raise ConfigError(
            "inter.broker.listener.name must be a listener name defined in "
            "advertised.listeners. The valid options based on currently configured listeners "
            f"are {','.join(names)}"
        )
    specs = []
    for listener in listeners:
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(f"No security protocol defined for listener {listener.name}")
        shown = advertised.get(listener.name, listener)
        specs.append(
            ListenerSpec(
                name=listener.name,
                host=listener.host,
                port=listener.port,
                advertised_host=shown.host,
                advertised_port=shown.port,
                security_protocol=protocol,
                inter_broker=listener.name == inter_broker,
            )
        )
    _check_security(config, specs)
    return specs


def _check_security(config: BrokerConfig, specs: list[ListenerSpec]) -> None:
    """What each protocol needs (a key and certificate for TLS, mechanisms for SASL)."""
    for spec in specs:
        check_listener_security(config, spec)


def sasl_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    mechanisms = tuple(
        str(m).upper() for m in listener_value(config, listener, "sasl.enabled.mechanisms")
    )
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            f"invalid configuration sasl.enabled.mechanisms for listener {listener}: "
            f"{','.join(unsupported) or '(empty)'} not implemented "
            f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
        )
    return mechanisms


def jaas_options(config: BrokerConfig, listener: str, mechanism: str) -> dict[str, str]:
    """The JAAS options of ``listener.name.<l>.<mechanism>.sasl.jaas.config``, else of
    ``listener.name.<l>.sasl.jaas.config`` / ``sasl.jaas.config``."""
    text = _scoped_values(config).get((listener.upper(), f"{mechanism.lower()}.sasl.jaas.config"))
    if text is None:
        text = listener_value(config, listener, "sasl.jaas.config")
    return parse_jaas(text)


def check_listener_security(config: BrokerConfig, spec: ListenerSpec) -> None:
    """Cheap checks at config time (files are read when the listener starts)."""
    if spec.uses_sasl:
        mechanisms = sasl_mechanisms(config, spec.name)
        if spec.inter_broker:
            mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
            if mechanism not in mechanisms:
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol={mechanism} must be one of the "
                    f"enabled mechanisms of the inter-broker listener {spec.name} "
                    f"({','.join(mechanisms)})"
                )
    if spec.uses_tls:
        has_keystore = listener_value(config, spec.name, "ssl.keystore.location") or (
            listener_value(config, spec.name, "ssl.keystore.certificate.chain")
            and listener_value(config, spec.name, "ssl.keystore.key")
        )
        if not has_keystore:
            raise ConfigError(
                f"listener {spec.name} ({spec.security_protocol}) needs ssl.keystore.location "
                "or ssl.keystore.certificate.chain and ssl.keystore.key"
            )
        try:
            parse_rules(str(listener_value(config, spec.name, "ssl.principal.mapping.rules")))
        except ValueError as error:
            raise ConfigError(f"invalid ssl.principal.mapping.rules: {error}") from None


def listener_value(config: BrokerConfig, listener: str, key: str) -> Any:
    """``listener.name.<listener>.<key>`` if set (name case-insensitive), else ``key``."""
    scoped = _scoped_values(config).get((listener.upper(), key))
    if scoped is not None:
        return scoped
    return config.get(key)


def _scoped_values(config: BrokerConfig) -> Mapping[tuple[str, str], Any]:
    result: dict[tuple[str, str], Any] = {}
    for layer in (config.static_values, config.dynamic_default_values, config.dynamic_values):
        for raw_key, value in layer.items():
            scoped = listener_key(raw_key)
            if scoped is not None:
                result[scoped] = value
    return result


def listener_keys(config: BrokerConfig, listener: str) -> dict[str, Any]:
    """Every ``listener.name.<listener>.*`` key set, by its inner key."""
    return {
        inner: value
        for (name, inner), value in _scoped_values(config).items()
        if name == listener.upper()
    }
