"""Issue 14 (items 1, 2, 6): real clients over secured listeners of one real knode.

Listeners: ``SASLPLAIN`` (SASL_PLAINTEXT, PLAIN users from the JAAS config), ``SCRAM``
(SASL_SSL, SCRAM-SHA-512/256 users created with AlterUserScramCredentials and stored salted
in the tree), ``MTLS`` (SSL, ``ssl.client.auth=required``, principal from the certificate
subject through ``ssl.principal.mapping.rules``) and ``INTERNAL`` (PLAINTEXT, the
inter-broker listener). confluent-kafka, kafka-python, aiokafka, kcat and kafkajs produce
and consume in a group on each secured listener; wrong passwords, forged inter-broker
requests and garbage get Kafka's answers or a closed connection, and the node stays up.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from tests.cluster import forged, secure_clients
from tests.cluster.java_support import java_command, run_program
from tests.cluster.rawkafka import frame_request, read_frame
from tests.cluster.secure_clients import Security
from tests.support.certs import CertificateAuthority, Pem
from tests.support.cluster import KnodeCluster
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from trafka.net import codec
from trafka.net.client import ConnectionBroken, KafkaConnection
from trafka.net.client_security import ClientSecurity

pytestmark = [
    pytest.mark.cluster,
    # kafka-python 3.0 reads its schemas with importlib.resources.read_text (deprecated).
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

REAUTH_MS = 3000
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@dataclass
class SecureNode:
    cluster: KnodeCluster
    ports: dict[str, int]
    ca: CertificateAuthority
    client_cert: Pem

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def security(self, listener: str, password: str | None = None) -> Security:
        if listener == "SASLPLAIN":
            return Security("SASL_PLAINTEXT", "PLAIN", "alice", password or "alice-secret")
        if listener == "SCRAM":
            return Security(
                "SASL_SSL", "SCRAM-SHA-512", "carol", password or "carol-secret", self.ca.ca_file
            )
        if listener == "MTLS":
            return Security(
                "SSL",
                None,
                ca=self.ca.ca_file,
                cert=self.client_cert.cert,
                key=self.client_cert.key,
            )
        raise AssertionError(listener)


@pytest.fixture(scope="module")
def secure_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    base: Path = tmp_path_factory.mktemp("secure")
    ca = CertificateAuthority(base / "certs")
    broker = ca.issue("broker", "localhost", "Brokers")
    client = ca.issue("alice-client", "alice", "Clients")
    cluster = KnodeCluster(base, node_count=1, start=False)
    node = cluster.nodes[1]
    ports = {
        "REAUTH": free_port(),
        "SASLPLAIN": free_port(),
        "SCRAM": free_port(),
        "MTLS": free_port(),
        "INTERNAL": node.port,
    }
    node.extra = [
        "listeners=" + ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map=SASLPLAIN:SASL_PLAINTEXT,SCRAM:SASL_SSL,MTLS:SSL,"
        "INTERNAL:PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "listener.name.reauth.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.reauth.plain.sasl.jaas.config={JAAS}",
        f"listener.name.reauth.connections.max.reauth.ms={REAUTH_MS}",
        "inter.broker.listener.name=INTERNAL",
        "listener.name.saslplain.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.saslplain.plain.sasl.jaas.config={JAAS}",
        "listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={broker.chain}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca.ca_file}",
        "listener.name.mtls.ssl.client.auth=required",
        "ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=Clients.*$/$1/L,DEFAULT",
        "group.initial.rebalance.delay.ms=0",
    ]
    with cluster:
        cluster.start_all()
        _create_scram_user(f"127.0.0.1:{ports['SASLPLAIN']}")
        yield SecureNode(cluster, ports, ca, client)


def _create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret"
            ),
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret"
            ),
        ]
    )
    for future in futures.values():
        future.result(30)


@pytest.mark.parametrize("client", list(secure_clients.CLIENTS))
@pytest.mark.parametrize("listener", ["SCRAM", "MTLS", "SASLPLAIN"])
def test_real_clients_produce_and_consume(
    secure_node: SecureNode, client: str, listener: str
) -> None:
    topic = f"sec-{listener.lower()}-{client}"
    function = secure_clients.CLIENTS[client]
    seen = function(secure_node.bootstrap(listener), secure_node.security(listener), topic)
    assert seen == secure_clients.expected(client)


def _authenticate(port: int, security: ClientSecurity) -> None:
    async def run() -> None:
        connection = await KafkaConnection.connect(
            "127.0.0.1", port, security=security, connect_timeout_s=30
        )
        await connection.close()

    trio.run(run)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_wrong_password_gets_sasl_authentication_failed_and_a_closed_connection(
    secure_node: SecureNode, mechanism: str
) -> None:
    listener = "SASLPLAIN" if mechanism == "PLAIN" else "SCRAM"
    user = "alice" if mechanism == "PLAIN" else "carol"
    protocol = "SASL_PLAINTEXT" if mechanism == "PLAIN" else "SASL_SSL"
    context = None
    if protocol == "SASL_SSL":
        context = ssl.create_default_context(cafile=str(secure_node.ca.ca_file))
    wrong = ClientSecurity(protocol, context, mechanism, user, "wrong")
    with pytest.raises(ConnectionBroken) as caught:
        _authenticate(secure_node.ports[listener], wrong)
    expected = (
        "Authentication failed: Invalid username or password"
        if mechanism == "PLAIN"
        else "Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {mechanism}"
    )
    assert expected in str(caught.value)
    right = ClientSecurity(protocol, context, mechanism, user, f"{user}-secret")
    _authenticate(secure_node.ports[listener], right)
    assert secure_node.cluster.nodes[1].running


def _raw_sasl(port: int, frames: list[bytes]) -> list[bytes | None]:
    """Send frames one by one on one plain connection; each answer or None (closed)."""
    answers: list[bytes | None] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                answers.append(None)
                break
            answer = read_frame(sock, timeout_s=15)
            answers.append(answer)
            if answer is None:
                break
    return answers


def _sasl_handshake(mechanism: str) -> bytes:
    cls = codec.request_class(17, 1)
    assert cls is not None
    return frame_request(17, 1, 1, codec.encode_request(cls(mechanism=mechanism)))


def _sasl_authenticate(token: bytes, correlation_id: int = 2) -> bytes:
    cls = codec.request_class(36, 2)
    assert cls is not None
    return frame_request(36, 2, correlation_id, codec.encode_request(cls(auth_bytes=token)))


def _error_code(frame: bytes | None, flexible: bool) -> int:
    assert frame is not None
    offset = 4 + (1 if flexible else 0)  # correlation id (+ empty tagged fields)
    (code,) = struct.unpack_from(">h", frame, offset)
    return int(code)


def test_bad_sasl_input_gets_kafkas_answer_or_a_closed_connection(
    secure_node: SecureNode,
) -> None:
    plain_port = secure_node.ports["SASLPLAIN"]
    # Truncated PLAIN token: SASL_AUTHENTICATION_FAILED, then closed.
    answers = _raw_sasl(
        plain_port,
        [_sasl_handshake("PLAIN"), _sasl_authenticate(b"\0alice"), _sasl_handshake("PLAIN")],
    )
    assert _error_code(answers[0], False) == 0
    assert _error_code(answers[1], True) == ErrorCode.sasl_authentication_failed
    assert answers[2] is None
    # Oversized token (above sasl.server.max.receive.size): refused, closed.
    answers = _raw_sasl(plain_port, [_sasl_handshake("PLAIN"), _sasl_authenticate(b"\0" * 600_000)])
    assert answers[-1] is None or _error_code(answers[-1], True) == (
        ErrorCode.sasl_authentication_failed
    )
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM, then closed.
    answers = _raw_sasl(plain_port, [_sasl_handshake("GSSAPI"), _sasl_handshake("PLAIN")])
    assert _error_code(answers[0], False) == ErrorCode.unsupported_sasl_mechanism
    assert answers[1] is None
    # A Metadata request before authentication: closed.
    metadata = codec.request_class(3, 9)
    assert metadata is not None
    body = codec.encode_request(
        metadata(
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    )
    assert _raw_sasl(plain_port, [frame_request(3, 9, 1, body)]) == [None]
    # A SASL handshake on the PLAINTEXT listener: ILLEGAL_SASL_STATE.
    answers = _raw_sasl(secure_node.ports["INTERNAL"], [_sasl_handshake("PLAIN")])
    assert _error_code(answers[0], False) == ErrorCode.illegal_sasl_state
    assert secure_node.cluster.nodes[1].running


def test_wrong_scram_proof_and_garbage_tls_are_refused(secure_node: SecureNode) -> None:
    scram_port = secure_node.ports["SCRAM"]
    # Garbage instead of a TLS ClientHello: the connection is closed, nothing answered.
    with socket.create_connection(("127.0.0.1", scram_port), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x10" + b"GET / HTTP/1.1\r\n" * 10)
        sock.settimeout(15)
        try:
            data = sock.recv(1024)
        except ConnectionResetError:
            data = b""
    assert b"HTTP" not in data
    # A forged SCRAM proof over TLS.
    context = ssl.create_default_context(cafile=str(secure_node.ca.ca_file))
    with (
        socket.create_connection(("127.0.0.1", scram_port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(_sasl_handshake("SCRAM-SHA-512"))
        assert _error_code(read_frame(sock), False) == 0
        sock.sendall(_sasl_authenticate(b"n,,n=carol,r=abcdef", 2))
        first = read_frame(sock)
        assert _error_code(first, True) == 0
        assert first is not None
        nonce = first[first.index(b"r=abcdef") + 2 :].split(b",")[0]
        forged = b"c=biws,r=" + nonce + b",p=" + b"A" * 88
        sock.sendall(_sasl_authenticate(forged, 3))
        assert _error_code(read_frame(sock), True) == ErrorCode.sasl_authentication_failed
        assert read_frame(sock, timeout_s=15) is None
    # A client without a certificate on the mTLS listener cannot complete the handshake.
    with (
        socket.create_connection(("127.0.0.1", secure_node.ports["MTLS"]), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError, OSError)),
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(frame_request(18, 0, 1, b""))
        if read_frame(sock, timeout_s=15) is None:
            raise OSError("closed")
    assert secure_node.cluster.nodes[1].running


def test_a_secured_client_cannot_act_as_the_controller_or_a_replica(
    secure_node: SecureNode,
) -> None:
    security = ClientSecurity(
        "SASL_SSL",
        ssl.create_default_context(cafile=str(secure_node.ca.ca_file)),
        "SCRAM-SHA-512",
        "carol",
        "carol-secret",
    )

    async def attack() -> list[Any]:
        answers = []
        for request in (
            forged.update_metadata(),
            forged.leader_and_isr("sec-scram-confluent-kafka"),
            forged.stop_replica("sec-scram-confluent-kafka"),
            forged.controlled_shutdown(),
            forged.follower_fetch("sec-scram-confluent-kafka", 10**9),
        ):
            connection = await KafkaConnection.connect(
                "127.0.0.1", secure_node.ports["SCRAM"], security=security
            )
            try:
                answers.append(await connection.request(request, timeout_s=30))
            finally:
                await connection.close()
        return answers

    for answer in trio.run(attack):
        assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert secure_node.cluster.nodes[1].running


def test_scram_credentials_are_stored_salted(secure_node: SecureNode) -> None:
    from trafka.net.messages.describe_znodes import DescribeZNodesRequestV0

    async def read() -> Any:
        connection = await KafkaConnection.connect("127.0.0.1", secure_node.ports["INTERNAL"])
        try:
            return await connection.request(
                DescribeZNodesRequestV0(paths=("/config/users/carol",), include_data=True)
            )
        finally:
            await connection.close()

    answer = trio.run(read)
    text = repr(answer)
    assert "carol-secret" not in text
    # TrafkaDescribeZNodes never answers credentials (docs/security.md, "Authorization"):
    # the stored form is read from the node's quorum data dir, offline.
    assert [n.data for n in answer.entries if n.path == "/config/users/carol"] == [None]
    from trafka.metadata_quorum.transport import load_data_dir

    quorum_dir = secure_node.cluster.nodes[1].data_dir / "quorum"

    def stored() -> bytes | None:
        # The journal's commit index reaches the disk once a second: poll.
        tree = load_data_dir(quorum_dir).tree
        return (
            bytes(tree.get("/config/users/carol")[0])
            if tree.exists("/config/users/carol")
            else None
        )

    wait_until(lambda: stored() is not None, timeout_s=30, what="carol's entity on disk")
    data = stored()
    assert data is not None
    assert b"carol-secret" not in data
    entity = json.loads(data)
    for mechanism, iterations in (("SCRAM-SHA-512", 8192), ("SCRAM-SHA-256", 4096)):
        fields = dict(part.split("=", 1) for part in entity["config"][mechanism].split(","))
        assert set(fields) == {"salt", "stored_key", "server_key", "iterations"}
        assert int(fields["iterations"]) == iterations


def test_sessions_expire_and_librdkafka_reauthenticates(secure_node: SecureNode) -> None:
    """KIP-368 on the REAUTH listener (connections.max.reauth.ms=3000): a connection that
    authenticated and then waits past its session lifetime is closed on its next request;
    a confluent-kafka consumer re-authenticates and keeps consuming across several
    lifetimes."""
    import time

    port = secure_node.ports["REAUTH"]
    token = b"\0alice\0alice-secret"
    metadata = codec.request_class(3, 9)
    assert metadata is not None
    body = codec.encode_request(
        metadata(
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_sasl_handshake("PLAIN"))
        assert _error_code(read_frame(sock), False) == 0
        sock.sendall(_sasl_authenticate(token))
        answer = read_frame(sock)
        assert _error_code(answer, True) == 0
        sock.sendall(frame_request(3, 9, 3, body))
        assert read_frame(sock) is not None
        time.sleep(REAUTH_MS / 1000 + 1.5)
        sock.sendall(frame_request(3, 9, 4, body))
        assert read_frame(sock, timeout_s=15) is None

    from confluent_kafka import Consumer, Producer

    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    producer = Producer(conf)
    consumer = Consumer({**conf, "group.id": "reauth", "auto.offset.reset": "earliest"})
    consumer.subscribe(["reauth-topic"])
    seen = 0
    try:
        deadline = time.monotonic() + 4 * REAUTH_MS / 1000 + 20
        sent = 0
        while time.monotonic() < deadline and (sent < 8 or seen < sent):
            if sent < 8:
                producer.produce("reauth-topic", value=f"r{sent}".encode())
                producer.flush(10)
                sent += 1
            message = consumer.poll(REAUTH_MS / 4000)
            if message is not None and message.error() is None:
                seen += 1
        assert sent == 8 and seen == 8
    finally:
        consumer.close()
    log = secure_node.cluster.nodes[1].stderr_path.read_text()
    closed = [
        line for line in log.splitlines() if "on REAUTH" in line and "session expired" in line
    ]
    # Only the raw connection above was cut: librdkafka re-authenticated in time.
    assert len(closed) == 1, closed


def _java_security_properties(secure_node: SecureNode, listener: str) -> str:
    """Kafka's client settings for the Java client, PEM stores inline (KIP-651:
    ssl.truststore.certificates, ssl.keystore.certificate.chain + ssl.keystore.key)."""

    def inline(path: Path) -> str:
        return path.read_text().strip().replace("\n", "\\n")

    lines = [
        "ssl.truststore.type=PEM",
        f"ssl.truststore.certificates={inline(secure_node.ca.ca_file)}",
    ]
    if listener == "SCRAM":
        lines += [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="carol" password="carol-secret";',
        ]
    else:
        lines += [
            "security.protocol=SSL",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.certificate.chain={inline(secure_node.client_cert.cert)}",
            f"ssl.keystore.key={inline(secure_node.client_cert.key)}",
        ]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize("listener", ["SCRAM", "MTLS"])
def test_java_client_over_scram_and_mtls(
    secure_node: SecureNode, listener: str, tmp_path: Path
) -> None:
    """Kafka's Java client (tests/java SecureClients): SASL_SSL with SCRAM-SHA-512, and SSL
    with a client certificate; admin calls, an acks=all producer and a group consumer."""
    java_command()  # fails at once when tests/java is not built
    properties = tmp_path / "java-client.properties"
    properties.write_text(_java_security_properties(secure_node, listener))
    topic = f"sec-java-{listener.lower()}"
    count = 50
    records, _ = run_program(
        "SecureClients", secure_node.bootstrap(listener), str(properties), topic, str(count)
    )
    (result,) = records
    assert result["partitions"] == 2 and result["nodes"] == 1, result
    assert result["sent"] == count, result
    assert result["received"] == count, result
    assert result["committed_total"] == count, result
    assert result["group_listed"] is True, result
