"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) against the RFC test vectors and a client."""

from __future__ import annotations

import base64
import random

import pytest

from trafka.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    ScramState,
    make_credential,
)

# RFC 7677 §3: user "user", password "pencil".
SALT_256 = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _server(credential: ScramCredential | None, mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    return ScramServer(
        mechanism,
        lambda user, mech: credential if user == "user" else None,
        random.Random(7),
        server_nonce=SERVER_NONCE,
    )


def test_rfc_7677_sha_256_vector() -> None:
    server = _server(make_credential("SCRAM-SHA-256", "pencil", SALT_256, 4096))
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc_7677_client_produces_the_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", "rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == CLIENT_FIRST
    assert client.final_message(SERVER_FIRST) == CLIENT_FINAL
    client.verify_server_final(SERVER_FINAL)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_and_a_wrong_password_fails(mechanism: str) -> None:
    credential = make_credential(mechanism, "secret", b"0123456789abcdef", 8192)
    assert ScramCredential.from_text(credential.to_text()) == credential
    assert "secret" not in credential.to_text()
    for password, succeeds in (("secret", True), ("wrong", False)):
        server = _server(credential, mechanism)
        client = ScramClient(mechanism, "user", password, "nonce123")
        server_first = server.evaluate(client.first_message())
        final = client.final_message(server_first)
        if succeeds:
            client.verify_server_final(server.evaluate(final))
            assert server.state is ScramState.COMPLETE
        else:
            with pytest.raises(ScramError):
                server.evaluate(final)
            assert server.state is ScramState.FAILED and server.username is None


def test_an_unknown_user_runs_the_exchange_and_fails_at_the_proof() -> None:
    server = _server(None)
    client = ScramClient("SCRAM-SHA-256", "nobody", "x", "abc")
    first = server.evaluate(client.first_message())
    assert first.startswith(b"r=abc") and b",i=4096" in first
    with pytest.raises(ScramError):
        server.evaluate(client.final_message(first))


@pytest.mark.parametrize(
    "messages",
    [
        [b""],
        [b"\xff\xfe"],
        [b"p,,n=user,r=abc"],
        [b"n,,r=abc"],
        [b"n,,n=,r=abc"],
        [b"n,,n=us=er,r=abc"],
        [CLIENT_FIRST, b"c=biws,r=WRONGNONCE,p=AAAA"],
        [CLIENT_FIRST, b"c=biws,r=x"],
        [CLIENT_FIRST, b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AA=="],
        [CLIENT_FIRST, CLIENT_FINAL[:-10] + b"!!!!!!!!!!"],
        [CLIENT_FIRST, b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA"],
    ],
)
def test_malformed_or_forged_messages_fail(messages: list[bytes]) -> None:
    server = _server(make_credential("SCRAM-SHA-256", "pencil", SALT_256, 4096))
    with pytest.raises(ScramError):
        for message in messages:
            server.evaluate(message)
    assert server.state is ScramState.FAILED
    with pytest.raises(ScramError):
        server.evaluate(CLIENT_FINAL)


def test_iterations_outside_kafkas_bounds_are_refused() -> None:
    with pytest.raises(ScramError, match="must be between 4096 and 16384"):
        make_credential("SCRAM-SHA-512", "x", b"salt", 1000)


def _final(password: str, server_first: bytes, echoed_nonce: str, client_first_bare: str) -> bytes:
    """A client-final message echoing `echoed_nonce`, proof computed as librdkafka does
    (AuthMessage with the real server-first and the echoed nonce)."""
    import hashlib
    import hmac

    attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={echoed_nonce}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_librdkafka_before_2_6_1_doubled_client_nonce_is_accepted_but_nothing_else() -> None:
    """librdkafka#4895: client-final carries client nonce + server-first nonce."""
    credential = make_credential("SCRAM-SHA-256", "pencil", SALT_256, 4096)
    cases = [
        ("pencil", "abc", True),
        ("pencil", "", True),
        ("wrong", "abc", False),
        ("pencil", "xyz", False),
        ("pencil", "abcabc", False),
    ]
    for password, prefix, accepted in cases:
        server = _server(credential)
        server_first = server.evaluate(b"n,,n=user,r=abc")
        nonce = server_first.decode().split(",")[0][2:]
        final = _final(password, server_first, prefix + nonce, "n=user,r=abc")
        if accepted:
            server.evaluate(final)
            assert server.complete
        else:
            with pytest.raises(ScramError):
                server.evaluate(final)
