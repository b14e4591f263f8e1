"""`ktool configs`: kafka-configs.sh (Kafka's ConfigCommand) for topics, brokers, users,
clients and ips.

    ktool configs --bootstrap-server HOST:PORT [--command-config admin.properties] \\
        --describe|--alter --entity-type topics|brokers|users|clients|ips \\
        (--entity-name X | --entity-default) [--add-config k=v,...] [--delete-config k,...]
    ktool configs ... --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name c1 --add-config producer_byte_rate=1048576
    ktool configs ... --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'

* topics / brokers: DescribeConfigs (32) and IncrementalAlterConfigs (44, SET for
  --add-config, DELETE for --delete-config), as Kafka 4's tool. --describe prints the
  dynamic configs ("Dynamic configs for topic t are:", each line
  `  key=value sensitive=false synonyms={SOURCE:key=value, ...}`), `--all` every config;
  a broker's configs are asked of that broker; `--entity-default` is the cluster default
  (`/config/brokers/<default>`); brokers without a name: every live broker, then the
  default.
* users / clients / ips (quotas, KIP-546): AlterClientQuotas (49) / DescribeClientQuotas
  (48) with a strict filter; lines "Quota configs for user-principal 'alice', client-id
  'c1' are producer_byte_rate=1048576.0" (values as Java prints a double);
  `--entity-default` is the default entity, and --entity-type users --entity-type clients
  combine (each --entity-name / --entity-default goes with the --entity-type before it).
* users' SCRAM credentials (KIP-554): SCRAM-SHA-256 / SCRAM-SHA-512 keys go to
  AlterUserScramCredentials (51) / DescribeUserScramCredentials (50), the rest to quotas.
  The tool salts the password itself (a random 32-byte salt, `iterations` default 4096)
  and sends the salted password only; the broker stores the derived keys.

Not implemented: `--add-config-file`, `--bootstrap-controller`, `--entity-type
broker-loggers|client-metrics|groups`, `--zookeeper`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

import trio
import typer

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, salted_password
from trafka.tools.offsets_cmd import ClusterClient
from trafka.tools.output import JsonFlag, emit_json

ALTER_USER_SCRAM = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
DESCRIBE_USER_SCRAM = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MECHANISM_CODES: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES: Final = {code: name for name, code in MECHANISM_CODES.items()}
DEFAULT_ITERATIONS: Final = 4096
SALT_BYTES: Final = 32


class ConfigCommandError(Exception):
    pass


def split_top_level(text: str) -> list[str]:
    """Split on commas outside square brackets (kafka-configs.sh's --add-config syntax)."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    if current:
        parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def parse_scram_configs(text: str) -> dict[str, tuple[int, str]]:
    """``SCRAM-SHA-512=[iterations=8192,password=x],SCRAM-SHA-256=[password=y]`` ->
    mechanism -> (iterations, password)."""
    found: dict[str, tuple[int, str]] = {}
    for item in split_top_level(text):
        key, sep, value = item.partition("=")
        mechanism = key.strip().upper()
        if mechanism not in MECHANISM_CODES:
            raise ConfigCommandError(
                f"Invalid config(s): {key.strip()} (only SCRAM-SHA-256 and SCRAM-SHA-512 are "
                "supported for users)"
            )
        value = value.strip()
        if not sep or not (value.startswith("[") and value.endswith("]")):
            raise ConfigCommandError(f"{mechanism}: expected {mechanism}=[password=...]")
        options = {}
        for option in split_top_level(value[1:-1]):
            name, _, option_value = option.partition("=")
            options[name.strip()] = option_value.strip()
        password = options.get("password")
        if not password:
            raise ConfigCommandError(f"{mechanism}: a password is required")
        try:
            iterations = int(options.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise ConfigCommandError(f"{mechanism}: iterations must be a number") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ConfigCommandError(
                f"Invalid iterations {iterations} for mechanism {mechanism}: must be between "
                f"{MIN_ITERATIONS} and {MAX_ITERATIONS}"
            )
        found[mechanism] = (iterations, password)
    return found


def upsertions(user: str, configs: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    result = []
    for mechanism, (iterations, password) in sorted(configs.items()):
        salt = os.urandom(SALT_BYTES)
        result.append(
            {
                "name": user,
                "mechanism": MECHANISM_CODES[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(mechanism, password, salt, iterations),
            }
        )
    return result


def describe_line(user: str, credentials: list[tuple[int, int]]) -> str:
    rendered = ", ".join(
        f"{MECHANISM_NAMES.get(code, str(code))}=iterations={iterations}"
        for code, iterations in sorted(credentials)
    )
    return f"SCRAM credential configs for user-principal '{user}' are {rendered}"


async def _request(bootstrap: str, api_key: int, data: dict[str, Any]) -> Any:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise ConfigCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    connection = await KafkaConnection.connect(
        host, int(port), client_id="ktool-configs", security=command_config.current()
    )
    try:
        await connection.negotiate_api_versions()
        version = connection.version_for(api_key, 0, 0)
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        return await connection.request(build(request_class, data), version)
    finally:
        await connection.close()


def _error(code: int, message: str | None) -> str:
    from kio.schema.errors import ErrorCode

    try:
        name = ErrorCode(code).name.upper()
    except ValueError:
        name = f"ERROR_{code}"
    return f"{name}: {message}" if message else name


ENTITY_TYPES: Final = {
    "topics": "topics",
    "topic": "topics",
    "brokers": "brokers",
    "broker": "brokers",
    "users": "users",
    "user": "users",
    "clients": "clients",
    "client": "clients",
    "ips": "ips",
    "ip": "ips",
}
QUOTA_ENTITY_TYPE: Final = {"users": "user", "clients": "client-id", "ips": "ip"}
QUOTA_WORDS: Final = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
RESOURCE_TYPE: Final = {"topics": 2, "brokers": 4}
SOURCE_NAMES: Final = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
DEFAULT_ENTITY: Final = "<default>"


def java_double(value: float) -> str:
    """A double as Java's `Double.toString` prints it (kafka-configs.sh prints quota values
    so): `1048576.0`, `12.5`, `1.0E7` from 10^7 up, `1.0E-4` below 10^-3."""
    if value != value or value in (float("inf"), float("-inf")):
        return {True: "NaN"}.get(value != value, "Infinity" if value > 0 else "-Infinity")
    magnitude = abs(value)
    if magnitude == 0 or 1e-3 <= magnitude < 1e7:
        text = repr(float(value))
        return text if "e" not in text else f"{value:.1f}"
    mantissa, _, exponent = f"{value!r}".partition("e")
    if not exponent:  # repr chose positional notation
        mantissa, _, exponent = f"{value:e}".partition("e")
        mantissa = mantissa.rstrip("0")
    if "." not in mantissa:
        mantissa += ".0"
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}E{int(exponent)}"


def parse_add_config(text: str) -> dict[str, str]:
    """`k=v,k2=[a,b]` (kafka-configs.sh: square brackets hold commas)."""
    found: dict[str, str] = {}
    for item in split_top_level(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigCommandError(
                f"Invalid entity config: all configs to be added must be in the format "
                f'"key=val" (got {item!r})'
            )
        value = value.strip()
        if (
            value.startswith("[")
            and value.endswith("]")
            and not key.strip().upper().startswith("SCRAM-")
        ):
            value = value[1:-1]
        found[key.strip()] = value
    return found


def entities_of(
    argv: list[str], entity_types: list[str], entity_names: list[str], default: bool
) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs, in command-line order: each
    --entity-name / --entity-default belongs to the --entity-type before it."""
    pairs: list[tuple[str, str | None]] = []
    types = iter(entity_types)
    names = iter(entity_names)
    current: str | None = None
    pending: str | None = None
    for arg in argv:
        if arg in ("--entity-type",) or arg.startswith("--entity-type="):
            if current is not None and pending is not None:
                pairs.append((current, pending))
            current, pending = ENTITY_TYPES.get(next(types, ""), ""), "?"
        elif arg in ("--entity-name",) or arg.startswith("--entity-name="):
            pending = next(names, "")
        elif arg == "--entity-default":
            pending = None
            if current is not None:
                pairs.append((current, None))
                current, pending = None, None
    if current is not None and pending is not None:
        pairs.append((current, pending))
    if not pairs:  # called without sys.argv (tests): one type, one name or the default
        for entity_type in entity_types:
            pairs.append((ENTITY_TYPES.get(entity_type, ""), None if default else next(names, "?")))
    return [(t, n) for t, n in pairs]


def _kafka_error(code: int, message: str | None) -> ConfigCommandError:
    return ConfigCommandError(_error(code, message))


# ---- topics and brokers ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a DescribeConfigs answer as kafka-configs.sh prints it."""

    name: str
    value: str | None  # None: a sensitive value or no value
    sensitive: bool
    source: str  # Kafka's ConfigSource name (SOURCE_NAMES)
    synonyms: tuple[tuple[str, str, str | None], ...]  # (source, name, value)


@dataclass(frozen=True, slots=True)
class DescribedEntity:
    """The configs of one topic or broker (`name` DEFAULT_ENTITY: the cluster default)."""

    entity_type: str  # topics or brokers
    name: str
    describe_all: bool
    configs: tuple[ConfigEntry, ...]


def config_line(entry: ConfigEntry) -> str:
    """kafka-configs.sh's `  name=value sensitive=false synonyms={SOURCE:name=value, ...}`."""
    synonyms = ", ".join(f"{source}:{name}={value}" for source, name, value in entry.synonyms)
    value = entry.value if entry.value is not None else "null"
    return (
        f"  {entry.name}={value} sensitive={str(entry.sensitive).lower()} synonyms={{{synonyms}}}"
    )


def described_lines(described: Sequence[DescribedEntity]) -> list[str]:
    """The text of `--describe` for topics and brokers."""
    out: list[str] = []
    for entity in described:
        if entity.name == DEFAULT_ENTITY:
            out.append(f"Default configs for {entity.entity_type} in the cluster are:")
        else:
            source = "All" if entity.describe_all else "Dynamic"
            out.append(f"{source} configs for {entity.entity_type[:-1]} {entity.name} are:")
        out += [config_line(entry) for entry in entity.configs]
    return out


def described_document(described: Sequence[DescribedEntity]) -> list[dict[str, Any]]:
    """`--describe --json` for topics and brokers: one object per entity (`entity_name` null
    for the cluster default) with its configs (`value` null when sensitive or unset)."""
    return [
        {
            "entity_type": entity.entity_type,
            "entity_name": None if entity.name == DEFAULT_ENTITY else entity.name,
            "configs": [
                {
                    "name": entry.name,
                    "value": entry.value,
                    "sensitive": entry.sensitive,
                    "source": entry.source,
                    "synonyms": [
                        {"source": source, "name": name, "value": value}
                        for source, name, value in entry.synonyms
                    ],
                }
                for entry in entity.configs
            ],
        }
        for entity in described
    ]


async def _describe_resource(
    cluster: ClusterClient, entity_type: str, name: str, describe_all: bool
) -> list[ConfigEntry]:
    resource_type = RESOURCE_TYPE[entity_type]
    if entity_type == "brokers" and name not in ("", DEFAULT_ENTITY):
        broker = int(name) if name.isdigit() else -1
        if broker not in cluster.brokers:
            raise ConfigCommandError(f"The broker {name} does not exist")
        address = cluster.brokers[broker]
    else:
        address = cluster.bootstrap[0]
    wire_name = "" if name == DEFAULT_ENTITY else name
    response = await cluster.call(
        address,
        ApiKey.DESCRIBE_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": wire_name,
                    "configuration_keys": None,
                }
            ],
            "include_synonyms": True,
            "include_documentation": False,
        },
        4,
        1,
    )
    result = response.results[0]
    if int(result.error_code) != 0:
        raise _kafka_error(int(result.error_code), result.error_message)
    wanted = {
        "topics": {1},
        "brokers": {3} if name == DEFAULT_ENTITY else {2},
    }[entity_type]
    entries = []
    for entry in sorted(result.configs, key=lambda c: str(c.name)):
        if not describe_all and int(entry.config_source) not in wanted:
            continue
        synonyms = tuple(
            (
                SOURCE_NAMES.get(int(s.source), "UNKNOWN"),
                str(s.name),
                None if s.value is None else str(s.value),
            )
            for s in entry.synonyms
            if describe_all or int(s.source) in wanted or entity_type == "topics"
        )
        entries.append(
            ConfigEntry(
                name=str(entry.name),
                value=None if entry.is_sensitive or entry.value is None else str(entry.value),
                sensitive=bool(entry.is_sensitive),
                source=SOURCE_NAMES.get(int(entry.config_source), "UNKNOWN"),
                synonyms=synonyms,
            )
        )
    return entries


async def describe_resources(
    cluster: ClusterClient, entity_type: str, name: str | None, describe_all: bool
) -> list[DescribedEntity]:
    await cluster.load_metadata()
    if name is not None:
        names = [name]
    elif entity_type == "topics":
        names = sorted({topic for topic, _ in cluster.leaders})
    else:
        names = [str(b) for b in sorted(cluster.brokers)] + [DEFAULT_ENTITY]
    return [
        DescribedEntity(
            entity_type,
            entity,
            describe_all,
            tuple(await _describe_resource(cluster, entity_type, entity, describe_all)),
        )
        for entity in names
    ]


async def alter_resource(
    cluster: ClusterClient,
    entity_type: str,
    name: str,
    added: dict[str, str],
    deleted: list[str],
) -> None:
    await cluster.load_metadata()
    if entity_type == "topics" and name not in {t for t, _ in cluster.leaders}:
        raise ConfigCommandError(f"Topic '{name}' does not exist")
    address = cluster.bootstrap[0]
    if entity_type == "brokers" and name != DEFAULT_ENTITY:
        broker = int(name) if name.isdigit() else -1
        if broker not in cluster.brokers:
            raise ConfigCommandError(f"The broker {name} does not exist")
        address = cluster.brokers[broker]
    configs = [{"name": k, "config_operation": 0, "value": v} for k, v in added.items()]
    configs += [{"name": k, "config_operation": 1, "value": None} for k in deleted]
    response = await cluster.call(
        address,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": RESOURCE_TYPE[entity_type],
                    "resource_name": "" if name == DEFAULT_ENTITY else name,
                    "configs": configs,
                }
            ],
            "validate_only": False,
        },
        1,
    )
    for result in response.responses:
        if int(result.error_code) != 0:
            raise _kafka_error(int(result.error_code), result.error_message)


# ---- quotas ---------------------------------------------------------------------------------


def quota_line(entity: list[tuple[str, str | None]], values: list[tuple[str, float]]) -> str:
    order = {"user": 0, "client-id": 1, "ip": 2}
    parts = []
    for entity_type, name in sorted(entity, key=lambda item: order.get(item[0], 3)):
        word = QUOTA_WORDS.get(entity_type, entity_type)
        parts.append(f"{word} '{name}'" if name is not None else f"the default {word}")
    rendered = ", ".join(f"{key}={java_double(value)}" for key, value in values)
    return f"Quota configs for {', '.join(parts)} are {rendered}"


QuotaEntry = tuple[list[tuple[str, str | None]], list[tuple[str, float]]]
"""A DescribeClientQuotas entry: its entity ((type, name or None for the default), ...)
and its quotas ((key, value), ...)."""


def quotas_document(entries: Sequence[QuotaEntry]) -> list[dict[str, Any]]:
    """`--describe --json` for users/clients/ips: one object per entity, `entity` mapping
    each entity type (`user`, `client-id`, `ip`) to its name (null: the default entity)."""
    return [{"entity": dict(entity), "quotas": dict(values)} for entity, values in entries]


def scram_document(credentials: Sequence[tuple[str, list[tuple[int, int]]]]) -> list[Any]:
    """The SCRAM credentials of `--describe --entity-type users --json` (no secrets)."""
    return [
        {
            "user": user,
            "credentials": [
                {"mechanism": MECHANISM_NAMES.get(code, str(code)), "iterations": iterations}
                for code, iterations in sorted(pairs)
            ],
        }
        for user, pairs in credentials
    ]


async def describe_quotas(
    cluster: ClusterClient, entities: list[tuple[str, str | None]]
) -> list[QuotaEntry]:
    components = []
    for entity_type, name in entities:
        quota_type = QUOTA_ENTITY_TYPE[entity_type]
        if name == "?":  # no --entity-name: any specified entity of that type
            components.append({"entity_type": quota_type, "match_type": 2, "match": None})
        elif name is None:
            components.append({"entity_type": quota_type, "match_type": 1, "match": None})
        else:
            components.append({"entity_type": quota_type, "match_type": 0, "match": name})
    response = await cluster.call(
        cluster.bootstrap[0],
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {"components": components, "strict": True},
        1,
    )
    if int(response.error_code) != 0:
        raise _kafka_error(int(response.error_code), response.error_message)
    found: list[QuotaEntry] = []
    for entry in response.entries or ():
        entity = [(str(e.entity_type), e.entity_name) for e in entry.entity]
        values = [(str(v.key), float(v.value)) for v in entry.values]
        found.append((entity, values))
    return found


async def alter_quotas(
    cluster: ClusterClient,
    entities: list[tuple[str, str | None]],
    added: dict[str, str],
    deleted: list[str],
) -> None:
    ops: list[dict[str, Any]] = []
    for key, value in added.items():
        try:
            number = float(value)
        except ValueError:
            raise ConfigCommandError(
                f"Cannot parse quota configuration value for {key}: {value}"
            ) from None
        ops.append({"key": key, "value": number, "remove": False})
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deleted]
    response = await cluster.call(
        cluster.bootstrap[0],
        ApiKey.ALTER_CLIENT_QUOTAS,
        {
            "entries": [
                {
                    "entity": [
                        {"entity_type": QUOTA_ENTITY_TYPE[t], "entity_name": n} for t, n in entities
                    ],
                    "ops": ops,
                }
            ],
            "validate_only": False,
        },
        1,
    )
    for entry in response.entries:
        if int(entry.error_code) != 0:
            raise _kafka_error(int(entry.error_code), entry.error_message)


# ---- the command ----------------------------------------------------------------------------


def _scram_alter(bootstrap: str, user: str, added: str, deleted: list[str]) -> None:
    configs = parse_scram_configs(added) if added else {}
    data = {
        "deletions": [{"name": user, "mechanism": MECHANISM_CODES[m]} for m in deleted],
        "upsertions": upsertions(user, configs),
    }
    response = trio.run(_request, bootstrap, ALTER_USER_SCRAM, data)
    for result in response.results:
        if int(result.error_code) != 0:
            raise ConfigCommandError(_error(int(result.error_code), result.error_message))


def _scram_describe(bootstrap: str, user: str | None) -> list[tuple[str, list[tuple[int, int]]]]:
    users = [{"name": user}] if user else None
    response = trio.run(_request, bootstrap, DESCRIBE_USER_SCRAM, {"users": users})
    if int(response.error_code) != 0:
        raise ConfigCommandError(_error(int(response.error_code), response.error_message))
    found = []
    for result in response.results:
        if int(result.error_code) != 0:
            if user:  # Kafka prints nothing for a user without credentials
                continue
            raise ConfigCommandError(_error(int(result.error_code), result.error_message))
        credentials = [(int(c.mechanism), int(c.iterations)) for c in result.credential_infos]
        if credentials:
            found.append((str(result.user), credentials))
    return found


def configs(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of any broker.")
    ] = "localhost:9092",
    entity_type: Annotated[
        list[str] | None,
        typer.Option("--entity-type", help="topics, brokers, users, clients or ips (repeatable)."),
    ] = None,
    entity_name: Annotated[
        list[str] | None, typer.Option("--entity-name", help="The entity's name (repeatable).")
    ] = None,
    entity_default: Annotated[
        bool, typer.Option("--entity-default", help="The default entity of the type.")
    ] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Add or delete configs.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Show the configs.")] = False,
    describe_all: Annotated[
        bool, typer.Option("--all", help="With --describe: every config, not only dynamic ones.")
    ] = False,
    add_config: Annotated[
        str | None,
        typer.Option("--add-config", help="k=v,k2=[v1,v2],... ('SCRAM-SHA-512=[password=..]')"),
    ] = None,
    delete_config: Annotated[str | None, typer.Option("--delete-config", help="k1,k2,...")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Describe or alter configs and quotas (kafka-configs.sh)."""
    import sys

    try:
        if alter == describe:
            raise ConfigCommandError("Command must include exactly one action: --describe, --alter")
        if alter and as_json:
            raise ConfigCommandError("--json is only for --describe")
        types = [ENTITY_TYPES.get(t.strip(), "") for t in entity_type or []]
        if not types or "" in types:
            raise ConfigCommandError(
                "--entity-type must be one of topics, brokers, users, clients, ips"
            )
        entities = entities_of(sys.argv, entity_type or [], entity_name or [], entity_default)
        if len({t for t, _ in entities}) != len(entities) or not entities:
            raise ConfigCommandError("each --entity-type may be given once")
        quota_types = {"users", "clients", "ips"}
        kinds = {t for t, _ in entities}
        if kinds - quota_types and len(entities) > 1:
            raise ConfigCommandError("topics and brokers take one --entity-type")
        if "ips" in kinds and len(entities) > 1:
            raise ConfigCommandError("ips cannot be combined with users or clients")
        added = parse_add_config(add_config or "")
        deleted = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
        first_type, first_name = entities[0]
        if alter:
            if any(name == "?" for _, name in entities):
                raise ConfigCommandError(
                    "an entity name must be specified with --alter of "
                    + ", ".join(t for t, n in entities if n == "?")
                )
            if not added and not deleted:
                raise ConfigCommandError("--alter needs --add-config or --delete-config")
            if first_type in RESOURCE_TYPE:
                name = DEFAULT_ENTITY if first_name is None else first_name
                if first_type == "topics" and first_name is None:
                    raise ConfigCommandError(
                        "--entity-default is only for brokers, users, clients, ips"
                    )
                _run(
                    bootstrap_server, lambda c: alter_resource(c, first_type, name, added, deleted)
                )
            else:
                scram_added = {k: v for k, v in added.items() if k.upper() in MECHANISM_CODES}
                scram_deleted = [k.upper() for k in deleted if k.upper() in MECHANISM_CODES]
                quota_added = {k: v for k, v in added.items() if k not in scram_added}
                quota_deleted = [k for k in deleted if k.upper() not in MECHANISM_CODES]
                if scram_added or scram_deleted:
                    if entities != [("users", first_name)] or first_name is None:
                        raise ConfigCommandError(
                            "SCRAM credentials are altered for one named user only"
                        )
                    text = ",".join(f"{k}={v}" for k, v in scram_added.items())
                    _scram_alter(bootstrap_server, first_name, text, scram_deleted)
                if quota_added or quota_deleted:
                    _run(
                        bootstrap_server,
                        lambda c: alter_quotas(c, entities, quota_added, quota_deleted),
                    )
            if first_name is None:
                typer.echo(f"Completed updating default config for {first_type} in the cluster.")
            else:
                typer.echo(f"Completed updating config for {first_type[:-1]} {first_name}.")
            return
        if first_type in RESOURCE_TYPE:
            if first_type == "topics" and first_name is None:
                raise ConfigCommandError(
                    "--entity-default is only for brokers, users, clients, ips"
                )
            resource_name: str | None = (
                None
                if first_name == "?"
                else (DEFAULT_ENTITY if first_name is None else first_name)
            )
            described = _run(
                bootstrap_server,
                lambda c: describe_resources(c, first_type, resource_name, describe_all),
            )
            if as_json:
                emit_json(described_document(described))
                return
            lines = described_lines(described)
        else:
            quotas = _run(bootstrap_server, lambda c: describe_quotas(c, entities))
            scram = []
            if entities[0][0] == "users" and len(entities) == 1 and first_name is not None:
                scram = _scram_describe(bootstrap_server, None if first_name == "?" else first_name)
            if as_json:
                document: dict[str, Any] = {"quotas": quotas_document(quotas)}
                if entities[0][0] == "users" and len(entities) == 1:
                    document["scram_credentials"] = scram_document(scram)
                emit_json(document)
                return
            lines = [quota_line(entity, values) for entity, values in quotas]
            lines += [describe_line(user, pairs) for user, pairs in scram]
        for line in lines:
            typer.echo(line)
    except (ConfigCommandError, ClientError, OSError) as error:
        typer.echo(f"Error while executing config command: {error}", err=True)
        raise typer.Exit(1) from None


def _run(bootstrap: str, body: Any) -> Any:
    async def main() -> Any:
        cluster = ClusterClient(bootstrap)
        try:
            return await body(cluster)
        finally:
            await cluster.close()

    from trafka.tools.offsets_cmd import OffsetsCommandError

    try:
        return trio.run(main)
    except OffsetsCommandError as error:
        raise ConfigCommandError(str(error)) from None
