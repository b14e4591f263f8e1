"""KafkaPrincipal: who sent a request (Kafka's `KafkaPrincipal`, type "User" + name).

What each security protocol yields (Kafka's DefaultKafkaPrincipalBuilder):

* PLAINTEXT and SSL without a client certificate: ``User:ANONYMOUS``;
* SSL with a client certificate: the certificate's subject (RFC 2253 form) mapped through
  ``ssl.principal.mapping.rules`` (`trafka.security.mapping`);
* SASL_PLAINTEXT / SASL_SSL: ``User:<the authenticated SASL username>``.

This value is the hand-over point to authorization: the net layer attaches it to the
connection and the node's `RequestContext.principal` carries it to every handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``<principal_type>:<name>``, e.g. ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice") (SecurityUtils.parseKafkaPrincipal)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal of the form <type>:<name>, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS: Final = KafkaPrincipal.user("ANONYMOUS")
