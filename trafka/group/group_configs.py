"""Per-group dynamic configs (KIP-848): `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms` on a GROUP config resource (type 32).

Kafka 4 (`GroupConfig`, `GroupConfigManager`) lets an admin override, for one group id, the
session timeout and heartbeat interval its KIP-848 members get, with IncrementalAlterConfigs /
AlterConfigs on a GROUP resource (`kafka-configs --entity-type groups --entity-name g
--alter --add-config consumer.session.timeout.ms=50000`). A group id needs no members (nor
to exist) to carry configs. Kafka's rules, checked here (INVALID_CONFIG, Kafka's messages):

* only the group keys are accepted ("Unknown group config name: x");
* values are INTs of at least 1 ("Invalid value x for configuration k: ...");
* `consumer.heartbeat.interval.ms` within `group.consumer.min/max.heartbeat.interval.ms`,
  `consumer.session.timeout.ms` within `group.consumer.min/max.session.timeout.ms`;
* the session timeout greater than the heartbeat interval.

Deviation: Kafka checks the last rule with the keys absent from the request at *Kafka's*
defaults (45000 / 5000); trafka takes them from this broker's `group.consumer.*` values,
which are what the group would actually run with.

The coordinator applies the overrides to running groups on their next heartbeat: the
heartbeat interval is in every answer and the session deadline is re-armed with the group's
session timeout at every heartbeat (as Kafka's `GroupMetadataManager` does; a change never
fences a member by itself).

Not implemented: the share-group keys (`share.*`, no share groups here) and the streams-group
keys (`streams.*`, no streams groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trafka.group.config import GroupConfig

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"

GROUP_CONFIG_KEYS: Mapping[str, tuple[str, str]] = {
    CONSUMER_HEARTBEAT_INTERVAL_MS: (
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of this consumer group.",
    ),
    CONSUMER_SESSION_TIMEOUT_MS: (
        "group.consumer.session.timeout.ms",
        "The timeout to detect client failures of this consumer group's members.",
    ),
}
"""Group key -> (the broker key it overrides, documentation); sorted by name as Kafka
lists them."""

_INT32_MAX = 2**31 - 1


class GroupConfigError(ValueError):
    """Answered as INVALID_CONFIG with this message."""


@dataclass(frozen=True, slots=True)
class GroupConfigOverrides:
    """The overrides of one group; None: the broker's `group.consumer.*` value."""

    consumer_session_timeout_ms: int | None = None
    consumer_heartbeat_interval_ms: int | None = None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfigOverrides:
        """Lenient reading of stored overrides (validated when written): a value that does
        not parse is ignored, as the broker value then applies."""
        return cls(
            consumer_session_timeout_ms=_lenient_int(properties.get(CONSUMER_SESSION_TIMEOUT_MS)),
            consumer_heartbeat_interval_ms=_lenient_int(
                properties.get(CONSUMER_HEARTBEAT_INTERVAL_MS)
            ),
        )

    def is_empty(self) -> bool:
        return self.consumer_session_timeout_ms is None and (
            self.consumer_heartbeat_interval_ms is None
        )


def _lenient_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if 1 <= value <= _INT32_MAX else None


def _parse_int(key: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise GroupConfigError(
            f"Invalid value {text} for configuration {key}: Not a number of type INT"
        ) from None
    if not -(2**31) <= value <= _INT32_MAX:
        raise GroupConfigError(
            f"Invalid value {text} for configuration {key}: Not a number of type INT"
        )
    if value < 1:
        raise GroupConfigError(
            f"Invalid value {text} for configuration {key}: Value must be at least 1"
        )
    return value


def validate_group_configs(
    properties: Mapping[str, str], config: GroupConfig
) -> GroupConfigOverrides:
    """The complete override set a group would have after an alter; Kafka's
    `GroupConfig.validate` (see the module docstring). Raises GroupConfigError."""
    for key in properties:
        if key not in GROUP_CONFIG_KEYS:
            raise GroupConfigError(f"Unknown group config name: {key}")
    values = {key: _parse_int(key, text) for key, text in properties.items()}
    heartbeat_ms = values.get(CONSUMER_HEARTBEAT_INTERVAL_MS, config.consumer_heartbeat_interval_ms)
    session_ms = values.get(CONSUMER_SESSION_TIMEOUT_MS, config.consumer_session_timeout_ms)
    if heartbeat_ms < config.consumer_min_heartbeat_interval_ms:
        raise GroupConfigError(
            f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms"
        )
    if heartbeat_ms > config.consumer_max_heartbeat_interval_ms:
        raise GroupConfigError(
            f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms"
        )
    if session_ms < config.consumer_min_session_timeout_ms:
        raise GroupConfigError(
            f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than or equal to "
            "group.consumer.min.session.timeout.ms"
        )
    if session_ms > config.consumer_max_session_timeout_ms:
        raise GroupConfigError(
            f"{CONSUMER_SESSION_TIMEOUT_MS} must be less than or equal to "
            "group.consumer.max.session.timeout.ms"
        )
    if session_ms <= heartbeat_ms:
        raise GroupConfigError(
            f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"
        )
    return GroupConfigOverrides(
        consumer_session_timeout_ms=values.get(CONSUMER_SESSION_TIMEOUT_MS),
        consumer_heartbeat_interval_ms=values.get(CONSUMER_HEARTBEAT_INTERVAL_MS),
    )
