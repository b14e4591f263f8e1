"""Quota entities as Kafka's ZooKeeper mode stores them, and the quota keys.

Where (Kafka's `ConfigType.User/Client/Ip`, `AdminZkClient.changeConfigs`)::

    /config/users/<user>                        user
    /config/users/<user>/clients/<client-id>    (user, client-id)
    /config/clients/<client-id>                 client-id
    /config/ips/<ip>                            ip
    <default> in place of a name                the default entity of that type

each holding `{"version":1,"config":{"producer_byte_rate":"1048576",...}}` (values are
strings, as Kafka writes them; `/config/users/<user>` also holds the user's SCRAM
credentials, which quotas leave alone). After a write the writer creates
`/config/changes/config_change_<seq>` with entity_path `users/alice`,
`users/alice/clients/c1`, `clients/c1` or `ips/10.0.0.1`.

Names in paths are *sanitized* as Kafka's `Sanitizer.sanitize` does (URL encoding of
everything but letters, digits and `._-`, a space as `%20`), so a user named `<default>`
becomes `%3Cdefault%3E` and never meets the default entity. `QuotaEntity` holds the
sanitized names ("<default>" for the default); `from_wire`/`wire_components` convert from
and to the protocol's (entity_type, name-or-null) pairs.

Keys (Kafka's `QuotaConfigs`): user and client-id entities take `producer_byte_rate` and
`consumer_byte_rate` (LONG), `request_percentage` and `controller_mutation_rate` (DOUBLE);
ip entities take `connection_creation_rate` (INT).
"""

from __future__ import annotations

import enum
import ipaddress
import math
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)
DEFAULT: Final = "<default>"
"""Kafka's `ConfigEntityName.Default`."""

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"


class KeyType(enum.Enum):
    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


CLIENT_KEYS: Final = {
    PRODUCER_BYTE_RATE: KeyType.LONG,
    CONSUMER_BYTE_RATE: KeyType.LONG,
    REQUEST_PERCENTAGE: KeyType.DOUBLE,
    CONTROLLER_MUTATION_RATE: KeyType.DOUBLE,
}
"""Keys of user, client-id and (user, client-id) entities."""
IP_KEYS: Final = {CONNECTION_CREATION_RATE: KeyType.INT}
ALL_KEYS: Final = {**CLIENT_KEYS, **IP_KEYS}
MAX_NAME_CHARS: Final = 1024
"""Bound on an entity name (a znode path component; Kafka has none besides ZooKeeper's)."""


class QuotaEntityError(ValueError):
    """Kafka answers INVALID_REQUEST with this message."""


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: URLEncoder's encoding with a space as `%20` and `*`
    as `%2A` (URLEncoder leaves only letters, digits and `.-*_`)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Sanitized names, DEFAULT for the default entity, None where the component is absent."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    @property
    def is_ip(self) -> bool:
        return self.ip is not None

    def path(self) -> str:
        """The entity path under `/config` (also the notification's entity_path)."""
        if self.ip is not None:
            return f"ips/{self.ip}"
        if self.user is not None and self.client_id is not None:
            return f"users/{self.user}/clients/{self.client_id}"
        if self.user is not None:
            return f"users/{self.user}"
        assert self.client_id is not None
        return f"clients/{self.client_id}"

    def keys(self) -> dict[str, KeyType]:
        return IP_KEYS if self.is_ip else CLIENT_KEYS

    def wire_components(self) -> list[tuple[str, str | None]]:
        """(entity_type, name or None for the default), user before client-id."""
        found = []
        for entity_type, name in ((USER, self.user), (CLIENT_ID, self.client_id), (IP, self.ip)):
            if name is not None:
                found.append((entity_type, None if name == DEFAULT else desanitize(name)))
        return found

    @classmethod
    def from_wire(cls, components: list[tuple[str, str | None]]) -> QuotaEntity:
        """Kafka's `parseAndSanitizeQuotaEntity` + the combination checks of
        `alterClientQuotas`; QuotaEntityError with Kafka's message otherwise."""
        if not components:
            raise QuotaEntityError("Invalid empty client quota entity")
        names: dict[str, str] = {}
        for entity_type, name in components:
            if entity_type not in ENTITY_TYPES:
                raise QuotaEntityError(f"Unhandled client quota entity type: {entity_type}")
            if name is not None and not name:
                raise QuotaEntityError(f"Empty {entity_type} not supported")
            if entity_type in names:
                raise QuotaEntityError(f"Duplicate {entity_type} entity type")
            if name is not None and len(name) > MAX_NAME_CHARS:
                raise QuotaEntityError(f"{entity_type} name longer than {MAX_NAME_CHARS}")
            names[entity_type] = DEFAULT if name is None else sanitize(name)
        if IP in names:
            if len(names) > 1:
                raise QuotaEntityError(
                    "Invalid quota entity combination, IP entity should not be used with "
                    "user/client ID entity."
                )
            ip = names[IP]
            if ip != DEFAULT and not is_valid_ip(desanitize(ip)):
                raise QuotaEntityError(f"{desanitize(ip)} is not a valid IP or resolvable host.")
        entity = cls(names.get(USER), names.get(CLIENT_ID), names.get(IP))
        entity.check_path()
        return entity

    def check_path(self) -> None:
        """The entity's znode must be a legal path of the tree: not `.`/`..` (Kafka's
        sanitizer leaves dots alone and ZooKeeper refuses them), at most the tree's
        MAX_PATH_BYTES (the fuzzer's lesson from SCRAM users, `scram_store.user_name_error`)."""
        from trafka.metadata_quorum.tree import BadArgumentsError, validate_path

        try:
            validate_path(f"/config/{self.path()}")
        except BadArgumentsError as error:
            raise QuotaEntityError(f"Invalid quota entity name: {error}") from None

    @classmethod
    def from_path(cls, entity_path: str) -> QuotaEntity | None:
        """`users/a`, `users/a/clients/c`, `clients/c`, `ips/x`; None for anything else."""
        parts = entity_path.split("/")
        if any(not part for part in parts):
            return None
        if len(parts) == 2 and parts[0] == "users":
            return cls(user=parts[1])
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return cls(user=parts[1], client_id=parts[3])
        if len(parts) == 2 and parts[0] == "clients":
            return cls(client_id=parts[1])
        if len(parts) == 2 and parts[0] == "ips":
            return cls(ip=parts[1])
        return None


def is_valid_ip(text: str) -> bool:
    """Kafka's `DynamicConfig.Ip.isValidIpEntity` resolves host names too; here only IP
    literals are accepted (no DNS lookup on a request path)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def stored_value(entity: QuotaEntity, key: str, value: float) -> str:
    """The string stored for `key`=`value` (Kafka's `alterClientQuotas`): an INT/LONG key
    must hold an integral value (within 1e-6), else QuotaEntityError."""
    key_type = entity.keys().get(key)
    if key_type is None:
        raise QuotaEntityError(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise QuotaEntityError(f"Configuration {key} must be a finite value")
    if key_type is KeyType.DOUBLE:
        return repr(float(value))
    epsilon = 1e-6
    integral = math.floor(value + epsilon)
    if abs(integral - value) > epsilon:
        raise QuotaEntityError(f"Configuration {key} must be a {key_type.value} value")
    return str(integral)


def quota_values(entity: QuotaEntity, config: dict[str, str]) -> dict[str, float]:
    """The quota keys of a stored config as numbers (SCRAM credentials and bad values
    are left out)."""
    found = {}
    for key in entity.keys():  # noqa: SIM118 (QuotaEntity.keys is not a mapping's)
        raw = config.get(key)
        if raw is None:
            continue
        try:
            found[key] = float(raw)
        except ValueError:
            continue
    return found
