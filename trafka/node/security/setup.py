"""From the broker's security keys to the net layer's listener and client security.

Per listener (keys looked up as ``listener.name.<name>.<key>`` first, then ``<key>``):

* SSL / SASL_SSL: `trafka.net.tls.TlsSettings` from ``ssl.keystore.*``, ``ssl.key.password``,
  ``ssl.truststore.*``, ``ssl.client.auth``, ``ssl.enabled.protocols``, ``ssl.cipher.suites``;
  the principal of an SSL client certificate through ``ssl.principal.mapping.rules``;
* SASL_PLAINTEXT / SASL_SSL: ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512; Kafka's default GSSAPI is refused with one line), PLAIN users from
  ``listener.name.<l>.plain.sasl.jaas.config`` (``user_<name>="<password>"``), SCRAM
  credentials from the tree (`trafka.node.security.scram_store`), ``sasl.server.max.receive.size``,
  ``connections.max.reauth.ms``.

The broker's own client (`inter_broker_client`) uses the inter-broker listener's protocol:
TLS with the same truststore (and keystore, for client certificates),
``ssl.endpoint.identification.algorithm`` (https: check the host name), and SASL with
``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password`` of that
mechanism's JAAS config on the inter-broker listener.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trafka.net import server as net_server
from trafka.net.client_security import ClientSecurity
from trafka.net.security import ListenerSecurity
from trafka.net.tls import (
    ReloadingContext,
    TlsConfigError,
    TlsSettings,
    client_context,
    server_context,
)
from trafka.node.clock import Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import LocalTreeReads, MetadataStore
from trafka.node.security import scram_store
from trafka.node.security.acls import AclService, AuthorizerConfigError, build_authorizer
from trafka.node.security.inter_broker import InterBrokerClient
from trafka.node.security.listeners import (
    ListenerSpec,
    jaas_options,
    listener_value,
    sasl_mechanisms,
)
from trafka.node.startup import StartupError
from trafka.security.acl import AclAuthorizer
from trafka.security.authorizer import Authorizer
from trafka.security.mapping import PrincipalMapper
from trafka.security.sasl import SaslServerConfig, plain_users
from trafka.security.scram import ScramCredential

ScramLookup = Callable[[str, str], ScramCredential | None]


def tls_settings(config: BrokerConfig, listener: str) -> TlsSettings:
    def text(key: str) -> str | None:
        value = listener_value(config, listener, key)
        return None if value in (None, "") else str(value)

    return TlsSettings(
        keystore_location=text("ssl.keystore.location"),
        keystore_certificate_chain=text("ssl.keystore.certificate.chain"),
        keystore_key=text("ssl.keystore.key"),
        key_password=text("ssl.key.password"),
        truststore_location=text("ssl.truststore.location"),
        truststore_certificates=text("ssl.truststore.certificates"),
        client_auth=str(listener_value(config, listener, "ssl.client.auth")),
        enabled_protocols=tuple(listener_value(config, listener, "ssl.enabled.protocols")),
        cipher_suites=tuple(listener_value(config, listener, "ssl.cipher.suites")),
        endpoint_identification=str(
            listener_value(config, listener, "ssl.endpoint.identification.algorithm") or ""
        ).lower()
        == "https",
    )


def listener_security(
    config: BrokerConfig, spec: ListenerSpec, scram_lookup: ScramLookup | None = None
) -> ListenerSecurity:
    """The net layer's `ListenerSecurity` of one listener (TlsConfigError on bad files)."""
    ssl_context = None
    source = None
    mapper = None
    if spec.uses_tls:
        source = ReloadingContext(tls_settings(config, spec.name), server_context)
        ssl_context = source()
        mapper = PrincipalMapper.from_rules(
            str(listener_value(config, spec.name, "ssl.principal.mapping.rules"))
        )
    sasl = None
    if spec.uses_sasl:
        users = plain_users(jaas_options(config, spec.name, "PLAIN"))
        sasl = SaslServerConfig(
            mechanisms=sasl_mechanisms(config, spec.name),
            plain_users=users,
            scram_credentials=scram_lookup or (lambda user, mechanism: None),
            max_receive_size=int(listener_value(config, spec.name, "sasl.server.max.receive.size")),
            reauth_ms=int(listener_value(config, spec.name, "connections.max.reauth.ms")),
        )
    return ListenerSecurity(
        security_protocol=spec.security_protocol,
        ssl_context=ssl_context,
        ssl_context_source=source,
        principal_builder=mapper,
        sasl=sasl,
    )


def inter_broker_client(config: BrokerConfig, spec: ListenerSpec) -> ClientSecurity | None:
    """How this broker's clients authenticate on the inter-broker listener."""
    if spec.security_protocol == "PLAINTEXT":
        return None
    source = (
        ReloadingContext(tls_settings(config, spec.name), client_context) if spec.uses_tls else None
    )
    ssl_context = None if source is None else source()
    mechanism = None
    username = password = ""
    if spec.uses_sasl:
        mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
        jaas = jaas_options(config, spec.name, mechanism)
        username, password = jaas.get("username", ""), jaas.get("password", "")
    return ClientSecurity(
        security_protocol=spec.security_protocol,
        ssl_context=ssl_context,
        ssl_context_source=source,
        sasl_mechanism=mechanism,
        username=username,
        password=password,
    )


# ---- what the broker builds from the above (StartupError with one line on a bad config) ----


def authorizer_for(config: BrokerConfig) -> Authorizer:
    """allow-all, or ACLs (`authorizer.class.name`, `trafka.node.security.acls`)."""
    try:
        return build_authorizer(config)
    except AuthorizerConfigError as error:
        raise StartupError(str(error)) from None


def acl_service_for(
    authorizer: Authorizer, store: MetadataStore, clock: Clock
) -> AclService | None:
    """The ACL store and change listener of an ACL authorizer; None for allow-all (the ACL
    APIs then answer SECURITY_DISABLED)."""
    if isinstance(authorizer, AclAuthorizer):
        return AclService(authorizer, store, now_ms=clock.now_ms)
    return None


def inter_broker_client_for(
    config: BrokerConfig, specs: Sequence[ListenerSpec]
) -> InterBrokerClient:
    """The broker's own client (controller channel, fetchers, controlled shutdown) on the
    inter-broker listener, with that listener's TLS/SASL client side."""
    spec = next(s for s in specs if s.inter_broker)
    try:
        security = inter_broker_client(config, spec)
    except TlsConfigError as tls_error:
        raise StartupError(f"cannot set up the inter-broker client's TLS: {tls_error}") from None
    return InterBrokerClient(spec.name, security)


def listeners_for(
    config: BrokerConfig, specs: Sequence[ListenerSpec], store: LocalTreeReads
) -> list[net_server.Listener]:
    """The net server's listeners, SCRAM credentials read from the node's tree."""

    def scram_lookup(user: str, mechanism: str) -> ScramCredential | None:
        return scram_store.lookup(store, user, mechanism)

    try:
        return [
            net_server.Listener(
                spec.name,
                spec.host or "0.0.0.0",
                spec.port,
                listener_security(config, spec, scram_lookup),
            )
            for spec in specs
        ]
    except TlsConfigError as tls_error:
        raise StartupError(f"cannot set up TLS: {tls_error}") from None
