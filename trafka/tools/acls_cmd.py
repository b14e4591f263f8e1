"""`ktool acls`: add, remove and list ACLs with kafka-acls.sh's options and output.

    ktool acls --bootstrap-server HOST:PORT --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    ktool acls --add --allow-principal User:alice --producer --topic orders
    ktool acls --add --allow-principal User:bob --consumer --topic orders --group billing
    ktool acls --add --deny-principal User:eve --deny-host 10.0.0.9 --operation All --cluster
    ktool acls --add --allow-principal User:carol --operation Write --topic pay- \\
        --resource-pattern-type prefixed
    ktool acls --list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
    ktool acls --remove [--force] --allow-principal User:alice --operation Read --topic orders
    ktool acls --remove --force --topic orders        # every ACL of the resource

Options and defaults are kafka-acls.sh's (Kafka's AclCommand): ``--operation`` defaults to
All; hosts default to ``*``; ``--resource-pattern-type`` is LITERAL by default, LITERAL or
PREFIXED for ``--add`` and also ANY or MATCH for ``--list`` / ``--remove``; ``--producer``
grants WRITE, DESCRIBE and CREATE on the topics (WRITE and DESCRIBE on the
``--transactional-id``s, IDEMPOTENT_WRITE on the cluster with ``--idempotent``);
``--consumer`` grants READ and DESCRIBE on the topics and READ on the ``--group``s;
``--remove`` asks for confirmation on stdin unless ``--force``. The output is AclCommand's,
byte for byte: "Adding ACLs for resource `ResourcePattern(...)`: ", one tab-indented entry
per line, then "Current ACLs for resource ..." for the resources named (or all of them).
``--command-config FILE`` (Kafka's client properties) secures the connection
(`trafka.client.command_config`).

Not implemented: ``--authorizer-properties`` (the ZooKeeper-direct mode Kafka removed),
``--delegation-token`` and ``--user-principal`` resources (no such APIs exist here).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import trio
import typer

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.security.acl import (
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclError,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    operation_from_name,
    pattern_type_from_name,
)
from trafka.security.authorizer import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from trafka.security.principal import KafkaPrincipal
from trafka.tools.output import JsonFlag, emit_json

WILDCARD_HOST = "*"
CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = (
    ApiKey.CREATE_ACLS,
    ApiKey.DESCRIBE_ACLS,
    ApiKey.DELETE_ACLS,
)


class AclCommandError(Exception):
    """Printed as "Error while executing ACL command: ..." with exit code 1."""


@dataclass(frozen=True, slots=True)
class ResourceFilter:
    """Kafka's ResourcePatternFilter (name None = any)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePatternFilter(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


ANY_RESOURCE = ResourceFilter(ResourceType.ANY, None, PatternType.ANY)


@dataclass(frozen=True, slots=True)
class AclOptions:
    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    cluster: bool = False
    pattern_type: str = "LITERAL"
    allow_principals: tuple[str, ...] = ()
    deny_principals: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False


# ---- pure: options -> bindings / filters, and the output -----------------------------------


def _pattern_type(options: AclOptions, *, adding: bool) -> PatternType:
    try:
        pattern_type = pattern_type_from_name(options.pattern_type)
    except AclError:
        raise AclCommandError(f"Invalid resource pattern type {options.pattern_type}") from None
    allowed = (
        (PatternType.LITERAL, PatternType.PREFIXED)
        if adding
        else (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH)
    )
    if pattern_type not in allowed:
        raise AclCommandError(
            f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when "
            f"{'adding' if adding else 'removing'} acls."
        )
    return pattern_type


def resource_filters(options: AclOptions, *, adding: bool = False) -> list[ResourceFilter]:
    """The resources the options name, in Kafka's order (topics, cluster, groups, ids)."""
    pattern_type = _pattern_type(options, adding=adding)
    found = [ResourceFilter(ResourceType.TOPIC, t, pattern_type) for t in options.topics]
    if options.cluster:
        found.append(ResourceFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, pattern_type))
    found += [ResourceFilter(ResourceType.GROUP, g, pattern_type) for g in options.groups]
    found += [
        ResourceFilter(ResourceType.TRANSACTIONAL_ID, t, pattern_type)
        for t in options.transactional_ids
    ]
    return found


def _principals(names: Sequence[str]) -> list[str]:
    result = []
    for name in names:
        try:
            result.append(str(KafkaPrincipal.parse(name)))
        except ValueError as error:
            raise AclCommandError(str(error)) from None
    return result


def entries(options: AclOptions, operations: Sequence[AclOperation]) -> set[AccessControlEntry]:
    """Principals x hosts x operations, ALLOW and DENY (Kafka's AclCommand.getAcl)."""
    found: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
        (options.allow_principals, options.allow_hosts, AclPermissionType.ALLOW),
        (options.deny_principals, options.deny_hosts, AclPermissionType.DENY),
    ):
        for principal in _principals(principals):
            for host in hosts or (WILDCARD_HOST,):
                for operation in operations:
                    found.add(AccessControlEntry(principal, host, operation, permission))
    return found


def _operations(options: AclOptions) -> list[AclOperation]:
    try:
        return [operation_from_name(name.strip()) for name in options.operations or ("All",)]
    except AclError as error:
        raise AclCommandError(str(error)) from None


def _check_supported(pattern: ResourceFilter, operations: Sequence[AclOperation]) -> None:
    supported = (*SUPPORTED_OPERATIONS[pattern.resource_type], AclOperation.ALL)
    for operation in operations:
        if operation not in supported:
            raise AclCommandError(
                f"ResourceType {pattern.resource_type.name} only supports operations "
                + ",".join(op.name for op in supported)
            )


def bindings_to_add(options: AclOptions) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """What --add creates, per resource pattern (with the --producer/--consumer rules)."""
    if not options.allow_principals and not options.deny_principals:
        raise AclCommandError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}

    def grant(resource: ResourceFilter, operations: Sequence[AclOperation]) -> None:
        _check_supported(resource, operations)
        assert resource.name is not None
        pattern = ResourcePattern(resource.resource_type, resource.name, resource.pattern_type)
        by_pattern.setdefault(pattern, set()).update(entries(options, operations))

    resources = resource_filters(options, adding=True)
    if options.producer or options.consumer:
        if not options.topics:
            raise AclCommandError("With --producer or --consumer you must specify a --topic")
        if options.consumer and not options.groups:
            raise AclCommandError("With --consumer you must specify a --group")
        for resource in resources:
            rt = resource.resource_type
            operations: list[AclOperation] = []
            if options.producer and rt is ResourceType.TOPIC:
                operations += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
            if options.producer and rt is ResourceType.TRANSACTIONAL_ID:
                operations += [AclOperation.WRITE, AclOperation.DESCRIBE]
            if options.consumer and rt is ResourceType.TOPIC:
                operations += [AclOperation.READ, AclOperation.DESCRIBE]
            if options.consumer and rt is ResourceType.GROUP:
                operations += [AclOperation.READ]
            if operations:
                grant(resource, list(dict.fromkeys(operations)))
        if options.producer and options.idempotent:
            grant(
                ResourceFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL),
                [AclOperation.IDEMPOTENT_WRITE],
            )
        return by_pattern
    if not resources:
        raise AclCommandError(
            "You must provide at least one resource: --topic <topic> or --cluster or "
            "--group <group> or --transactional-id <id>"
        )
    operations = _operations(options)
    for resource in resources:
        grant(resource, operations)
    return by_pattern


def _entry_lines(acls: Sequence[AccessControlEntry]) -> str:
    return "\n".join(f"\t{entry}" for entry in acls)


def format_acls(heading: str, resource: object, acls: Sequence[AccessControlEntry]) -> str:
    """AclCommand's block: "<heading> `<resource>`: \\n \\t(entry)\\n\\t(entry) \\n" (the
    caller's newline then leaves an empty line, as Scala's println)."""
    return f"{heading} `{resource}`: \n {_entry_lines(acls)} \n"


def format_listing(bindings: Sequence[AclBinding], principals: Sequence[str] = ()) -> list[str]:
    """The --list output blocks, resources sorted, entries sorted."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in sorted(bindings):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    if not principals:
        return [format_acls("Current ACLs for resource", p, a) for p, a in by_pattern.items()]
    blocks = []
    for principal in principals:
        blocks.append(f"ACLs for principal `{principal}`")
        for pattern, acls in by_pattern.items():
            mine = [entry for entry in acls if entry.principal == principal]
            if mine:
                blocks.append(format_acls("Current ACLs for resource", pattern, mine))
    return blocks


def listing_document(
    bindings: Sequence[AclBinding], principals: Sequence[str] = ()
) -> list[dict[str, str]]:
    """`--list --json`: one object per ACL binding (resource sorted, then entry), with
    Kafka's enum names as values; `--principal` keeps that principal's bindings only."""
    return [
        {
            "resource_type": b.pattern.resource_type.name,
            "resource_name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.name,
            "permission_type": b.entry.permission_type.name,
        }
        for b in sorted(bindings)
        if not principals or b.entry.principal in principals
    ]


# ---- the wire ------------------------------------------------------------------------------


def _error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def _check(code: int, message: str | None) -> None:
    if code != 0:
        raise AclCommandError(f"{_error_name(code)}: {message}" if message else _error_name(code))


async def _connect(bootstrap: str) -> KafkaConnection:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise AclCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    connection = await KafkaConnection.connect(
        host, int(port), client_id="ktool-acls", security=command_config.current()
    )
    await connection.negotiate_api_versions()
    return connection


async def _call(connection: KafkaConnection, api_key: int, data: dict[str, Any]) -> Any:
    version = connection.version_for(api_key, 1, 3)
    request_class = codec.request_class(api_key, version)
    assert request_class is not None
    return await connection.request(build(request_class, data), version)


def _wire_filter(resource: ResourceFilter, entry: AccessControlEntry | None) -> dict[str, Any]:
    return {
        "resource_type_filter": int(resource.resource_type),
        "resource_name_filter": resource.name,
        "pattern_type_filter": int(resource.pattern_type),
        "principal_filter": None if entry is None else entry.principal,
        "host_filter": None if entry is None else entry.host,
        "operation": int(AclOperation.ANY if entry is None else entry.operation),
        "permission_type": int(AclPermissionType.ANY if entry is None else entry.permission_type),
    }


async def describe(connection: KafkaConnection, resource: ResourceFilter) -> list[AclBinding]:
    response = await _call(connection, DESCRIBE_ACLS, _wire_filter(resource, None))
    _check(int(response.error_code), response.error_message)
    return [
        AclBinding(
            ResourcePattern(
                ResourceType(int(r.resource_type)),
                str(r.resource_name),
                PatternType(int(r.pattern_type)),
            ),
            AccessControlEntry(
                str(a.principal),
                str(a.host),
                AclOperation(int(a.operation)),
                AclPermissionType(int(a.permission_type)),
            ),
        )
        for r in response.resources
        for a in r.acls
    ]


async def create(connection: KafkaConnection, bindings: Sequence[AclBinding]) -> None:
    creations = [
        {
            "resource_type": int(b.pattern.resource_type),
            "resource_name": b.pattern.name,
            "resource_pattern_type": int(b.pattern.pattern_type),
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": int(b.entry.operation),
            "permission_type": int(b.entry.permission_type),
        }
        for b in bindings
    ]
    response = await _call(connection, CREATE_ACLS, {"creations": creations})
    for result in response.results:
        _check(int(result.error_code), result.error_message)


async def delete(
    connection: KafkaConnection, resource: ResourceFilter, acls: Sequence[AccessControlEntry]
) -> None:
    filters = [_wire_filter(resource, entry) for entry in acls] or [_wire_filter(resource, None)]
    response = await _call(connection, DELETE_ACLS, {"filters": filters})
    for result in response.filter_results:
        _check(int(result.error_code), result.error_message)


# ---- the command ---------------------------------------------------------------------------


def _confirm(question: str, force: bool) -> bool:
    if force:
        return True
    typer.echo(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def _list(
    connection: KafkaConnection, options: AclOptions, principals: list[str], as_json: bool = False
) -> None:
    filters = resource_filters(options) or [ANY_RESOURCE]
    found: set[AclBinding] = set()
    for resource in filters:
        found.update(await describe(connection, resource))
    if as_json:
        emit_json(listing_document(sorted(found), principals))
        return
    for block in format_listing(sorted(found), principals):
        typer.echo(block)


def acls(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port of any broker.")
    ] = "localhost:9092",
    add: Annotated[bool, typer.Option("--add", help="Add ACLs.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove ACLs.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List ACLs.")] = False,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="Topic (repeatable).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="Group (repeatable).")] = None,
    transactional_id: Annotated[
        list[str] | None, typer.Option("--transactional-id", help="Transactional id.")
    ] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource.")] = False,
    resource_pattern_type: Annotated[
        str,
        typer.Option(
            "--resource-pattern-type",
            help="literal or prefixed (add); also any or match (list, remove).",
        ),
    ] = "LITERAL",
    allow_principal: Annotated[
        list[str] | None, typer.Option("--allow-principal", help="User:<name> (repeatable).")
    ] = None,
    deny_principal: Annotated[
        list[str] | None, typer.Option("--deny-principal", help="User:<name> (repeatable).")
    ] = None,
    allow_host: Annotated[
        list[str] | None, typer.Option("--allow-host", help="Host of the allow ACLs (*).")
    ] = None,
    deny_host: Annotated[
        list[str] | None, typer.Option("--deny-host", help="Host of the deny ACLs (*).")
    ] = None,
    principal: Annotated[
        list[str] | None, typer.Option("--principal", help="--list: only this principal.")
    ] = None,
    operation: Annotated[
        list[str] | None,
        typer.Option("--operation", help="Read, Write, Create, Delete, Alter, Describe, ... All."),
    ] = None,
    producer: Annotated[bool, typer.Option("--producer", help="Producer ACLs.")] = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="Consumer ACLs.")] = False,
    idempotent: Annotated[
        bool, typer.Option("--idempotent", help="With --producer: IDEMPOTENT_WRITE.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="--remove without asking.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Add, remove or list ACLs (kafka-acls.sh). --command-config FILE secures the connection."""
    if [add, remove, list_].count(True) != 1:
        typer.echo("Command must include exactly one action: --list, --add, --remove.", err=True)
        raise typer.Exit(1)
    if as_json and not list_:
        typer.echo("Error while executing ACL command: --json is only for --list", err=True)
        raise typer.Exit(1)
    options = AclOptions(
        topics=tuple(topic or ()),
        groups=tuple(group or ()),
        transactional_ids=tuple(transactional_id or ()),
        cluster=cluster,
        pattern_type=resource_pattern_type,
        allow_principals=tuple(allow_principal or ()),
        deny_principals=tuple(deny_principal or ()),
        allow_hosts=tuple(allow_host or ()),
        deny_hosts=tuple(deny_host or ()),
        operations=tuple(operation or ()),
        producer=producer,
        consumer=consumer,
        idempotent=idempotent,
    )

    async def main() -> None:
        connection = await _connect(bootstrap_server)
        try:
            if add:
                plan = bindings_to_add(options)
                for pattern, wanted in sorted(plan.items()):
                    typer.echo(format_acls("Adding ACLs for resource", pattern, sorted(wanted)))
                    await create(connection, [AclBinding(pattern, e) for e in sorted(wanted)])
                await _list(connection, options, [])
            elif remove:
                filters = resource_filters(options)
                if not filters:
                    raise AclCommandError(
                        "You must provide at least one resource: --topic <topic> or --cluster "
                        "or --group <group> or --transactional-id <id>"
                    )
                has_principals = options.allow_principals or options.deny_principals
                operations = _operations(options)
                for resource in filters:
                    acls = sorted(entries(options, operations)) if has_principals else []
                    if not acls:
                        question = (
                            "Are you sure you want to delete all ACLs for resource filter "
                            f"`{resource}`? (y/n)"
                        )
                    else:
                        question = (
                            f"Are you sure you want to remove ACLs: \n {_entry_lines(acls)} \n"
                            f" from resource filter `{resource}`? (y/n)"
                        )
                    if _confirm(question, force):
                        await delete(connection, resource, acls)
                await _list(connection, options, [])
            else:
                await _list(connection, options, _principals(principal or ()), as_json)
        finally:
            await connection.close()

    try:
        trio.run(main)
    except (AclCommandError, ClientError, OSError) as error:
        typer.echo(f"Error while executing ACL command: {error}", err=True)
        raise typer.Exit(1) from None
