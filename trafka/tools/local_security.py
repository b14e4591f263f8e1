"""`knode cluster up --security sasl_ssl`: what a local secured cluster needs.

In `<dir>/security/` (created at the first `up`, reused afterwards):

* ``ca.pem`` / ``ca.key``: a local certificate authority (EC P-256, 10 years), the key mode
  0600; ``node-<id>.pem``: each node's key and certificate (SAN localhost and 127.0.0.1),
  mode 0600, signed by that CA;
* ``credentials.properties`` (0600): the generated passwords of ``admin`` (clients, SCRAM-SHA-512)
  and ``broker`` (inter-broker, PLAIN over TLS);
* ``broker.properties`` (0600): the broker principal's client settings (what `up` uses to create
  the admin user; ``ktool --command-config`` on the INTERNAL listener);

and in `<dir>/`: ``client.properties`` (0600, Kafka's client names: ``ktool --command-config``,
kafka-*.sh ``--command-config``, any Java client) and ``client-librdkafka.properties`` (the same
in librdkafka's names: confluent-kafka, kcat ``-F``).

Each node gets a ``CLIENT`` listener (SASL_SSL, SCRAM-SHA-512) on its usual port and an
``INTERNAL`` one (SASL_SSL, PLAIN, ``inter.broker.listener.name``) on ``internal-port+id-1``;
Kafka's ACL authorizer with ``super.users=User:admin;User:broker``. Once the nodes are up,
`create_admin` stores admin's salted SCRAM-SHA-512 credential (AlterUserScramCredentials, as
the broker principal over the INTERNAL listener).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.tools.configs_cmd import upsertions

PROTOCOLS: Final = ("sasl_ssl",)
ADMIN: Final = "admin"
BROKER: Final = "broker"
ADMIN_ITERATIONS: Final = 8192
CA_DAYS: Final = 3650
NODE_DAYS: Final = 825
SCRAM_LOGIN: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"


class LocalSecurityError(Exception):
    """Why the local security files could not be made or used (one line)."""


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, mode 0600 from the start."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "trafka local cluster"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True, slots=True)
class LocalSecurity:
    directory: Path
    """`<dir>/security`."""
    admin_password: str
    broker_password: str

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def node_keystore(self, node_id: int) -> Path:
        return self.directory / f"node-{node_id}.pem"

    @property
    def broker_properties_file(self) -> Path:
        return self.directory / "broker.properties"

    def node_settings(self, node_id: int, port: int, internal_port: int) -> list[str]:
        """The security lines of node `node_id`'s server.properties."""
        jaas = (
            f'{PLAIN_LOGIN} required username="{BROKER}" password="{self.broker_password}" '
            f'user_{BROKER}="{self.broker_password}";'
        )
        return [
            f"listeners=CLIENT://127.0.0.1:{port + node_id - 1},"
            f"INTERNAL://127.0.0.1:{internal_port + node_id - 1}",
            "listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            "listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.node_keystore(node_id).resolve()}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_file.resolve()}",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            f"super.users=User:{ADMIN};User:{BROKER}",
        ]

    def client_properties(self) -> str:
        """Kafka's client settings of the admin user (ktool, kafka-*.sh, Java clients)."""
        return "\n".join(
            [
                "# written by 'knode cluster up --security sasl_ssl': the admin (a super user)",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=SCRAM-SHA-512",
                f'sasl.jaas.config={SCRAM_LOGIN} required username="{ADMIN}" '
                f'password="{self.admin_password}";',
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={self.ca_file.resolve()}",
                "",
            ]
        )

    def librdkafka_properties(self) -> str:
        """The same settings in librdkafka's names (confluent-kafka, kcat -F)."""
        return "\n".join(
            [
                "# written by 'knode cluster up --security sasl_ssl': the admin (a super user)",
                "security.protocol=sasl_ssl",
                "sasl.mechanisms=SCRAM-SHA-512",
                f"sasl.username={ADMIN}",
                f"sasl.password={self.admin_password}",
                f"ssl.ca.location={self.ca_file.resolve()}",
                "",
            ]
        )

    def broker_properties(self) -> str:
        """The broker principal's client settings (the INTERNAL listener)."""
        return "\n".join(
            [
                "# the broker principal, for the INTERNAL listener (knode cluster up)",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=PLAIN",
                f'sasl.jaas.config={PLAIN_LOGIN} required username="{BROKER}" '
                f'password="{self.broker_password}";',
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={self.ca_file.resolve()}",
                "",
            ]
        )


def _credentials(path: Path) -> tuple[str, str]:
    if path.exists():
        if path.stat().st_mode & 0o077:
            raise LocalSecurityError(f"{path} is readable by others: chmod 600 it")
        values = command_config.parse_properties(path.read_text())
        admin, broker = values.get("admin.password", ""), values.get("broker.password", "")
        if len(admin) >= 16 and len(broker) >= 16:
            return admin, broker
        raise LocalSecurityError(f"{path} lacks admin.password / broker.password")
    admin, broker = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    write_private(path, f"admin.password={admin}\nbroker.password={broker}\n".encode())
    return admin, broker


def _authority(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_file, key_file = directory / "ca.pem", directory / "ca.key"
    if cert_file.exists() and key_file.exists():
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise LocalSecurityError(f"{key_file} is not an EC key")
        return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name("trafka local CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    write_private(key_file, _key_pem(key))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _node_keystore(
    path: Path, node_id: int, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
) -> None:
    """Key + certificate of one node (Kafka's PEM ssl.keystore.location), kept while valid."""
    if path.exists():
        try:
            cert = x509.load_pem_x509_certificate(path.read_bytes())
        except ValueError:
            cert = None
        now = datetime.datetime.now(datetime.UTC)
        if (
            cert is not None
            and cert.issuer == ca.subject
            and cert.not_valid_after_utc > now + datetime.timedelta(days=1)
        ):
            return
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"node-{node_id}"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=NODE_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_private(path, _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM))


def prepare(cluster_directory: Path, nodes: int) -> LocalSecurity:
    """The CA, the node keystores, the passwords and the client files of a local cluster."""
    directory = cluster_directory / "security"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        admin, broker = _credentials(directory / "credentials.properties")
        security = LocalSecurity(directory, admin, broker)
        ca, ca_key = _authority(directory)
        for node_id in range(1, nodes + 1):
            _node_keystore(security.node_keystore(node_id), node_id, ca, ca_key)
        write_private(security.broker_properties_file, security.broker_properties().encode())
        write_private(
            cluster_directory / "client.properties", security.client_properties().encode()
        )
        write_private(
            cluster_directory / "client-librdkafka.properties",
            security.librdkafka_properties().encode(),
        )
    except OSError as error:
        raise LocalSecurityError(f"cannot write {error.filename}: {error.strerror}") from None
    return security


async def _upsert_admin(security: LocalSecurity, host: str, port: int) -> int:
    """AlterUserScramCredentials for admin as the broker principal; the error code."""
    client = command_config.load(security.broker_properties_file)
    connection = await KafkaConnection.connect(
        host, port, client_id="knode-cluster-up", security=client
    )
    try:
        await connection.negotiate_api_versions()
        api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
        version = connection.version_for(api_key, 0, 0)
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        data = {
            "deletions": [],
            "upsertions": upsertions(
                ADMIN, {"SCRAM-SHA-512": (ADMIN_ITERATIONS, security.admin_password)}
            ),
        }
        response = await connection.request(build(request_class, data), version)
        return max((int(result.error_code) for result in response.results), default=0)
    finally:
        await connection.close()


def create_admin(security: LocalSecurity, host: str, port: int, timeout_s: float) -> None:
    """Store admin's SCRAM-SHA-512 credential, retrying while the cluster settles."""

    async def run() -> None:
        last = "no answer"
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    code = await _upsert_admin(security, host, port)
                except (ClientError, OSError, command_config.CommandConfigError) as error:
                    last = str(error)
                else:
                    if code == 0:
                        return
                    last = f"error code {code}"
                await trio.sleep(0.5)
        raise LocalSecurityError(f"could not create the admin user: {last}")

    trio.run(run)
