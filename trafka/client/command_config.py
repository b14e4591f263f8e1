"""``--command-config FILE``: a Kafka client properties file for the tools (kafka-*.sh's option).

The file uses Kafka's client config names::

    security.protocol=SASL_SSL                 # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism=SCRAM-SHA-512               # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="admin-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/ca.pem       # or ssl.truststore.certificates (inline PEM)
    ssl.keystore.type=PEM                      # client certificate (mTLS):
    ssl.keystore.location=/path/client.pem     # chain + key, or ssl.keystore.certificate.chain
    ssl.key.password=...                       #   + ssl.keystore.key
    ssl.endpoint.identification.algorithm=https   # "" turns host name checking off

`parse_properties` reads Java's properties syntax (``key=value`` or ``key: value``, ``#``/``!``
comments, ``\\`` line continuations); `client_security` turns the keys into the net layer's
`ClientSecurity`. Only PEM stores are supported (a JKS/PKCS12 store is refused with one line),
as on the broker.

`ktool` strips ``--command-config FILE`` from its command line wherever it stands (Kafka's
tools take it per command) and sets `current()`, which every tool connection uses.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from trafka.net.client_security import ClientSecurity
from trafka.security.sasl import parse_jaas

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class CommandConfigError(ValueError):
    """A command config trafka's tools cannot use, with the reason in one line."""


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: ``key=value`` / ``key: value`` / ``key value``, comments, and
    lines continued with a trailing backslash."""
    properties: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, _, value = line.partition(" ")
        else:
            key, value = line[:cut], line[cut + 1 :]
        properties[key.strip()] = value.strip()
    return properties


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The `ClientSecurity` the keys describe; None for PLAINTEXT."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(
            f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}"
        )
    if protocol == "PLAINTEXT":
        return None
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = _ssl_context(properties)
    mechanism = None
    username = password = ""
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = properties.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise CommandConfigError(
                f"sasl.mechanism={mechanism} is not supported (use {', '.join(MECHANISMS)})"
            )
        jaas = parse_jaas(properties.get("sasl.jaas.config"))
        username, password = jaas.get("username", ""), jaas.get("password", "")
        if not username:
            raise CommandConfigError('sasl.jaas.config must give username="..." password="..."')
    return ClientSecurity(
        security_protocol=protocol,
        ssl_context=ssl_context,
        sasl_mechanism=mechanism,
        username=username,
        password=password,
    )


def _ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    from trafka.net.tls import TlsConfigError, TlsSettings, client_context

    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        store_type = properties.get(key, "PEM").strip().upper()
        if store_type != "PEM":
            raise CommandConfigError(f"{key}={store_type}: only PEM stores are supported")

    def value(key: str) -> str | None:
        found = properties.get(key)
        return found if found else None

    settings = TlsSettings(
        keystore_location=value("ssl.keystore.location"),
        keystore_certificate_chain=value("ssl.keystore.certificate.chain"),
        keystore_key=value("ssl.keystore.key"),
        key_password=value("ssl.key.password"),
        truststore_location=value("ssl.truststore.location"),
        truststore_certificates=value("ssl.truststore.certificates"),
        endpoint_identification=properties.get("ssl.endpoint.identification.algorithm", "https")
        .strip()
        .lower()
        == "https",
    )
    try:
        return client_context(settings)
    except (TlsConfigError, OSError) as error:
        raise CommandConfigError(f"cannot set up TLS: {error}") from None


def load(path: Path) -> ClientSecurity | None:
    try:
        text = path.read_text()
    except OSError as error:
        raise CommandConfigError(f"cannot read --command-config {path}: {error.strerror}") from None
    return client_security(parse_properties(text))


_current: ClientSecurity | None = None


def current() -> ClientSecurity | None:
    """The security of the tool's connections (None: PLAINTEXT)."""
    return _current


def use(security: ClientSecurity | None) -> None:
    global _current
    _current = security


def strip_option(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--command-config FILE`` / ``--command-config=FILE``, and FILE."""
    rest: list[str] = []
    found: str | None = None
    index = 0
    while index < len(argv):
        argument = argv[index]
        if argument == "--command-config":
            if index + 1 >= len(argv):
                raise CommandConfigError("--command-config needs a file name")
            found = argv[index + 1]
            index += 2
            continue
        if argument.startswith("--command-config="):
            found = argument.split("=", 1)[1]
            index += 1
            continue
        rest.append(argument)
        index += 1
    return rest, found
