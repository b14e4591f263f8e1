"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's KIP-84): credentials and the
server's state machine.

Credentials (what the tree stores, never the password): ``salt``, ``stored_key`` =
H(ClientKey), ``server_key`` = HMAC(SaltedPassword, "Server Key"), ``iterations``, where
SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations) and ClientKey =
HMAC(SaltedPassword, "Client Key"). Kafka's string form (ScramCredentialUtils), stored under
``/config/users/<user>`` by mechanism name::

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

Exchange (server side)::

    client-first   n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

`ScramServer` states: RECEIVE_CLIENT_FIRST -> RECEIVE_CLIENT_FINAL -> COMPLETE, or FAILED
from either (a failed exchange never completes). The client-final nonce must be the
server-first one; librdkafka before 2.6.1 (librdkafka#4895: Debian's kcat 1.7.1 with
librdkafka 2.0.2) sends the client nonce once more in front of it, which Kafka 3.8.1-3.9
accepted (``endsWith``) and Kafka 4 refuses: accepted here in exactly that form (the server
nonce is still in it, so no replay). Unknown users run the exchange with a fake
credential (so the answer does not reveal whether the user exists) and fail at the proof.
Pure: the nonce and the fake salt come from a `random.Random`-like source the caller passes.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from trafka.security.errors import SaslError

MECHANISMS: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
"""Kafka's bounds (ScramMechanism.minIterations / maxIterations)."""


class ScramError(SaslError):
    """A malformed message or a failed proof; the exchange is over."""


class RandomSource(Protocol):
    def randbytes(self, n: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        def b64(raw: bytes) -> str:
            return base64.b64encode(raw).decode("ascii")

        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        try:
            fields = dict(part.split("=", 1) for part in text.split(","))
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (KeyError, ValueError) as error:
            raise ScramError(f"invalid SCRAM credential: {error}") from None


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _hash_name(mechanism)).digest()


def _h(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_hash_name(mechanism), data).digest()


def make_credential(
    mechanism: str, password: str, salt: bytes, iterations: int = MIN_ITERATIONS
) -> ScramCredential:
    """The stored form of `password` (RFC 5802 §3)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"Invalid iterations {iterations} for mechanism {mechanism}: must be between "
            f"{MIN_ITERATIONS} and {MAX_ITERATIONS}"
        )
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=_h(mechanism, client_key),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


_SASLNAME_ESCAPE = re.compile(r"=(?!2C|3D)")


def _decode_saslname(text: str) -> str:
    if _SASLNAME_ESCAPE.search(text):
        raise ScramError("invalid username encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


def _encode_saslname(text: str) -> str:
    return text.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> list[tuple[str, str]]:
    result = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM attribute {part[:20]!r}")
        result.append((part[0], part[2:]))
    return result


class ScramState(enum.Enum):
    """RECEIVE_CLIENT_FIRST: waits for client-first -> RECEIVE_CLIENT_FINAL or FAILED.
    RECEIVE_CLIENT_FINAL: waits for client-final -> COMPLETE or FAILED.
    COMPLETE, FAILED: final."""

    RECEIVE_CLIENT_FIRST = "receive client first"
    RECEIVE_CLIENT_FINAL = "receive client final"
    COMPLETE = "complete"
    FAILED = "failed"


VALID_PREVIOUS_STATES: Final = {
    ScramState.RECEIVE_CLIENT_FIRST: frozenset[ScramState](),
    ScramState.RECEIVE_CLIENT_FINAL: frozenset({ScramState.RECEIVE_CLIENT_FIRST}),
    ScramState.COMPLETE: frozenset({ScramState.RECEIVE_CLIENT_FINAL}),
    ScramState.FAILED: frozenset(
        {ScramState.RECEIVE_CLIENT_FIRST, ScramState.RECEIVE_CLIENT_FINAL}
    ),
}

CredentialLookup = Callable[[str, str], "ScramCredential | None"]
"""(username, mechanism) -> the stored credential, None for an unknown user."""


class ScramServer:
    """One SCRAM exchange, server side. `evaluate(token)` -> the next server message, or
    ScramError (state FAILED). `username` is set once the exchange is COMPLETE."""

    def __init__(
        self,
        mechanism: str,
        credentials: CredentialLookup,
        random: RandomSource,
        *,
        server_nonce: str | None = None,
    ) -> None:
        _hash_name(mechanism)
        self.mechanism = mechanism
        self._credentials = credentials
        self._random = random
        self._server_nonce = server_nonce
        self.state = ScramState.RECEIVE_CLIENT_FIRST
        self.username: str | None = None
        self._claimed_user = ""
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self._gs2_header = ""
        self.extensions: dict[str, str] = {}

    def _transition_to(self, state: ScramState) -> None:
        assert self.state in VALID_PREVIOUS_STATES[state], (self.state, state)
        self.state = state

    @property
    def complete(self) -> bool:
        return self.state is ScramState.COMPLETE

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self.state is ScramState.RECEIVE_CLIENT_FIRST:
                return self._client_first(token)
            if self.state is ScramState.RECEIVE_CLIENT_FINAL:
                return self._client_final(token)
            raise ScramError(f"unexpected SCRAM message in state {self.state.value}")
        except ScramError:
            if self.state is not ScramState.FAILED and self.state is not ScramState.COMPLETE:
                self._transition_to(ScramState.FAILED)
            raise
        except (UnicodeDecodeError, ValueError) as error:
            if self.state is not ScramState.FAILED:
                self._transition_to(ScramState.FAILED)
            raise ScramError(f"invalid SCRAM message: {error}") from None

    def _client_first(self, token: bytes) -> bytes:
        text = token.decode("utf-8")
        # gs2-header: gs2-cbind-flag "," [authzid] ","
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or flag not in ("n", "y"):
            raise ScramError("invalid SCRAM client first message (gs2 header)")
        if authzid and not authzid.startswith("a="):
            raise ScramError("invalid SCRAM client first message (authzid)")
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("invalid SCRAM client first message")
        user = _decode_saslname(attributes[0][1])
        client_nonce = attributes[1][1]
        if not user or not client_nonce or any(ord(c) < 0x21 or c == "," for c in client_nonce):
            raise ScramError("invalid SCRAM client first message (user or nonce)")
        if authzid and _decode_saslname(authzid[2:]) != user:
            raise ScramError(
                "Authentication failed: Client requested an authorization id "
                "that is different from username"
            )
        self.extensions = {key: value for key, value in attributes[2:]}
        credential = self._credentials(user, self.mechanism)
        self._known_user = credential is not None
        if credential is None:
            # A stand-in so the exchange looks the same for unknown users; fails at the proof.
            credential = ScramCredential(
                self._random.randbytes(16), b"\0" * 64, b"\0" * 64, MIN_ITERATIONS
            )
        self._credential = credential
        self._claimed_user = user
        server_nonce = self._server_nonce or base64.b64encode(self._random.randbytes(24)).decode()
        self._client_nonce = client_nonce
        self._nonce = client_nonce + server_nonce
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._transition_to(ScramState.RECEIVE_CLIENT_FINAL)
        return self._server_first.encode("utf-8")

    def _client_final(self, token: bytes) -> bytes:
        text = token.decode("utf-8")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("invalid SCRAM client final message (no proof)")
        attributes = dict(_attributes(without_proof))
        expected_binding = base64.b64encode(self._gs2_header.encode("utf-8")).decode("ascii")
        if attributes.get("c") != expected_binding:
            raise ScramError("invalid SCRAM client final message (channel binding)")
        echoed = attributes.get("r")
        if echoed != self._nonce and echoed != self._client_nonce + self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        proof = base64.b64decode(proof_part, validate=True)
        credential = self._credential
        assert credential is not None
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, without_proof)
        ).encode("utf-8")
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not self._known_user or not hmac.compare_digest(
            _h(self.mechanism, client_key), credential.stored_key
        ):
            raise ScramError("Invalid client credentials")
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        self.username = self._claimed_user
        self._transition_to(ScramState.COMPLETE)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (the broker's own inter-broker client, and tests)."""

    def __init__(self, mechanism: str, username: str, password: str, client_nonce: str) -> None:
        _hash_name(mechanism)
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.client_nonce = client_nonce
        self._client_first_bare = f"n={_encode_saslname(username)},r={client_nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attributes = dict(_attributes(text))
        nonce, salt, iterations = attributes["r"], attributes["s"], int(attributes["i"])
        if not nonce.startswith(self.client_nonce):
            raise ScramError("Invalid server nonce: does not start with client nonce")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"Invalid iterations {iterations}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt), iterations)
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key = _h(self.mechanism, client_key)
        without_proof = f"c=biws,r={nonce}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode("utf-8")
        signature = _hmac(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = _hmac(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8")
        if text.startswith("e="):
            raise ScramError(f"SCRAM server error: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise ScramError("Invalid server signature in server final message")
