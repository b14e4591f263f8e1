"""SASL on the server: the mechanisms' settings, PLAIN, and one exchange per connection.

`SaslServerConfig` (per listener): enabled mechanisms, PLAIN's users (from
``listener.name.<l>.plain.sasl.jaas.config``'s ``user_<name>="<password>"`` entries), the
SCRAM credential lookup (the tree's ``/config/users/<user>``), the largest token accepted
(``sasl.server.max.receive.size``) and the session lifetime (``connections.max.reauth.ms``).

`create_server(mechanism, config, random)` returns a `PlainServer` or a `ScramServer`; both
have ``evaluate(token) -> bytes`` (raising `SaslFailed`/`ScramError`), ``complete`` and
``username``. Pure: no sockets, no clock.

`parse_jaas(text)` reads the options of a JAAS login config line
(``org.apache.kafka.common.security.plain.PlainLoginModule required username="a"
password="b" user_a="b";``).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from trafka.security.errors import SaslError
from trafka.security.scram import MECHANISMS as SCRAM_MECHANISMS
from trafka.security.scram import RandomSource, ScramCredential, ScramServer

PLAIN: Final = "PLAIN"
SUPPORTED_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)
PLAIN_FAILED_MESSAGE: Final = "Authentication failed: Invalid username or password"
_JAAS_OPTION: Final = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SaslFailed(SaslError):
    """The exchange failed; the message is what the client may be told."""


class SaslMechanismServer(Protocol):
    username: str | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credentials: Callable[[str, str], ScramCredential | None] = lambda user, mech: None
    max_receive_size: int = 524288
    reauth_ms: int = 0


def parse_jaas(text: str | None) -> dict[str, str]:
    """The ``key="value"`` options of a JAAS login config (backslash escapes undone)."""
    if not text:
        return {}
    return {
        match.group(1): re.sub(r"\\(.)", r"\1", match.group(2))
        for match in _JAAS_OPTION.finditer(text)
    }


def plain_users(jaas: Mapping[str, str]) -> dict[str, str]:
    return {key[5:]: value for key, value in jaas.items() if key.startswith("user_") and key[5:]}


class PlainServer:
    """RFC 4616: one message ``[authzid] NUL authcid NUL passwd``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate(self, token: bytes) -> bytes:
        if self._complete:
            raise SaslFailed("Authentication failed: PLAIN exchange already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailed("Authentication failed: username not specified")
        if not password:
            raise SaslFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        # Compare even for unknown users, so timing does not tell whether a user exists.
        if (
            not hmac.compare_digest((expected or "\0").encode("utf-8"), password.encode("utf-8"))
            or expected is None
        ):
            raise SaslFailed(PLAIN_FAILED_MESSAGE)
        if authzid and authzid != user:
            raise SaslFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = user
        self._complete = True
        return b""


def create_server(
    mechanism: str, config: SaslServerConfig, random: RandomSource
) -> SaslMechanismServer:
    if mechanism == PLAIN:
        return PlainServer(config.plain_users)
    if mechanism in SCRAM_MECHANISMS:
        return ScramServer(mechanism, config.scram_credentials, random)
    raise SaslFailed(f"Unsupported SASL mechanism {mechanism}")
