"""`ktool configs --entity-type users`: SCRAM credentials as kafka-configs.sh manages them.

    ktool configs --bootstrap-server HOST:PORT --command-config admin.properties --alter \\
        --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    ktool configs ... --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    ktool configs ... --describe --entity-type users [--entity-name alice]

As Kafka's ConfigCommand (KIP-554): the tool salts the password itself (a random 32-byte
salt, `iterations` default 4096) and sends AlterUserScramCredentials (51) with the salted
password only; the broker stores the derived keys (docs/security.md). Output lines are
kafka-configs.sh's: "Completed updating config for user alice." and "SCRAM credential
configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192".

Not implemented: other entity types (topics and brokers: `ktool topics` and Kafka's own
admin clients; quotas do not exist here), `--add-config-file`, `--bootstrap-controller`.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Final

import trio
import typer

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, salted_password

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


def configs(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of any broker.")
    ] = "localhost:9092",
    entity_type: Annotated[
        str, typer.Option("--entity-type", help="users (SCRAM credentials).")
    ] = "",
    entity_name: Annotated[str | None, typer.Option("--entity-name", help="The user.")] = None,
    alter: Annotated[bool, typer.Option("--alter", help="Add or delete configs.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Show the configs.")] = False,
    add_config: Annotated[
        str | None,
        typer.Option("--add-config", help="'SCRAM-SHA-512=[iterations=8192,password=...]'"),
    ] = None,
    delete_config: Annotated[
        str | None, typer.Option("--delete-config", help="SCRAM-SHA-256,SCRAM-SHA-512")
    ] = None,
) -> None:
    """SCRAM credentials of users (kafka-configs.sh --entity-type users)."""
    try:
        if entity_type not in ("users", "user"):
            raise ConfigCommandError(
                "only --entity-type users (SCRAM credentials) is implemented; "
                "topic configs: ktool topics, or any Kafka admin client"
            )
        if alter == describe:
            raise ConfigCommandError("Command must include exactly one action: --describe, --alter")
        if alter:
            if not entity_name:
                raise ConfigCommandError("an --entity-name must be specified with --alter")
            added = parse_scram_configs(add_config or "")
            deleted = [m.strip().upper() for m in (delete_config or "").split(",") if m.strip()]
            for mechanism in deleted:
                if mechanism not in MECHANISM_CODES:
                    raise ConfigCommandError(f"Invalid config(s): {mechanism}")
            if not added and not deleted:
                raise ConfigCommandError("--alter needs --add-config or --delete-config")
            data = {
                "deletions": [
                    {"name": entity_name, "mechanism": MECHANISM_CODES[m]} for m in deleted
                ],
                "upsertions": upsertions(entity_name, added),
            }
            response = trio.run(_request, bootstrap_server, ALTER_USER_SCRAM, data)
            for result in response.results:
                if int(result.error_code) != 0:
                    raise ConfigCommandError(_error(int(result.error_code), result.error_message))
            typer.echo(f"Completed updating config for user {entity_name}.")
            return
        users = [{"name": entity_name}] if entity_name else None
        response = trio.run(_request, bootstrap_server, DESCRIBE_USER_SCRAM, {"users": users})
        if int(response.error_code) != 0:
            raise ConfigCommandError(_error(int(response.error_code), response.error_message))
        for result in response.results:
            if int(result.error_code) != 0:
                if entity_name:  # Kafka prints nothing for a user without credentials
                    continue
                raise ConfigCommandError(_error(int(result.error_code), result.error_message))
            credentials = [(int(c.mechanism), int(c.iterations)) for c in result.credential_infos]
            if credentials:
                typer.echo(describe_line(str(result.user), credentials))
    except (ConfigCommandError, ClientError, OSError) as error:
        typer.echo(f"Error while executing config command: {error}", err=True)
        raise typer.Exit(1) from None
