"""`ktool reassign` and `ktool preferred-elect`: partition reassignment and leader elections.

Formats follow kafka-reassign-partitions.sh and kafka-leader-election.sh (REFERENCE.md
§6.2, §6.3):

    ktool reassign generate --topics-to-move-json-file topics.json --broker-list 4,5,6
    ktool reassign execute  --reassignment-json-file plan.json
    ktool reassign verify   --reassignment-json-file plan.json
    ktool reassign cancel   --reassignment-json-file plan.json
    ktool reassign list
    ktool preferred-elect --all-topic-partitions            # --election-type PREFERRED
    ktool preferred-elect --election-type unclean --topic t --partition 0
    ktool preferred-elect --path-to-json-file partitions.json

* topics-to-move JSON: `{"version":1,"topics":[{"topic":"foo"}]}`
* plan JSON: `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3],
  "log_dirs":["any","any","any"]}]}` (`log_dirs` optional; only "any" is supported)
* election JSON: `{"partitions":[{"topic":"foo","partition":1}]}`

Requests that only the controller serves (AlterPartitionReassignments, ElectLeaders) go to
the controller named in the Metadata response. `generate` uses Kafka's
`assignReplicasToBrokers` (`trafka.node.replica_assignment`). Failures print one line on
stderr and exit with status 1.

Replication throttles (KIP-73), as kafka-reassign-partitions.sh sets and clears them:

    ktool reassign execute --reassignment-json-file plan.json --throttle 1000000
    ktool reassign verify  --reassignment-json-file plan.json   # clears them when done

* `execute --throttle BYTES_PER_SEC` prints Kafka's "Warning: You must run --verify
  periodically, ..." line, then sets, with IncrementalAlterConfigs SET, on every moving
  topic `leader.replication.throttled.replicas` = `partition:source` for every current
  replica of every moving partition and `follower.replication.throttled.replicas` =
  `partition:destination` for every replica being added (ongoing reassignments included,
  Kafka's `calculateProposedMoveMap`), and on every broker involved (sources and
  destinations; each broker is sent its own BROKER resource)
  `leader.replication.throttled.rate` = `follower.replication.throttled.rate` = the rate,
  printing "The inter-broker throttle limit was set to N B/s".
* `verify`, once no reassignment at all is in progress, and `cancel` remove both topic keys
  from every topic of the plan and both rates from every live broker and every broker of
  the plan ("Clearing broker-level throttles on brokers 1,2,3" / "Clearing topic-level
  throttles on topic t"); `--preserve-throttles` keeps them.

Not implemented: `--replica-alter-log-dirs-throttle` (and the
`replica.alter.log.dirs.io.max.bytes.per.second` it sets: moves between log dirs of one
broker do not exist here), `--additional` (execute never refuses because of ongoing
reassignments; re-running it with another `--throttle` changes the throttle), log dirs
other than "any", `--disable-rack-aware` (racks are used when every broker has one).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import trio
import typer

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.node.replication.throttle import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from trafka.tools.output import (
    JsonFlag,
    Progress,
    QuietFlag,
    emit_json,
    reassignment_progress,
)

reassign_app = typer.Typer(
    name="reassign",
    help="Move partitions between brokers (kafka-reassign-partitions.sh).",
    no_args_is_help=True,
    add_completion=False,
)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", help="host:port of any broker")]
PlanFile = Annotated[Path, typer.Option("--reassignment-json-file", help="plan JSON")]
WaitFlag = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Wait until the plan's reassignments are done (progress on stderr when it is a "
        "terminal), then report as verify does.",
    ),
]
PreserveThrottles = Annotated[
    bool,
    typer.Option(
        "--preserve-throttles",
        help="Do not modify broker or topic throttles.",
    ),
]

BROKER_LEVEL_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
OP_SET = 0
OP_DELETE = 1
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)


class CommandError(Exception):
    pass


# ---- connections ---------------------------------------------------------------------------------


async def _connect(address: str) -> KafkaConnection:
    first = address.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise CommandError(f"invalid --bootstrap-server {address!r}: expected host:port")
    try:
        connection = await KafkaConnection.connect(
            host, int(port), client_id="ktool-reassign", security=command_config.current()
        )
        await connection.negotiate_api_versions()
    except ClientError as error:
        raise CommandError(str(error)) from None
    return connection


async def _call(
    connection: KafkaConnection, api_key: ApiKey, data: dict[str, Any], high: int
) -> Any:
    try:
        version = connection.version_for(api_key, 0, high)
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        return await connection.request(build(request_class, data), version)
    except ClientError as error:
        raise CommandError(str(error)) from None


async def _metadata(connection: KafkaConnection) -> Any:
    return await _call(
        connection, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False}, 12
    )


async def _controller(bootstrap: str) -> tuple[KafkaConnection, Any]:
    """A connection to the controller, and the cluster metadata."""
    connection = await _connect(bootstrap)
    metadata = await _metadata(connection)
    controller = int(metadata.controller_id)
    for broker in metadata.brokers:
        if int(broker.node_id) == controller:
            await connection.close()
            return await _connect(f"{broker.host}:{int(broker.port)}"), metadata
    await connection.close()
    raise CommandError("no controller is available")


def _assignment(metadata: Any) -> dict[tuple[str, int], list[int]]:
    return {
        (str(t.name), int(p.partition_index)): [int(r) for r in p.replica_nodes]
        for t in metadata.topics
        for p in t.partitions
    }


def _run(command: Callable[[], Awaitable[None]]) -> None:
    try:
        trio.run(command)
    except CommandError as error:
        print(f"Error: {error}", file=sys.stderr)
        raise typer.Exit(code=1) from None


def _error_name(code: Any) -> str:
    return str(getattr(code, "name", code)).upper()


# ---- JSON formats --------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CommandError(f"cannot read {path}: {error}") from None


def _plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "replicas": replicas,
                    "log_dirs": ["any"] * len(replicas),
                }
                for (topic, partition), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def parse_plan(raw: Any) -> dict[tuple[str, int], list[int]]:
    """Kafka's reassignment plan (version 1) -> (topic, partition) -> replicas."""
    if not isinstance(raw, dict) or not isinstance(raw.get("partitions"), list):
        raise CommandError("the reassignment JSON must have a 'partitions' list")
    plan: dict[tuple[str, int], list[int]] = {}
    for entry in raw["partitions"]:
        try:
            topic, partition = str(entry["topic"]), int(entry["partition"])
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise CommandError(f"bad partition entry {entry!r}") from None
        log_dirs = entry.get("log_dirs", ["any"] * len(replicas))
        if len(log_dirs) != len(replicas):
            raise CommandError(
                f"Length of replicas and log_dirs do not match for {topic}-{partition}"
            )
        if any(d != "any" for d in log_dirs):
            raise CommandError('log_dirs other than "any" are not supported')
        if len(set(replicas)) != len(replicas) or not replicas:
            raise CommandError(
                f"Partition replica lists may not contain duplicate entries: {topic}-{partition}"
            )
        if (topic, partition) in plan:
            raise CommandError(f"Duplicate partition {topic}-{partition} in the plan")
        plan[(topic, partition)] = replicas
    if not plan:
        raise CommandError("Partition reassignment list cannot be empty")
    return plan


def _names(partitions: list[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in partitions)


# ---- throttles (KIP-73) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """Kafka's PartitionMove: the replicas data flows from and the replicas it flows to."""

    sources: frozenset[int]
    destinations: frozenset[int]


MoveMap = dict[str, dict[int, PartitionMove]]


def proposed_move_map(
    ongoing: dict[tuple[str, int], tuple[list[int], list[int]]],
    proposed: dict[tuple[str, int], list[int]],
    current: dict[tuple[str, int], list[int]],
) -> MoveMap:
    """Kafka's calculateProposedMoveMap: ongoing reassignments ((replicas, adding) each:
    sources = replicas - adding, destinations = adding), then every proposed partition
    (sources = the ongoing sources or the current replicas, destinations = target -
    sources)."""
    moves: MoveMap = {}
    for (topic, partition), (replicas, adding) in ongoing.items():
        moves.setdefault(topic, {})[partition] = PartitionMove(
            frozenset(replicas) - frozenset(adding), frozenset(adding)
        )
    for (topic, partition), target in proposed.items():
        partition_moves = moves.setdefault(topic, {})
        if partition in partition_moves:
            sources = partition_moves[partition].sources
        elif (topic, partition) in current:
            sources = frozenset(current[(topic, partition)])
        else:
            raise CommandError(
                f"Trying to reassign a topic partition {topic}-{partition} with 0 replicas"
            )
        partition_moves[partition] = PartitionMove(sources, frozenset(target) - sources)
    return moves


def leader_throttles(moves: MoveMap) -> dict[str, str]:
    """topic -> `partition:source,...` (Kafka's calculateLeaderThrottles, TreeSet order)."""
    return {
        topic: ",".join(
            sorted({f"{p}:{b}" for p, move in partition_moves.items() for b in move.sources})
        )
        for topic, partition_moves in moves.items()
    }


def follower_throttles(moves: MoveMap) -> dict[str, str]:
    """topic -> `partition:destination,...` (Kafka's calculateFollowerThrottles)."""
    return {
        topic: ",".join(
            sorted(
                {
                    f"{p}:{b}"
                    for p, move in partition_moves.items()
                    for b in move.destinations
                    if b not in move.sources
                }
            )
        )
        for topic, partition_moves in moves.items()
    }


def reassigning_brokers(moves: MoveMap) -> list[int]:
    return sorted(
        {
            b
            for partition_moves in moves.values()
            for move in partition_moves.values()
            for b in move.sources | move.destinations
        }
    )


async def _alter_configs(
    connection: KafkaConnection,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
) -> None:
    """IncrementalAlterConfigs; CommandError naming the first failed resource."""
    if not resources:
        return
    response = await _call(
        connection,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": key, "config_operation": operation, "value": value}
                        for key, operation, value in configs
                    ],
                }
                for resource_type, name, configs in resources
            ],
            "validate_only": False,
        },
        1,
    )
    for result in response.responses:
        if int(result.error_code) != 0:
            kind = "topic" if int(result.resource_type) == TOPIC_RESOURCE else "broker"
            message = f": {result.error_message}" if result.error_message else ""
            raise CommandError(
                f"Cannot alter the configs of {kind} {result.resource_name}: "
                f"{_error_name(result.error_code)}{message}"
            )


def _broker_addresses(metadata: Any) -> dict[int, str]:
    return {int(b.node_id): f"{b.host}:{int(b.port)}" for b in metadata.brokers}


async def _alter_broker_configs(
    metadata: Any,
    brokers: Iterable[int],
    configs: list[tuple[str, int, str | None]],
    *,
    tolerate_unreachable: bool = False,
) -> None:
    """Each broker's BROKER resource goes to that broker (as Kafka's admin client sends
    it); brokers that are not live are skipped. With `tolerate_unreachable` (clearing), a
    broker that cannot be reached gets a warning on stderr instead of failing the command:
    a broker that just died must not turn a completed `verify` into an error."""
    addresses = _broker_addresses(metadata)
    for broker_id in brokers:
        address = addresses.get(broker_id)
        if address is None:
            continue
        try:
            connection = await _connect(address)
        except CommandError as error:
            if not tolerate_unreachable:
                raise
            print(f"Warning: cannot reach broker {broker_id}: {error}", file=sys.stderr)
            continue
        try:
            await _alter_configs(connection, [(BROKER_RESOURCE, str(broker_id), configs)])
        finally:
            await connection.close()


async def _set_throttles(
    connection: KafkaConnection,
    metadata: Any,
    moves: MoveMap,
    throttle_bytes_per_second: int,
) -> None:
    """Kafka's modifyReassignmentThrottle: topic lists first, then the broker rates."""
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    await _alter_configs(
        connection,
        [
            (
                TOPIC_RESOURCE,
                topic,
                [
                    (LEADER_THROTTLED_REPLICAS, OP_SET, leaders[topic]),
                    (FOLLOWER_THROTTLED_REPLICAS, OP_SET, followers[topic]),
                ],
            )
            for topic in sorted(moves)
        ],
    )
    rate = str(throttle_bytes_per_second)
    await _alter_broker_configs(
        metadata,
        reassigning_brokers(moves),
        [(LEADER_THROTTLED_RATE, OP_SET, rate), (FOLLOWER_THROTTLED_RATE, OP_SET, rate)],
    )
    print(f"The inter-broker throttle limit was set to {throttle_bytes_per_second} B/s")


async def _clear_all_throttles(
    connection: KafkaConnection,
    metadata: Any,
    plan: dict[tuple[str, int], list[int]],
    *,
    quiet_output: bool = False,
) -> None:
    """Kafka's clearAllThrottles: every live broker and every broker of the plan, every
    topic of the plan. `quiet_output` (--json): its two lines go to stderr."""
    out = sys.stderr if quiet_output else sys.stdout
    brokers = set(_broker_addresses(metadata)) | {b for r in plan.values() for b in r}
    print(
        f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
        + ",".join(str(b) for b in sorted(brokers)),
        file=out,
    )
    await _alter_broker_configs(
        metadata,
        sorted(brokers),
        [(key, OP_DELETE, None) for key in BROKER_LEVEL_THROTTLES],
        tolerate_unreachable=True,
    )
    topics = sorted({topic for topic, _ in plan})
    print(
        f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
        + ",".join(topics),
        file=out,
    )
    await _alter_configs(
        connection,
        [
            (TOPIC_RESOURCE, topic, [(key, OP_DELETE, None) for key in TOPIC_LEVEL_THROTTLES])
            for topic in topics
        ],
    )


# ---- reassign ----------------------------------------------------------------------------


@reassign_app.command("generate")
def generate(
    topics_file: Annotated[Path, typer.Option("--topics-to-move-json-file")],
    broker_list: Annotated[str, typer.Option("--broker-list", help="e.g. 4,5,6")],
    bootstrap_server: Bootstrap = "localhost:9092",
) -> None:
    """Propose a plan moving the listed topics onto the listed brokers."""
    from trafka.node.replica_assignment import (
        AssignmentError,
        assign_replicas_to_brokers,
        placements_of,
    )

    async def command() -> None:
        raw = _read_json(topics_file)
        try:
            topics = [str(t["topic"]) for t in raw["topics"]]
            brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
        except (KeyError, TypeError, ValueError):
            raise CommandError("bad --topics-to-move-json-file or --broker-list") from None
        connection = await _connect(bootstrap_server)
        try:
            metadata = await _metadata(connection)
        finally:
            await connection.close()
        racks = {int(b.node_id): b.rack for b in metadata.brokers}
        unknown = [b for b in brokers if b not in racks]
        if unknown:
            raise CommandError(f"Unknown broker id(s): {unknown}")
        current = {k: v for k, v in _assignment(metadata).items() if k[0] in topics}
        missing = [t for t in topics if not any(k[0] == t for k in current)]
        if missing:
            raise CommandError(f"Topic {missing[0]} not found")
        placements = placements_of({b: racks.get(b) for b in brokers})
        proposed: dict[tuple[str, int], list[int]] = {}
        for topic in topics:
            partitions = sorted(p for t, p in current if t == topic)
            factor = len(current[(topic, partitions[0])])
            try:
                assignment = assign_replicas_to_brokers(
                    placements, len(partitions), factor, rng=random.Random()
                )
            except AssignmentError as error:
                raise CommandError(str(error)) from None
            for partition in partitions:
                proposed[(topic, partition)] = [int(r) for r in assignment[partition]]
        print("Current partition replica assignment")
        print(_plan_json(current))
        print()
        print("Proposed partition reassignment configuration")
        print(_plan_json(proposed))

    _run(command)


@reassign_app.command("execute")
def execute(
    plan_file: PlanFile,
    bootstrap_server: Bootstrap = "localhost:9092",
    throttle: Annotated[
        int,
        typer.Option(
            "--throttle",
            help="The movement of partitions between brokers will be throttled to this "
            "value (bytes/sec); run verify until the reassignment completes to remove the "
            "throttle. Resubmitting the plan with another value changes it. "
            "(--replica-alter-log-dirs-throttle is not supported: there are no log-dir "
            "moves.)",
        ),
    ] = -1,
    wait: WaitFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Start the reassignment in the plan, optionally throttled (KIP-73). With --wait, wait
    for it to finish, print verify's status and remove the throttles (as verify does)."""

    async def command() -> None:
        plan = parse_plan(_read_json(plan_file))
        connection, metadata = await _controller(bootstrap_server)
        try:
            current = _assignment(metadata)
            missing = [k for k in plan if k not in current]
            if missing:
                raise CommandError(f"Topic-partition {missing[0][0]}-{missing[0][1]} not found")
            print("Current partition replica assignment")
            print()
            print(_plan_json({k: current[k] for k in plan}))
            print()
            print("Save this to use as the --reassignment-json-file option during rollback")
            if throttle >= 0:
                print(YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE)
                ongoing = {
                    key: (
                        [int(r) for r in p.replicas],
                        [int(r) for r in p.adding_replicas],
                    )
                    for key, p in (await _ongoing(connection)).items()
                }
                moves = proposed_move_map(ongoing, plan, current)
                await _set_throttles(connection, metadata, moves, throttle)
            response = await _alter(connection, {k: v for k, v in plan.items()})
        finally:
            await connection.close()
        _report(response, "started")
        if wait:
            await _verify(plan, bootstrap_server, wait=True, quiet=quiet)

    _run(command)


async def _alter(
    connection: KafkaConnection, targets: dict[tuple[str, int], list[int] | None]
) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    return await _call(
        connection,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        {
            "timeout": 60_000,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        },
        0,
    )


def _report(response: Any, verb: str) -> None:
    if int(response.error_code) != 0:
        raise CommandError(_error_name(response.error_code))
    done: list[tuple[str, int]] = []
    errors: list[str] = []
    for topic in response.responses:
        for p in topic.partitions:
            key = (str(topic.name), int(p.partition_index))
            if int(p.error_code) == 0:
                done.append(key)
            else:
                message = f": {p.error_message}" if p.error_message else ""
                errors.append(f"{key[0]}-{key[1]}: {_error_name(p.error_code)}{message}")
    if done:
        if verb == "started":
            print(f"Successfully started partition reassignment(s) for {_names(sorted(done))}")
        else:
            print(f"Successfully cancelled partition reassignment(s) for: {_names(sorted(done))}")
    if errors:
        raise CommandError("Error reassigning partition(s):\n" + "\n".join(errors))


async def _ongoing(connection: KafkaConnection) -> dict[tuple[str, int], Any]:
    response = await _call(
        connection, ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout": 60_000, "topics": None}, 0
    )
    return {(str(t.name), int(p.partition_index)): p for t in response.topics for p in t.partitions}


@reassign_app.command("verify")
def verify(
    plan_file: PlanFile,
    bootstrap_server: Bootstrap = "localhost:9092",
    preserve_throttles: PreserveThrottles = False,
    wait: WaitFlag = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Report, per partition of the plan, whether its reassignment completed; once no
    reassignment is in progress, remove the replication throttles. With --wait, first wait
    until the plan's partitions are no longer being reassigned."""

    async def command() -> None:
        plan = parse_plan(_read_json(plan_file))
        await _verify(
            plan,
            bootstrap_server,
            preserve_throttles=preserve_throttles,
            wait=wait,
            quiet=quiet,
            as_json=as_json,
        )

    _run(command)


WAIT_POLL_S = 0.5
"""How often `--wait` asks the cluster (ListPartitionReassignments + Metadata, and
DescribeLogDirs to the brokers involved when a progress line is shown)."""


async def _verify(
    plan: dict[tuple[str, int], list[int]],
    bootstrap: str,
    *,
    preserve_throttles: bool = False,
    wait: bool = False,
    quiet: bool = False,
    as_json: bool = False,
) -> None:
    connection = await _connect(bootstrap)
    try:
        if wait:
            await _wait_until_done(connection, plan, Progress(quiet=quiet))
        ongoing = await _ongoing(connection)
        metadata = await _metadata(connection)
        current = _assignment(metadata)
        clear = not ongoing and not preserve_throttles
        if not as_json:
            _print_status(plan, ongoing, current)
        if clear:
            # Like Kafka: all throttles, since the sources of earlier moves are unknown.
            await _clear_all_throttles(connection, metadata, plan, quiet_output=as_json)
        if as_json:
            emit_json(verify_document(plan, ongoing, current, throttles_removed=clear))
    finally:
        await connection.close()
    if any(key in ongoing or current.get(key) != target for key, target in plan.items()):
        raise typer.Exit(code=1)


def partition_status(
    key: tuple[str, int],
    target: list[int],
    ongoing: Mapping[tuple[str, int], Any],
    current: Mapping[tuple[str, int], list[int]],
) -> str:
    """`in_progress`, `completed` or `mismatch` (no active reassignment, other replicas)."""
    if key in ongoing:
        return "in_progress"
    return "completed" if current.get(key) == target else "mismatch"


def verify_document(
    plan: dict[tuple[str, int], list[int]],
    ongoing: Mapping[tuple[str, int], Any],
    current: Mapping[tuple[str, int], list[int]],
    *,
    throttles_removed: bool,
) -> dict[str, Any]:
    """`verify --json`: each partition of the plan with its status, target and current
    replicas; `complete` when every one is completed; `throttles_removed` when no
    reassignment was left in the cluster and the throttles were cleared."""
    partitions = [
        {
            "topic": topic,
            "partition": partition,
            "status": partition_status((topic, partition), target, ongoing, current),
            "target_replicas": target,
            "replicas": current.get((topic, partition)),
        }
        for (topic, partition), target in sorted(plan.items())
    ]
    return {
        "partitions": partitions,
        "complete": all(p["status"] == "completed" for p in partitions),
        "throttles_removed": throttles_removed,
    }


def _print_status(
    plan: dict[tuple[str, int], list[int]],
    ongoing: dict[tuple[str, int], Any],
    current: dict[tuple[str, int], list[int]],
) -> None:
    print("Status of partition reassignment:")
    for (topic, partition), target in sorted(plan.items()):
        name = f"{topic}-{partition}"
        status = partition_status((topic, partition), target, ongoing, current)
        if status == "in_progress":
            print(f"Reassignment of partition {name} is still in progress.")
        elif status == "completed":
            print(f"Reassignment of partition {name} is completed.")
        else:
            replicas = ",".join(str(r) for r in current.get((topic, partition), []))
            wanted = ",".join(str(r) for r in target)
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{replicas} rather than {wanted}."
            )


def copy_progress(
    adding: Mapping[tuple[str, int], Sequence[int]],
    leaders: Mapping[tuple[str, int], int],
    sizes: Mapping[int, Mapping[tuple[str, int], int]],
    finished: set[tuple[str, int]],
) -> tuple[int, int] | None:
    """(bytes copied, bytes to copy) over the new replicas of the partitions being moved.

    `adding`: each moving partition's new replicas, as first seen; `sizes`: per broker,
    DescribeLogDirs' partition sizes. A new replica's target is its leader's size, its
    progress its own size (capped); a finished partition counts as fully copied. None when
    the sizes are not known (no leader size reported)."""
    copied = total = 0
    for key, brokers in adding.items():
        leader_size = sizes.get(leaders.get(key, -1), {}).get(key)
        if leader_size is None:
            return None
        for broker in brokers:
            total += leader_size
            if key in finished:
                copied += leader_size
            else:
                copied += min(sizes.get(broker, {}).get(key, 0), leader_size)
    return copied, total


async def _partition_sizes(
    addresses: Mapping[int, str], brokers: set[int]
) -> dict[int, dict[tuple[str, int], int]]:
    """DescribeLogDirs on each broker: partition sizes (summed over its log dirs)."""
    sizes: dict[int, dict[tuple[str, int], int]] = {}
    for broker in sorted(brokers):
        if broker not in addresses:
            continue
        try:
            connection = await _connect(addresses[broker])
        except CommandError:
            continue  # a broker that is down: its sizes are unknown this round
        try:
            response = await _call(connection, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, 4)
        except CommandError:
            continue
        finally:
            await connection.close()
        found: dict[tuple[str, int], int] = {}
        for result in response.results:
            for topic in result.topics:
                for p in topic.partitions:
                    key = (str(topic.name), int(p.partition_index))
                    found[key] = found.get(key, 0) + int(p.partition_size)
        sizes[broker] = found
    return sizes


async def _wait_until_done(
    connection: KafkaConnection, plan: dict[tuple[str, int], list[int]], progress: Progress
) -> None:
    """Poll until none of the plan's partitions is being reassigned; the progress line
    counts partitions done and, when the brokers report sizes, bytes copied."""
    adding: dict[tuple[str, int], list[int]] = {}
    while True:
        ongoing = await _ongoing(connection)
        moving = [key for key in plan if key in ongoing]
        for key in moving:
            adding.setdefault(key, [int(r) for r in ongoing[key].adding_replicas])
        if progress.enabled:
            metadata = await _metadata(connection)
            leaders = {
                (str(t.name), int(p.partition_index)): int(p.leader_id)
                for t in metadata.topics
                for p in t.partitions
            }
            involved = {b for key in adding for b in (leaders.get(key, -1), *adding[key])}
            sizes = await _partition_sizes(_broker_addresses(metadata), involved)
            finished = {key for key in adding if key not in ongoing}
            copied = copy_progress(adding, leaders, sizes, finished)
            progress.update(
                reassignment_progress(
                    len(plan) - len(moving),
                    len(plan),
                    *(copied if copied is not None else (None, None)),
                )
            )
        if not moving:
            break
        await trio.sleep(WAIT_POLL_S)
    progress.finish()


@reassign_app.command("cancel")
def cancel(
    plan_file: PlanFile,
    bootstrap_server: Bootstrap = "localhost:9092",
    preserve_throttles: PreserveThrottles = False,
) -> None:
    """Cancel the reassignments of the plan's partitions (back to the original replicas)
    and remove the replication throttles."""

    async def command() -> None:
        plan = parse_plan(_read_json(plan_file))
        connection, metadata = await _controller(bootstrap_server)
        try:
            response = await _alter(connection, dict.fromkeys(plan))
            _report(response, "cancelled")
            if not preserve_throttles:
                await _clear_all_throttles(connection, metadata, plan)
        finally:
            await connection.close()

    _run(command)


@reassign_app.command("list")
def list_reassignments(
    bootstrap_server: Bootstrap = "localhost:9092", as_json: JsonFlag = False
) -> None:
    """List the partitions being reassigned."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            ongoing = await _ongoing(connection)
        finally:
            await connection.close()
        if as_json:
            emit_json(
                [
                    {
                        "topic": topic,
                        "partition": partition,
                        "replicas": [int(r) for r in p.replicas],
                        "adding_replicas": [int(r) for r in p.adding_replicas],
                        "removing_replicas": [int(r) for r in p.removing_replicas],
                    }
                    for (topic, partition), p in sorted(ongoing.items())
                ]
            )
            return
        if not ongoing:
            print("No partition reassignments found.")
            return
        print("Current partition reassignments:")
        for (topic, partition), p in sorted(ongoing.items()):

            def text(replicas: Any) -> str:
                return ",".join(str(int(r)) for r in replicas)

            print(
                f"{topic}-{partition}: replicas: {text(p.replicas)}. adding: "
                f"{text(p.adding_replicas)}. removing: {text(p.removing_replicas)}."
            )

    _run(command)


# ---- preferred-elect ---------------------------------------------------------------------


def preferred_elect(
    election_type: Annotated[
        str, typer.Option("--election-type", help="PREFERRED or UNCLEAN")
    ] = "PREFERRED",
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition")] = None,
    all_topic_partitions: Annotated[bool, typer.Option("--all-topic-partitions")] = False,
    path_to_json_file: Annotated[Path | None, typer.Option("--path-to-json-file")] = None,
    bootstrap_server: Bootstrap = "localhost:9092",
) -> None:
    """Elect preferred (or, with --election-type unclean, any live) leaders
    (kafka-leader-election.sh)."""
    kind = election_type.upper()

    async def command() -> None:
        if kind not in ("PREFERRED", "UNCLEAN"):
            raise CommandError(f"Unknown election type {election_type!r}")
        chosen = sum([topic is not None, all_topic_partitions, path_to_json_file is not None])
        if chosen != 1:
            raise CommandError(
                "Exactly one of --topic/--partition, --all-topic-partitions or "
                "--path-to-json-file must be given"
            )
        partitions: list[tuple[str, int]] | None = None
        if topic is not None:
            if partition is None:
                raise CommandError("--partition is required with --topic")
            partitions = [(topic, partition)]
        elif path_to_json_file is not None:
            raw = _read_json(path_to_json_file)
            try:
                partitions = [(str(p["topic"]), int(p["partition"])) for p in raw["partitions"]]
            except (KeyError, TypeError, ValueError):
                raise CommandError("bad --path-to-json-file") from None
        connection, _ = await _controller(bootstrap_server)
        try:
            topics: dict[str, list[int]] = {}
            for name, index in partitions or []:
                topics.setdefault(name, []).append(index)
            response = await _call(
                connection,
                ApiKey.ELECT_LEADERS,
                {
                    "election_type": 0 if kind == "PREFERRED" else 1,
                    "topic_partitions": None
                    if partitions is None
                    else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                    "timeout": 60_000,
                },
                2,
            )
        finally:
            await connection.close()
        if int(getattr(response, "error_code", 0)) != 0:
            raise CommandError(_error_name(response.error_code))
        succeeded: list[str] = []
        not_needed: list[str] = []
        failed: list[str] = []
        for result in response.replica_election_results:
            for p in result.partition_result:
                name = f"{result.topic}-{int(p.partition_id)}"
                code = _error_name(p.error_code)
                if int(p.error_code) == 0:
                    succeeded.append(name)
                elif code == "ELECTION_NOT_NEEDED":
                    not_needed.append(name)
                else:
                    message = f": {p.error_message}" if p.error_message else ""
                    failed.append(f"{name}: {code}{message}")
        if succeeded:
            print(
                f"Successfully completed leader election ({kind}) for partitions "
                + ", ".join(succeeded)
            )
        if not_needed:
            print("Valid replica already elected for partitions " + ", ".join(not_needed))
        if failed:
            for line in failed:
                print(f"Error completing leader election ({kind}) for partition: {line}")
            raise CommandError(f"{len(failed)} replica(s) could not be elected")

    _run(command)


def register(app: typer.Typer) -> None:
    """ktool's registration: `reassign` and `preferred-elect`."""
    app.add_typer(reassign_app, name="reassign")
    app.command("preferred-elect")(preferred_elect)
