"""The failure of a SASL exchange (any mechanism): the exchange is over."""

from __future__ import annotations


class SaslError(Exception):
    """A malformed token, a wrong password or proof; the message may go to the client
    (PLAIN) or be replaced by Kafka's generic one (SCRAM)."""
