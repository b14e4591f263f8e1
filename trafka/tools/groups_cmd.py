"""`ktool groups`: Kafka's kafka-consumer-groups.sh for trafka (REFERENCE §6.4, docs/groups.md).

    ktool groups list [--state Stable ...] [--json]
    ktool groups describe (--group G ... | --all-groups) [--offsets [--verbose] | --members
        | --state] [--json]
    ktool groups reset-offsets --group G (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO | --shift-by N)
        [--dry-run (default) | --execute] [--json]
    ktool groups delete --group G [--group G2 ...]
    ktool groups delete-offsets --group G --topic T[:P,P] ...

Every command takes `--bootstrap-server host:port` (default localhost:9092). Output columns
are kafka-consumer-groups.sh's: describe `GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET
LAG CONSUMER-ID HOST CLIENT-ID`, `--members` `GROUP CONSUMER-ID GROUP-INSTANCE-ID HOST
CLIENT-ID #PARTITIONS`, `--state` `GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE
#MEMBERS`, reset-offsets `GROUP TOPIC PARTITION NEW-OFFSET`; stderr notes "Consumer group
'g' has no active members." and "Warning: Consumer group 'g' is rebalancing.". Errors are
one line on stderr with exit code 1.

KIP-848 consumer groups (docs/groups.md) are described with ConsumerGroupDescribe as well:
`--state` and `--members` show the group's protocol in JSON ("classic" or "consumer"), and
with `--verbose` Kafka 4's extra columns: `--state --verbose` adds GROUP-EPOCH and
TARGET-ASSIGNMENT-EPOCH, `--members --verbose` adds CURRENT-EPOCH, CURRENT-ASSIGNMENT,
TARGET-EPOCH and TARGET-ASSIGNMENT (assignments as `topic:0,1;other:2`); a classic group's
`--members --verbose` adds Kafka's ASSIGNMENT column.

Requests (our own trio client, kio messages): Metadata v8, FindCoordinator v3,
ListGroups v4 (to every broker), DescribeGroups v5, ConsumerGroupDescribe v0 (when the
broker has it), OffsetFetch v6, ListOffsets v4,
OffsetCommit v8 (generation -1: a "simple" commit, so the group must be inactive),
DeleteGroups v2, OffsetDelete v0.

The offsets table is kafka-consumer-groups.sh's line for line (its printf widths and row
order; `--verbose` adds LEADER-EPOCH; a group without rows prints no table; a dead group
prints "Error: Consumer group 'g' does not exist." on stdout, as Kafka does); compared with
Kafka 4.4's tool in tests/cluster/test_ktool_parity.py.

Not implemented: `--from-file`, `--to-current`, `--by-duration`, `--export` (CSV).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import trio
import typer

from trafka.client import command_config
from trafka.group.consumer_protocol import assigned_partitions
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.tools.output import JsonFlag, emit_json

groups_app = typer.Typer(
    help="List, describe, reset and delete consumer groups.", no_args_is_help=True
)

T = TypeVar("T")

BootstrapOption = Annotated[
    str, typer.Option("--bootstrap-server", help="host:port of any broker.")
]
GroupOption = Annotated[str, typer.Option("--group", help="The consumer group.")]

_REBALANCING = ("PreparingRebalance", "CompletingRebalance")
_LATEST = -1
_EARLIEST = -2


class GroupsError(Exception):
    """A failure reported as one line on stderr."""


def _error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by spaces, like kafka-consumer-groups.sh."""
    cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        " ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def parse_topic_partitions(specs: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    """`t` (every partition) or `t:0,2` (those partitions)."""
    result: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, _, partitions = spec.partition(":")
        if not topic:
            raise GroupsError(f"bad --topic {spec!r}")
        try:
            numbers = [int(p) for p in partitions.split(",")] if partitions else None
        except ValueError:
            raise GroupsError(f"bad partition list in --topic {spec!r}") from None
        result.append((topic, numbers))
    return result


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str
    leader_epoch: int | None = None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


def _dash(value: object) -> object:
    return "-" if value is None or value == "" else value


def compute_new_offset(
    *,
    earliest: int,
    latest: int,
    current: int | None,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    shift_by: int | None,
    at_datetime: int | None,
) -> int:
    """Kafka's reset rules: the result is clamped into [log start, log end]."""
    if to_earliest:
        target = earliest
    elif to_latest:
        target = latest
    elif to_offset is not None:
        target = to_offset
    elif shift_by is not None:
        target = (current if current is not None else latest) + shift_by
    elif at_datetime is not None:
        target = latest if at_datetime < 0 else at_datetime
    else:
        raise GroupsError(
            "one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
        )
    return min(max(target, earliest), latest)


# --- the client side --------------------------------------------------------------------


class _Admin:
    """Connections to the brokers of one cluster, by node id."""

    def __init__(self, bootstrap: str) -> None:
        # a list `h1:p1,h2:p2` is accepted, like Kafka's tools; the first one is asked
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if not host or not port.isdigit():
            raise GroupsError(f"bad --bootstrap-server {bootstrap!r} (want host:port)")
        self._bootstrap = (host, int(port))
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.topic_partitions: dict[str, list[int]] = {}

    async def connection(self, address: tuple[str, int]) -> KafkaConnection:
        existing = self._connections.get(address)
        if existing is not None and not existing.closed:
            return existing
        conn = await KafkaConnection.connect(
            *address, client_id="ktool", security=command_config.current()
        )
        await conn.negotiate_api_versions()
        self._connections[address] = conn
        return conn

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()

    async def request(
        self, address: tuple[str, int], api_key: ApiKey, version: int, data: dict[str, Any]
    ) -> Any:
        cls = codec.request_class(api_key, version)
        assert cls is not None, (api_key, version)
        conn = await self.connection(address)
        return await conn.request(build(cls, data))

    async def metadata(self, topics: Sequence[str] | None) -> None:
        response = await self.request(
            self._bootstrap,
            ApiKey.METADATA,
            8,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
            },
        )
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        for topic in response.topics:
            if int(topic.error_code) != 0:
                continue
            self.topic_partitions[str(topic.name)] = sorted(
                int(p.partition_index) for p in topic.partitions
            )
            for p in topic.partitions:
                self.leaders[(str(topic.name), int(p.partition_index))] = int(p.leader_id)

    async def coordinator(self, group: str) -> tuple[int, tuple[str, int]]:
        response = await self.request(
            self._bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}
        )
        if int(response.error_code) != 0:
            raise GroupsError(
                f"cannot find the coordinator of group '{group}': "
                f"{_error_name(int(response.error_code))}"
            )
        return int(response.node_id), (str(response.host), int(response.port))

    async def list_offsets(
        self, partitions: Sequence[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """Offsets by timestamp (-1 latest, -2 earliest) from each partition's leader."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        result: dict[tuple[str, int], int] = {}
        for leader, tps in by_leader.items():
            if leader not in self.brokers:
                continue
            topics: dict[str, list[dict[str, int]]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append(
                    {"partition_index": partition, "timestamp": timestamp}
                )
            response = await self.request(
                self.brokers[leader],
                ApiKey.LIST_OFFSETS,
                4,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            for topic in response.topics:
                for p in topic.partitions:
                    if int(p.error_code) == 0:
                        result[(str(topic.name), int(p.partition_index))] = int(p.offset)
        return result

    async def describe(self, group: str) -> tuple[Any, int, tuple[str, int]]:
        node_id, address = await self.coordinator(group)
        response = await self.request(
            address,
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": [group], "include_authorized_operations": False},
        )
        described = response.groups[0]
        if int(described.error_code) != 0:
            raise GroupsError(
                f"cannot describe group '{group}': {_error_name(int(described.error_code))}"
            )
        return described, node_id, address

    async def consumer_describe(self, group: str, address: tuple[str, int]) -> Any | None:
        """The KIP-848 view of a consumer group (None: a classic group, or an old broker)."""
        conn = await self.connection(address)
        if int(ApiKey.CONSUMER_GROUP_DESCRIBE) not in conn.broker_versions:
            return None
        response = await self.request(
            address,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            {"group_ids": [group], "include_authorized_operations": False},
        )
        described = response.groups[0]
        return described if int(described.error_code) == 0 else None

    async def committed(self, group: str, address: tuple[str, int]) -> dict[tuple[str, int], int]:
        return {
            tp: offset for tp, (offset, _) in (await self.committed_epochs(group, address)).items()
        }

    async def committed_epochs(
        self, group: str, address: tuple[str, int]
    ) -> dict[tuple[str, int], tuple[int, int | None]]:
        """Committed offset and leader epoch (None when unknown) of each partition."""
        response = await self.request(
            address,
            ApiKey.OFFSET_FETCH,
            6,
            {"group_id": group, "topics": None, "require_stable": False},
        )
        if int(response.error_code) != 0:
            raise GroupsError(
                f"cannot fetch offsets of group '{group}': {_error_name(int(response.error_code))}"
            )
        return {
            (str(t.name), int(p.partition_index)): (
                int(p.committed_offset),
                int(p.committed_leader_epoch) if int(p.committed_leader_epoch) >= 0 else None,
            )
            for t in response.topics
            for p in t.partitions
            if int(p.committed_offset) >= 0
        }


def _run(body: Callable[[_Admin], Any], bootstrap: str) -> Any:
    async def main() -> Any:
        admin = _Admin(bootstrap)
        try:
            return await body(admin)
        finally:
            await admin.close()

    try:
        return trio.run(main)
    except (GroupsError, ClientError, OSError) as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(1) from None


def _print_json(value: Any) -> None:
    emit_json(value)


# --- commands ---------------------------------------------------------------------------


@groups_app.command("list")
def list_groups(
    bootstrap_server: BootstrapOption = "localhost:9092",
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only groups in these states.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Every group of the cluster (ListGroups to each broker)."""

    async def body(admin: _Admin) -> list[tuple[str, str]]:
        await admin.metadata([])
        listed: dict[str, str] = {}
        for address in admin.brokers.values():
            response = await admin.request(
                address, ApiKey.LIST_GROUPS, 4, {"states_filter": list(state or [])}
            )
            for g in response.groups:
                listed[str(g.group_id)] = str(g.group_state)
        return sorted(listed.items())

    groups = _run(body, bootstrap_server)
    if as_json:
        _print_json([{"group": g, "state": s} for g, s in groups])
    elif state:
        typer.echo(format_table(["GROUP", "STATE"], groups))
    else:
        for group, _ in groups:
            typer.echo(group)


def _member_partitions(described: Any) -> dict[tuple[str, int], Any]:
    owners: dict[tuple[str, int], Any] = {}
    for member in described.members:
        for topic, partitions in (
            assigned_partitions(bytes(member.member_assignment)) or {}
        ).items():
            for partition in partitions:
                owners[(topic, partition)] = member
    return owners


def _notes(group: str, described: Any) -> None:
    if str(described.group_state) in _REBALANCING:
        typer.echo(f"Warning: Consumer group '{group}' is rebalancing.", err=True)
    elif not described.members:
        typer.echo(f"Consumer group '{group}' has no active members.", err=True)


def _offset_rows(
    group: str,
    described: Any,
    committed: dict[tuple[str, int], tuple[int, int | None]],
    ends: dict[tuple[str, int], int],
) -> list[PartitionOffsets]:
    """kafka-consumer-groups.sh's rows: members with the most partitions first (each member's
    partitions by topic and partition), then committed partitions no member owns."""

    def row(tp: tuple[str, int], owner: Any) -> PartitionOffsets:
        offset, epoch = committed.get(tp, (None, None))
        return PartitionOffsets(
            topic=tp[0],
            partition=tp[1],
            current_offset=offset,
            log_end_offset=ends.get(tp),
            consumer_id=str(owner.member_id) if owner else "",
            host=str(owner.client_host) if owner else "",
            client_id=str(owner.client_id) if owner else "",
            leader_epoch=epoch,
        )

    assigned: list[tuple[Any, list[tuple[str, int]]]] = []
    for member in described.members:
        tps = [
            (topic, partition)
            for topic, partitions in (
                assigned_partitions(bytes(member.member_assignment)) or {}
            ).items()
            for partition in partitions
        ]
        if tps:
            assigned.append((member, sorted(set(tps))))
    assigned.sort(key=lambda entry: -len(entry[1]))  # stable, like Java's List.sort
    rows = [row(tp, member) for member, tps in assigned for tp in tps]
    owned = {tp for _, tps in assigned for tp in tps}
    rows += [row(tp, None) for tp in sorted(set(committed) - owned)]
    return rows


def offsets_table(rows: Sequence[PartitionOffsets], group: str, *, verbose: bool) -> list[str]:
    """The lines of kafka-consumer-groups.sh's offsets table (its printf widths: group, topic,
    consumer id and host at least 15 wide, the other columns 10 or 15, CLIENT-ID unpadded)."""
    widths = {"group": 15, "topic": 15, "consumer": 15, "host": 15}
    for r in rows:
        widths["group"] = max(widths["group"], len(group))
        widths["topic"] = max(widths["topic"], len(r.topic))
        widths["consumer"] = max(widths["consumer"], len(str(_dash(r.consumer_id))))
        widths["host"] = max(widths["host"], len(str(_dash(r.host))))
    middle = [10, 15, 15, 15, 15] if verbose else [10, 15, 15, 15]
    pads = [widths["group"], widths["topic"], *middle, widths["consumer"], widths["host"]]

    def line(cells: Sequence[object]) -> str:
        text = [str(c) for c in cells]
        return " ".join([*(c.ljust(w) for c, w in zip(text, pads, strict=False)), text[-1]])

    epoch = ["LEADER-EPOCH"] if verbose else []
    lines = [
        line(
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                *epoch,
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ]
        )
    ]
    for r in rows:
        lines.append(
            line(
                [
                    group,
                    r.topic,
                    r.partition,
                    *([_dash(r.leader_epoch)] if verbose else []),
                    _dash(r.current_offset),
                    _dash(r.log_end_offset),
                    _dash(r.lag),
                    _dash(r.consumer_id),
                    _dash(r.host),
                    _dash(r.client_id),
                ]
            )
        )
    return lines


async def _consumer_groups(admin: _Admin) -> list[str]:
    """Every group of the cluster, from ListGroups to each broker, sorted."""
    await admin.metadata([])
    listed: set[str] = set()
    for address in admin.brokers.values():
        response = await admin.request(address, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        if int(response.error_code) == 0:
            listed.update(str(g.group_id) for g in response.groups)
    return sorted(listed)


@dataclass(frozen=True, slots=True)
class _Described:
    group: str
    described: Any
    node_id: int
    address: tuple[str, int]
    rows: list[PartitionOffsets]
    consumer: Any | None = None  # ConsumerGroupDescribe's group (KIP-848 groups)


@groups_app.command("describe")
def describe(
    group: Annotated[
        list[str] | None, typer.Option("--group", help="The consumer group (repeatable).")
    ] = None,
    all_groups: Annotated[
        bool, typer.Option("--all-groups", help="Describe every group of the cluster.")
    ] = False,
    bootstrap_server: BootstrapOption = "localhost:9092",
    offsets: Annotated[
        bool, typer.Option("--offsets", help="Offsets and lag per partition (the default).")
    ] = False,
    members: Annotated[bool, typer.Option("--members", help="Describe the members.")] = False,
    state: Annotated[bool, typer.Option("--state", help="Describe the group's state.")] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="With --offsets: LEADER-EPOCH; with --members / --state: the KIP-848 epochs "
            "and assignments.",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Offsets and lag per partition (default), members, or state of groups."""
    if sum([offsets, members, state]) > 1:
        typer.echo("Error: choose one of --offsets, --members, --state", err=True)
        raise typer.Exit(1)
    if bool(group) == all_groups:
        typer.echo("Error: give --group (one or more) or --all-groups", err=True)
        raise typer.Exit(1)
    with_offsets = not (members or state)

    async def body(admin: _Admin) -> list[_Described]:
        names = sorted(set(group or [])) if group else await _consumer_groups(admin)
        result: list[_Described] = []
        for name in names:
            described, node_id, address = await admin.describe(name)
            consumer = None
            if str(described.protocol_type) == "consumer" and (members or state):
                consumer = await admin.consumer_describe(name, address)
            rows: list[PartitionOffsets] = []
            if with_offsets:
                committed = await admin.committed_epochs(name, address)
                owners = _member_partitions(described)
                partitions = sorted(set(committed) | set(owners))
                await admin.metadata(sorted({t for t, _ in partitions}))
                ends = await admin.list_offsets(partitions, _LATEST)
                rows = _offset_rows(name, described, committed, ends)
            result.append(_Described(name, described, node_id, address, rows, consumer))
        return result

    results = _run(body, bootstrap_server)
    values: list[Any] = []
    printed = False
    for result in results:
        value, lines = _describe_one(result, members=members, state=state, verbose=verbose)
        values.append(value)
        if lines and not as_json:
            if printed:
                typer.echo("")  # Kafka's blank line between groups
            typer.echo("\n".join(lines))
            printed = True
    if as_json:
        _print_json(values[0] if group and len(values) == 1 else values)


def _describe_one(
    result: _Described, *, members: bool, state: bool, verbose: bool
) -> tuple[Any, list[str]]:
    """One group's JSON value and table lines; its notes go to stderr."""
    group, described, consumer = result.group, result.described, result.consumer
    state_name = str(described.group_state)
    protocol = "consumer" if consumer is not None else "classic"
    if state:
        coordinator = f"{result.address[0]}:{result.address[1]} ({result.node_id})"
        record: dict[str, Any] = {
            "group": group,
            "coordinator": coordinator,
            "assignment_strategy": str(described.protocol_data),
            "state": state_name,
            "members": len(described.members),
            "protocol": protocol,
            "group_epoch": int(consumer.group_epoch) if consumer is not None else None,
            "target_assignment_epoch": (
                int(consumer.assignment_epoch) if consumer is not None else None
            ),
        }
        headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        cells: list[object] = [
            group,
            coordinator,
            _dash(record["assignment_strategy"]),
            state_name,
            len(described.members),
        ]
        if verbose:
            headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
            cells += [_dash(record["group_epoch"]), _dash(record["target_assignment_epoch"])]
        return record, format_table(headers, [cells]).splitlines()
    if state_name == "Dead":
        # Kafka's tool prints this on stdout, where the table would have been
        return [], [f"Error: Consumer group '{group}' does not exist."]
    _notes(group, described)
    if members:
        return _members_table(group, described, consumer, verbose=verbose)
    value = [
        {
            "group": group,
            "topic": r.topic,
            "partition": r.partition,
            "leader_epoch": r.leader_epoch,
            "current_offset": r.current_offset,
            "log_end_offset": r.log_end_offset,
            "lag": r.lag,
            "consumer_id": r.consumer_id or None,
            "host": r.host or None,
            "client_id": r.client_id or None,
        }
        for r in result.rows
    ]
    # Kafka prints no table at all for a group without rows (no members, no offsets)
    lines = offsets_table(result.rows, group, verbose=verbose) if result.rows else []
    return value, lines


def _assignment_text(partitions: dict[str, list[int]]) -> str:
    return ";".join(
        f"{topic}:{','.join(map(str, sorted(numbers)))}"
        for topic, numbers in sorted(partitions.items())
    )


def _kip848_assignment(assignment: Any) -> dict[str, list[int]]:
    return {
        str(tp.topic_name): [int(p) for p in tp.partitions] for tp in assignment.topic_partitions
    }


def _members_table(
    group: str, described: Any, consumer: Any | None, *, verbose: bool
) -> tuple[Any, list[str]]:
    """`--members` (Kafka's columns; `--verbose` adds the KIP-848 epochs and assignments)."""
    epochs = {}
    if consumer is not None:
        epochs = {str(m.member_id): m for m in consumer.members}
    member_rows = []
    for m in described.members:
        assigned = assigned_partitions(bytes(m.member_assignment)) or {}
        detail = epochs.get(str(m.member_id))
        current = _kip848_assignment(detail.assignment) if detail is not None else assigned
        target = _kip848_assignment(detail.target_assignment) if detail is not None else None
        member_rows.append(
            {
                "group": group,
                "consumer_id": str(m.member_id),
                "group_instance_id": m.group_instance_id,
                "host": str(m.client_host),
                "client_id": str(m.client_id),
                "partitions": sum(len(p) for p in assigned.values()),
                "protocol": "consumer" if consumer is not None else "classic",
                "member_epoch": int(detail.member_epoch) if detail is not None else None,
                "target_epoch": int(consumer.assignment_epoch) if consumer is not None else None,
                "assignment": current,
                "target_assignment": target,
            }
        )
    headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose and consumer is None:
        headers += ["ASSIGNMENT"]
    elif verbose:
        headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = []
    for r in member_rows:
        cells: list[object] = [
            r["group"],
            r["consumer_id"],
            _dash(r["group_instance_id"]),
            r["host"],
            r["client_id"],
            r["partitions"],
        ]
        if verbose and consumer is None:
            cells.append(_assignment_text(r["assignment"]) or "-")
        elif verbose:
            target = r["target_assignment"]
            cells += [
                _dash(r["member_epoch"]),
                _assignment_text(r["assignment"]) or "-",
                _dash(r["target_epoch"]),
                "-" if target is None else (_assignment_text(target) or "-"),
            ]
        rows.append(cells)
    return member_rows, format_table(headers, rows).splitlines()


def _parse_datetime(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise GroupsError(
            f"bad --to-datetime {text!r} (want ISO 8601, e.g. 2024-01-31T12:00:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


@groups_app.command("reset-offsets")
def reset_offsets(
    group: GroupOption,
    bootstrap_server: BootstrapOption = "localhost:9092",
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="T or T:P,P (repeatable).")
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has offsets for.")
    ] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="ISO 8601 (UTC if no zone).")
    ] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only print them (the default).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Move a group's committed offsets; the group must have no active members."""
    choices = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
    ]
    if sum(choices) != 1:
        typer.echo(
            "Error: give exactly one of --to-earliest, --to-latest, --to-offset, "
            "--to-datetime, --shift-by",
            err=True,
        )
        raise typer.Exit(1)
    if bool(topic) == all_topics:
        typer.echo("Error: give --topic or --all-topics", err=True)
        raise typer.Exit(1)
    if execute and dry_run:
        typer.echo("Error: --execute and --dry-run are exclusive", err=True)
        raise typer.Exit(1)
    at_ms = _parse_datetime(to_datetime) if to_datetime is not None else None

    async def body(admin: _Admin) -> list[tuple[str, int, int]]:
        described, _, address = await admin.describe(group)
        if str(described.group_state) not in ("Empty", "Dead"):
            raise GroupsError(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {described.group_state}."
            )
        committed = await admin.committed(group, address)
        if all_topics:
            targets = sorted(committed)
            await admin.metadata(sorted({t for t, _ in targets}))
        else:
            specs = parse_topic_partitions(topic or [])
            await admin.metadata([t for t, _ in specs])
            targets = []
            for name, numbers in specs:
                if name not in admin.topic_partitions:
                    raise GroupsError(f"topic '{name}' does not exist")
                targets += [(name, p) for p in (numbers or admin.topic_partitions[name])]
        earliest = await admin.list_offsets(targets, _EARLIEST)
        latest = await admin.list_offsets(targets, _LATEST)
        by_time = await admin.list_offsets(targets, at_ms) if at_ms is not None else {}
        plan = []
        for tp in targets:
            if tp not in earliest or tp not in latest:
                raise GroupsError(f"cannot read the offsets of {tp[0]}-{tp[1]}")
            new_offset = compute_new_offset(
                earliest=earliest[tp],
                latest=latest[tp],
                current=committed.get(tp),
                to_earliest=to_earliest,
                to_latest=to_latest,
                to_offset=to_offset,
                shift_by=shift_by,
                at_datetime=by_time.get(tp, -1) if at_ms is not None else None,
            )
            plan.append((tp[0], tp[1], new_offset))
        if execute and plan:
            topics: dict[str, list[dict[str, Any]]] = {}
            for name, partition, offset in plan:
                topics.setdefault(name, []).append(
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                )
            response = await admin.request(
                address,
                ApiKey.OFFSET_COMMIT,
                8,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                },
            )
            for t in response.topics:
                for p in t.partitions:
                    if int(p.error_code) != 0:
                        raise GroupsError(
                            f"commit of {t.name}-{p.partition_index} failed: "
                            f"{_error_name(int(p.error_code))}"
                        )
        return plan

    plan = _run(body, bootstrap_server)
    if as_json:
        _print_json(
            [{"group": group, "topic": t, "partition": p, "new_offset": o} for t, p, o in plan]
        )
        return
    typer.echo(
        format_table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [[group, t, p, o] for t, p, o in plan]
        )
    )


@groups_app.command("delete")
def delete(
    group: Annotated[list[str], typer.Option("--group", help="A group to delete (repeatable).")],
    bootstrap_server: BootstrapOption = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Delete inactive groups and their offsets."""

    async def body(admin: _Admin) -> dict[str, int]:
        results: dict[str, int] = {}
        for name in group:
            _, address = await admin.coordinator(name)
            response = await admin.request(
                address, ApiKey.DELETE_GROUPS, 2, {"groups_names": [name]}
            )
            for r in response.results:
                results[str(r.group_id)] = int(r.error_code)
        return results

    results = _run(body, bootstrap_server)
    if as_json:
        _print_json(
            [{"group": g, "error": None if c == 0 else _error_name(c)} for g, c in results.items()]
        )
    failed = {g: c for g, c in results.items() if c != 0}
    if not as_json:
        if not failed:
            names = ", ".join(f"'{g}'" for g in results)
            typer.echo(f"Deletion of requested consumer groups ({names}) was successful.")
        else:
            lines = ["Error: Deletion of some consumer groups failed:"]
            lines += [
                f"* Group '{g}' could not be deleted due to: {_error_name(c)}"
                for g, c in failed.items()
            ]
            typer.echo("\n".join(lines), err=True)
    if failed:
        raise typer.Exit(1)


@groups_app.command("delete-offsets")
def delete_offsets(
    group: GroupOption,
    topic: Annotated[list[str], typer.Option("--topic", help="T or T:P,P (repeatable).")],
    bootstrap_server: BootstrapOption = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Delete a group's committed offsets of topics it does not consume (KIP-496)."""

    async def body(admin: _Admin) -> tuple[int, list[tuple[str, int, int]]]:
        specs = parse_topic_partitions(topic)
        await admin.metadata([t for t, _ in specs])
        targets: dict[str, list[int]] = {}
        for name, numbers in specs:
            if name not in admin.topic_partitions:
                raise GroupsError(f"topic '{name}' does not exist")
            targets[name] = numbers or admin.topic_partitions[name]
        _, address = await admin.coordinator(group)
        response = await admin.request(
            address,
            ApiKey.OFFSET_DELETE,
            0,
            {
                "group_id": group,
                "topics": [
                    {"name": n, "partitions": [{"partition_index": p} for p in ps]}
                    for n, ps in targets.items()
                ],
            },
        )
        rows = [
            (str(t.name), int(p.partition_index), int(p.error_code))
            for t in response.topics
            for p in t.partitions
        ]
        return int(response.error_code), rows

    error, rows = _run(body, bootstrap_server)
    if as_json:
        _print_json(
            {
                "group": group,
                "error": None if error == 0 else _error_name(error),
                "partitions": [
                    {"topic": t, "partition": p, "error": None if c == 0 else _error_name(c)}
                    for t, p, c in rows
                ],
            }
        )
    elif error != 0:
        typer.echo(f"Error: Deletion of offsets failed due to: {_error_name(error)}", err=True)
    else:
        names = ",".join(sorted({t for t, _, _ in rows}))
        status = "succeed" if all(c == 0 for _, _, c in rows) else "failed"
        typer.echo(f"Request {status} for deleting offsets with topic {names} group {group}")
        typer.echo(
            format_table(
                ["TOPIC", "PARTITION", "STATUS"],
                [
                    [t, p, "Successful" if c == 0 else f"Error: {_error_name(c)}"]
                    for t, p, c in rows
                ],
            )
        )
    if error != 0 or any(c != 0 for _, _, c in rows):
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - `python -m trafka.tools.groups_cmd`
    groups_app()


if __name__ == "__main__":  # pragma: no cover
    main()
