"""`ktool topics`: create, list, describe, delete and alter topics over the Kafka protocol.

Output follows `kafka-topics.sh` (TopicCommand.java, REFERENCE.md §6.1):

    ktool topics create orders --partitions 6 --replication-factor 3   # Created topic orders.
    ktool topics list                                                  # one name per line
    ktool topics describe orders     # tab-separated, as kafka-topics.sh prints it:
    Topic: orders  TopicId: <id>  PartitionCount: 6  ReplicationFactor: 3  Configs: k=v,...
        Topic: orders  Partition: 0  Leader: 1  Replicas: 1,2,3  Isr: 1,2,3  Elr: N/A ...
    ktool topics alter orders --partitions 8
    ktool topics delete orders

`--bootstrap-server` (default localhost:9092) names any broker; requests go over
`trafka.net.client.KafkaConnection` with versions negotiated by ApiVersions. `--json` prints
one JSON document instead. Failures print one line (`Error while executing topic command :
<message>`) on stderr and exit with status 1.

`describe` adds `Adding Replicas:` / `Removing Replicas:` to partitions being reassigned (from
ListPartitionReassignments, API 46, KIP-455) and filters partitions like kafka-topics.sh:
`--under-replicated-partitions` (ISR smaller than replicas), `--unavailable-partitions` (no
leader, or a leader not among the live brokers Metadata lists), `--under-min-isr-partitions`
and `--at-min-isr-partitions` (ISR below / equal to the topic's effective
`min.insync.replicas` from DescribeConfigs). With a filter the topic lines are left out, as
kafka-topics.sh does; several filters select the union.

Topics pending deletion: `describe` appends `\tMarkedForDeletion: true` to the topic line and
to each partition line of a topic queued in `/admin/delete_topics`, as kafka-topics.sh did
with `--zookeeper` (TopicCommand's ZookeeperTopicService: `zkClient.isTopicMarkedForDeletion`).
Metadata cannot say it, so the last request on the connection is trafka's private tree read
(TrafkaDescribeZNodes, API key 10000, `trafka.client.metadata.read_znodes`) of the
children of `/admin/delete_topics`. Once the controller has started a deletion the brokers
drop the topic from Metadata (UpdateMetadata with leader -2, CTL-29), so a pending topic that
Metadata no longer lists is described from the tree, as the ZooKeeper variant did:
`/brokers/topics/<t>` (assignment, topic id), its partitions' `state` nodes (leader, ISR) and
`/config/topics/<t>` (overrides). A Kafka broker closes the connection on the private
request: against one, nothing is marked (Kafka's KRaft TopicCommand never prints the field).

Not implemented: `--topic` regular expressions, `--exclude-internal` (internal topics are
listed), `--command-config`, `list`'s ZooKeeper-era `<t> - marked for deletion` suffix, the
broker-level `min.insync.replicas` for a topic described from the tree (its own override or
1), the KIP-966 ELR fields (always `Elr: N/A`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import trio
import typer

from trafka.client import command_config
from trafka.client.metadata import MetadataReadError, read_znodes
from trafka.log.names import COLLISION_WARNING, has_collision_chars, topic_name_error
from trafka.metadata_quorum import znodes
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection, UnsupportedByBroker
from trafka.net.kio_shape import build
from trafka.node.topics import topic_id_text
from trafka.tools.output import JsonFlag, emit_json

topics_app = typer.Typer(
    name="topics",
    help="Create, list, describe, alter and delete topics (kafka-topics.sh).",
    no_args_is_help=True,
    add_completion=False,
)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", help="host:port of any broker")]

DYNAMIC_TOPIC_CONFIG = 1
TOPIC_RESOURCE = 2


class TopicCommandError(Exception):
    pass


async def _connect(bootstrap: str) -> KafkaConnection:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise TopicCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    try:
        connection = await KafkaConnection.connect(
            host, int(port), client_id="ktool-topics", security=command_config.current()
        )
        await connection.negotiate_api_versions()
    except ClientError as error:
        raise TopicCommandError(str(error)) from None
    return connection


async def _call(
    connection: KafkaConnection, api_key: ApiKey, data: dict[str, Any], high: int
) -> Any:
    version = connection.version_for(api_key, 0, high)
    request_class = codec.request_class(api_key, version)
    assert request_class is not None
    return await connection.request(build(request_class, data), version)


def _error(code: Any, message: str | None) -> str:
    name = getattr(code, "name", str(code)).upper()
    return f"{name}: {message}" if message else name


async def _metadata(connection: KafkaConnection, topics: list[str] | None) -> Any:
    return await _call(
        connection,
        ApiKey.METADATA,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        },
        12,
    )


def _run(command: Callable[[], Awaitable[None]]) -> None:
    try:
        trio.run(command)
    except (TopicCommandError, ClientError) as error:
        print(f"Error while executing topic command : {error}", file=sys.stderr)
        raise typer.Exit(code=1) from None


def _parse_configs(items: list[str] | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TopicCommandError(f"invalid --config {item!r}: expected key=value")
        configs[key.strip()] = value.strip()
    return configs


def _parse_assignment(text: str | None) -> list[list[int]]:
    """kafka-topics' --replica-assignment: `1:2,3:4` = partition 0 on 1,2; partition 1 on 3,4."""
    if not text:
        return []
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise TopicCommandError(f"invalid --replica-assignment {text!r}") from None


@topics_app.command("create")
def create(
    topic: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[int, typer.Option(help="number of partitions (-1: broker default)")] = -1,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", help="replicas per partition (-1: default)")
    ] = -1,
    config: Annotated[list[str] | None, typer.Option(help="key=value topic config")] = None,
    replica_assignment: Annotated[
        str | None, typer.Option("--replica-assignment", help="1:2,2:3,... per partition")
    ] = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists")] = False,
    validate_only: Annotated[bool, typer.Option("--validate-only")] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Create a topic."""

    async def command() -> None:
        # Checked here first, as kafka-topics.sh does (the broker checks again).
        name_error = topic_name_error(topic)
        if name_error is not None:
            raise TopicCommandError(name_error)
        if has_collision_chars(topic):
            print(COLLISION_WARNING, file=sys.stderr)
        configs = _parse_configs(config)
        assignment = _parse_assignment(replica_assignment)
        connection = await _connect(bootstrap_server)
        try:
            response = await _call(
                connection,
                ApiKey.CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": -1 if assignment else partitions,
                            "replication_factor": -1 if assignment else replication_factor,
                            "assignments": [
                                {"partition_index": i, "broker_ids": brokers}
                                for i, brokers in enumerate(assignment)
                            ],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()],
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": validate_only,
                },
                7,
            )
        finally:
            await connection.close()
        result = response.topics[0]
        code = int(result.error_code)
        if code == 36 and if_not_exists:
            code = 0
        if code != 0:
            raise TopicCommandError(_error(result.error_code, result.error_message))
        if as_json:
            emit_json({"topic": topic, "created": not validate_only})
        elif not validate_only:
            print(f"Created topic {topic}.")

    _run(command)


@topics_app.command("list")
def list_topics(bootstrap_server: Bootstrap = "localhost:9092", as_json: JsonFlag = False) -> None:
    """List topic names."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            response = await _metadata(connection, None)
        finally:
            await connection.close()
        names = sorted(str(t.name) for t in response.topics if int(t.error_code) == 0)
        if as_json:
            emit_json(names)
        else:
            print("\n".join(names))

    _run(command)


async def _topic_configs(
    connection: KafkaConnection, names: list[str], *, dynamic_only: bool = True
) -> dict[str, dict[str, tuple[str, bool]]]:
    """topic -> config name -> (value, set on the topic itself) from DescribeConfigs."""
    if not names:
        return {}
    response = await _call(
        connection,
        ApiKey.DESCRIBE_CONFIGS,
        {
            "resources": [
                {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                for n in names
            ],
            "include_synonyms": False,
        },
        4,
    )
    result: dict[str, dict[str, tuple[str, bool]]] = {}
    for resource in response.results:
        entries: dict[str, tuple[str, bool]] = {}
        for c in resource.configs:
            dynamic = int(getattr(c, "config_source", 0)) == DYNAMIC_TOPIC_CONFIG
            if c.value is None or (dynamic_only and not dynamic):
                continue
            entries[str(c.name)] = (str(c.value), dynamic)
        result[str(resource.resource_name)] = entries
    return result


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as `describe` shows it: Metadata's leader/replicas/ISR plus the moving
    replicas from ListPartitionReassignments (API 46, KIP-455)."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeFilter:
    """kafka-topics.sh's partition filters (TopicCommand.PartitionDescription); several
    flags select the union of what each selects, none selects every partition."""

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False

    @property
    def active(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr


def is_under_replicated(view: PartitionView) -> bool:
    """ISR smaller than the replica set (kafka-topics: `isr.size < assignment.size`)."""
    return len(view.isr) < len(view.replicas)


def is_unavailable(view: PartitionView, live_brokers: frozenset[int]) -> bool:
    """No leader, or a leader that is not among the live (registered) brokers."""
    return view.leader is None or view.leader not in live_brokers


def selected(
    view: PartitionView, flags: DescribeFilter, live_brokers: frozenset[int], min_isr: int
) -> bool:
    """Whether `describe` prints this partition under `flags`.

    under-min-isr: no leader, or `isr < min.insync.replicas`; at-min-isr:
    `isr == min.insync.replicas` (TopicCommand's `isUnderMinIsr` / `isAtMinIsrPartitions`)."""
    if not flags.active:
        return True
    return (
        (flags.under_replicated and is_under_replicated(view))
        or (flags.unavailable and is_unavailable(view, live_brokers))
        or (flags.under_min_isr and (view.leader is None or len(view.isr) < min_isr))
        or (flags.at_min_isr and len(view.isr) == min_isr)
    )


def _ids(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def topic_line(
    name: str,
    topic_id: str,
    partition_count: int,
    factor: int,
    configs: dict[str, str],
    marked_for_deletion: bool = False,
) -> str:
    """`Topic: t\tTopicId: ..\tPartitionCount: n\tReplicationFactor: r\tConfigs: k=v,..`
    and, for a topic queued in `/admin/delete_topics`, `\tMarkedForDeletion: true`."""
    config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    line = (
        f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: {partition_count}\t"
        f"ReplicationFactor: {factor}\tConfigs: {config_text}"
    )
    if marked_for_deletion:
        line += "\tMarkedForDeletion: true"
    return line


def partition_line(name: str, view: PartitionView, marked_for_deletion: bool = False) -> str:
    """`\tTopic: t\tPartition: p\tLeader: l|none\tReplicas: ..\tIsr: ..` then, while
    reassigning, `\tAdding Replicas: ..\tRemoving Replicas: ..`, then `\tElr: N/A\t
    LastKnownElr: N/A` and optionally `\tMarkedForDeletion: true` (REFERENCE §6.1)."""
    leader_text = "none" if view.leader is None else str(view.leader)
    line = (
        f"\tTopic: {name}\tPartition: {view.partition}\tLeader: {leader_text}\t"
        f"Replicas: {_ids(view.replicas)}\tIsr: {_ids(view.isr)}"
    )
    if view.adding_replicas or view.removing_replicas:
        line += (
            f"\tAdding Replicas: {_ids(view.adding_replicas)}"
            f"\tRemoving Replicas: {_ids(view.removing_replicas)}"
        )
    line += "\tElr: N/A\tLastKnownElr: N/A"
    if marked_for_deletion:
        line += "\tMarkedForDeletion: true"
    return line


def partition_document(view: PartitionView) -> dict[str, Any]:
    return {
        "partition": view.partition,
        "leader": view.leader,
        "replicas": list(view.replicas),
        "isr": list(view.isr),
        "adding_replicas": list(view.adding_replicas),
        "removing_replicas": list(view.removing_replicas),
    }


DEFAULT_MIN_INSYNC_REPLICAS = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
#: Pending topics one `describe` reads from the tree (each is one more request).
MAX_PENDING_TOPICS_READ = 1000


@dataclass(frozen=True, slots=True)
class TopicView:
    """One topic as `describe` shows it, from Metadata or (pending deletion, gone from
    Metadata) from the tree."""

    name: str
    topic_id: str
    partitions: tuple[PartitionView, ...]
    configs: dict[str, str]
    """Only the topic's own overrides (`Configs:` on the topic line)."""
    min_insync_replicas: int
    marked_for_deletion: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


def _min_insync(text: str) -> int:
    return int(text) if text.isdigit() else DEFAULT_MIN_INSYNC_REPLICAS


def topic_view_from_tree(name: str, nodes: dict[str, bytes], config: bytes | None) -> TopicView:
    """A topic from its znodes (path -> data) under `/brokers/topics/<name>` and the data of
    `/config/topics/<name>` (None when absent), as ZookeeperTopicService.describeTopic read
    it: replicas from the assignment, leader and ISR from each partition's `state` (none
    and empty when a partition has no state node). Raises ZNodeFormatError on bad JSON."""
    assignment = znodes.TopicAssignment.from_json(nodes[znodes.topic_path(name)])
    views = []
    for index, replicas in sorted(assignment.partitions.items()):
        state_data = nodes.get(znodes.partition_state_path(name, index))
        state = None if state_data is None else znodes.PartitionState.from_json(state_data)
        views.append(
            PartitionView(
                partition=index,
                leader=None if state is None or state.leader < 0 else state.leader,
                replicas=replicas,
                isr=() if state is None else state.isr,
                adding_replicas=assignment.adding_replicas.get(index, ()),
                removing_replicas=assignment.removing_replicas.get(index, ()),
            )
        )
    overrides = {} if config is None else znodes.EntityConfig.from_json(config).config
    return TopicView(
        name=name,
        topic_id=assignment.topic_id or topic_id_text(uuid.UUID(int=0)),
        partitions=tuple(views),
        configs=overrides,
        min_insync_replicas=_min_insync(overrides.get("min.insync.replicas", "")),
        marked_for_deletion=True,
    )


async def _pending_deletions(connection: KafkaConnection) -> frozenset[str]:
    """The children of `/admin/delete_topics`; none when the server does not answer
    trafka's tree read (a Kafka broker closes the connection on it)."""
    try:
        read = await read_znodes(connection, znodes.DELETE_TOPICS, children=True)
    except MetadataReadError:
        return frozenset()
    return frozenset(child for node in read.nodes for child in node.children)


def _is_absent(error: MetadataReadError) -> bool:
    """NONODE (-101): metadata_client reports ZooKeeper codes in the message only."""
    return str(error).startswith("Node does not exist")


async def _topic_from_tree(connection: KafkaConnection, name: str) -> TopicView | None:
    """A pending topic read from the tree; None when its deletion has finished by now."""
    try:
        read = await read_znodes(connection, znodes.topic_path(name), data=True, recursive=True)
    except MetadataReadError as error:
        if _is_absent(error):
            return None
        raise TopicCommandError(str(error)) from None
    try:
        config_read = await read_znodes(connection, znodes.topic_config_path(name), data=True)
        config = config_read.nodes[0].data if config_read.nodes else None
    except MetadataReadError as error:
        if not _is_absent(error):
            raise TopicCommandError(str(error)) from None
        config = None
    try:
        return topic_view_from_tree(name, {n.path: n.data for n in read.nodes}, config)
    except (znodes.ZNodeFormatError, KeyError) as error:
        raise TopicCommandError(f"topic {name}: {error}") from None


def _topic_view(
    entry: Any,
    every_config: dict[str, tuple[str, bool]],
    moving: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]],
    marked_for_deletion: bool,
) -> TopicView:
    name = str(entry.name)
    views = []
    for p in sorted(entry.partitions, key=lambda p: int(p.partition_index)):
        index = int(p.partition_index)
        adding, removing = moving.get((name, index), ((), ()))
        views.append(
            PartitionView(
                partition=index,
                leader=int(p.leader_id) if int(p.leader_id) >= 0 else None,
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
                adding_replicas=adding,
                removing_replicas=removing,
            )
        )
    return TopicView(
        name=name,
        topic_id=topic_id_text(getattr(entry, "topic_id", None) or uuid.UUID(int=0)),
        partitions=tuple(views),
        configs={k: v for k, (v, own) in every_config.items() if own},
        min_insync_replicas=_min_insync(every_config.get("min.insync.replicas", ("", False))[0]),
        marked_for_deletion=marked_for_deletion,
    )


async def _describe_topics(
    connection: KafkaConnection, topic: str | None
) -> tuple[list[TopicView], frozenset[int]]:
    """The topics (all, or `topic`) and the live brokers: Metadata, DescribeConfigs and
    ListPartitionReassignments, then the pending deletions (last: a Kafka broker closes the
    connection on trafka's tree read)."""
    response = await _metadata(connection, None if topic is None else [topic])
    found = []
    missing = []
    for entry in response.topics:
        code = int(entry.error_code)
        if code == UNKNOWN_TOPIC_OR_PARTITION:
            missing.append(str(entry.name))
        elif code != 0:
            raise TopicCommandError(_error(entry.error_code, None))
        else:
            found.append(entry)
    all_configs = await _topic_configs(connection, [str(t.name) for t in found], dynamic_only=False)
    moving = await _reassignments(connection)
    pending = await _pending_deletions(connection)
    views = [
        _topic_view(entry, all_configs.get(str(entry.name), {}), moving, str(entry.name) in pending)
        for entry in found
    ]
    listed = {view.name for view in views}
    unlisted = sorted(name for name in pending - listed if topic is None or name == topic)[
        :MAX_PENDING_TOPICS_READ
    ]
    for name in unlisted:
        view = await _topic_from_tree(connection, name)
        if view is not None:
            views.append(view)
    described = {view.name for view in views}
    for name in missing:
        if name not in described:
            raise TopicCommandError(f"Topic '{name}' does not exist as expected")
    live = frozenset(int(b.node_id) for b in response.brokers)
    return sorted(views, key=lambda view: view.name), live


async def _reassignments(
    connection: KafkaConnection,
) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """(topic, partition) -> (adding, removing) from ListPartitionReassignments; empty when
    the broker does not offer API 46."""
    try:
        connection.version_for(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
    except UnsupportedByBroker:
        return {}
    response = await _call(
        connection, ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout": 30000, "topics": None}, 0
    )
    if int(response.error_code) != 0:
        raise TopicCommandError(_error(response.error_code, response.error_message))
    return {
        (str(t.name), int(p.partition_index)): (
            tuple(int(r) for r in p.adding_replicas),
            tuple(int(r) for r in p.removing_replicas),
        )
        for t in response.topics
        for p in t.partitions
    }


@topics_app.command("describe")
def describe(
    topic: Annotated[str | None, typer.Argument(help="topic (default: all)")] = None,
    under_replicated_partitions: Annotated[
        bool, typer.Option("--under-replicated-partitions", help="ISR smaller than replicas")
    ] = False,
    unavailable_partitions: Annotated[
        bool, typer.Option("--unavailable-partitions", help="no live leader")
    ] = False,
    under_min_isr_partitions: Annotated[
        bool, typer.Option("--under-min-isr-partitions", help="ISR < min.insync.replicas")
    ] = False,
    at_min_isr_partitions: Annotated[
        bool, typer.Option("--at-min-isr-partitions", help="ISR = min.insync.replicas")
    ] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Describe topics: ids, partitions, leaders, replicas, ISR, moving replicas, configs,
    and whether a topic is marked for deletion."""
    flags = DescribeFilter(
        under_replicated=under_replicated_partitions,
        unavailable=unavailable_partitions,
        under_min_isr=under_min_isr_partitions,
        at_min_isr=at_min_isr_partitions,
    )

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            topics, live = await _describe_topics(connection, topic)
        finally:
            await connection.close()
        documents = []
        lines = []
        for view in topics:
            chosen = [
                p for p in view.partitions if selected(p, flags, live, view.min_insync_replicas)
            ]
            documents.append(
                {
                    "topic": view.name,
                    "topic_id": view.topic_id,
                    "partition_count": len(view.partitions),
                    "replication_factor": view.replication_factor,
                    "min_insync_replicas": view.min_insync_replicas,
                    "configs": view.configs,
                    "marked_for_deletion": view.marked_for_deletion,
                    "partitions": [partition_document(p) for p in chosen],
                }
            )
            if not flags.active:
                lines.append(
                    topic_line(
                        view.name,
                        view.topic_id,
                        len(view.partitions),
                        view.replication_factor,
                        view.configs,
                        view.marked_for_deletion,
                    )
                )
            lines.extend(partition_line(view.name, p, view.marked_for_deletion) for p in chosen)
        if as_json:
            emit_json(documents)
        elif lines:
            print("\n".join(lines))

    _run(command)


@topics_app.command("delete")
def delete(
    topic: Annotated[str, typer.Argument(help="topic name")],
    if_exists: Annotated[bool, typer.Option("--if-exists")] = False,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Delete a topic."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            version = connection.version_for(ApiKey.DELETE_TOPICS, 1, 6)
            data: dict[str, Any] = {"timeout": 30000}
            if version >= 6:
                data["topics"] = [{"name": topic}]
            else:
                data["topic_names"] = [topic]
            response = await _call(connection, ApiKey.DELETE_TOPICS, data, version)
        finally:
            await connection.close()
        result = response.responses[0]
        code = int(result.error_code)
        if code == 3 and if_exists:
            code = 0
        elif code == 3:
            raise TopicCommandError(f"Topic '{topic}' does not exist as expected")
        if code != 0:
            raise TopicCommandError(
                _error(result.error_code, getattr(result, "error_message", None))
            )
        if as_json:
            emit_json({"topic": topic, "deleted": True})

    _run(command)


@topics_app.command("alter")
def alter(
    topic: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[int, typer.Option(help="the new total number of partitions")],
    replica_assignment: Annotated[
        str | None, typer.Option("--replica-assignment", help="for the new partitions")
    ] = None,
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Increase the number of partitions of a topic."""

    async def command() -> None:
        assignment = _parse_assignment(replica_assignment)
        connection = await _connect(bootstrap_server)
        try:
            response = await _call(
                connection,
                ApiKey.CREATE_PARTITIONS,
                {
                    "topics": [
                        {
                            "name": topic,
                            "count": partitions,
                            "assignments": [{"broker_ids": b} for b in assignment] or None,
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": False,
                },
                3,
            )
        finally:
            await connection.close()
        result = response.results[0]
        if int(result.error_code) != 0:
            raise TopicCommandError(_error(result.error_code, result.error_message))
        if as_json:
            emit_json({"topic": topic, "partitions": partitions})

    _run(command)
