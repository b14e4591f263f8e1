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
`assignReplicasToBrokers` (`trafka.node.controller.assignment`). Failures print one line on
stderr and exit with status 1.

Not implemented: `--throttle`, `--replica-alter-log-dirs-throttle`, `--additional`,
`--preserve-throttles`, log dirs other than "any", `--disable-rack-aware` (racks are used
when every broker has one).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import trio
import typer

from trafka.net import codec
from trafka.net.client import ClientError, KafkaConnection
from trafka.node.handlers.kio_shape import build

reassign_app = typer.Typer(
    name="reassign",
    help="Move partitions between brokers (kafka-reassign-partitions.sh).",
    no_args_is_help=True,
    add_completion=False,
)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", help="host:port of any broker")]
PlanFile = Annotated[Path, typer.Option("--reassignment-json-file", help="plan JSON")]


class CommandError(Exception):
    pass


# ---- connections ---------------------------------------------------------------------------------


async def _connect(address: str) -> KafkaConnection:
    first = address.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise CommandError(f"invalid --bootstrap-server {address!r}: expected host:port")
    try:
        connection = await KafkaConnection.connect(host, int(port), client_id="ktool-reassign")
        await connection.negotiate_api_versions()
    except ClientError as error:
        raise CommandError(str(error)) from None
    return connection


async def _call(connection: KafkaConnection, api_key: int, data: dict[str, Any], high: int) -> Any:
    try:
        version = connection.version_for(api_key, 0, high)
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        return await connection.request(build(request_class, data), version)
    except ClientError as error:
        raise CommandError(str(error)) from None


async def _metadata(connection: KafkaConnection) -> Any:
    return await _call(connection, 3, {"topics": None, "allow_auto_topic_creation": False}, 12)


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


# ---- reassign ----------------------------------------------------------------------------


@reassign_app.command("generate")
def generate(
    topics_file: Annotated[Path, typer.Option("--topics-to-move-json-file")],
    broker_list: Annotated[str, typer.Option("--broker-list", help="e.g. 4,5,6")],
    bootstrap_server: Bootstrap = "localhost:9092",
) -> None:
    """Propose a plan moving the listed topics onto the listed brokers."""
    from trafka.node.controller.assignment import (
        AssignmentError,
        BrokerPlacement,
        assign_replicas_to_brokers,
    )
    from trafka.node.replication.ids import BrokerId

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
        placements = [BrokerPlacement(BrokerId(b), racks.get(b)) for b in brokers]
        if any(p.rack is None for p in placements):
            placements = [BrokerPlacement(p.broker_id) for p in placements]
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
def execute(plan_file: PlanFile, bootstrap_server: Bootstrap = "localhost:9092") -> None:
    """Start the reassignment in the plan."""

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
            response = await _alter(connection, {k: v for k, v in plan.items()})
        finally:
            await connection.close()
        _report(response, "started")

    _run(command)


async def _alter(
    connection: KafkaConnection, targets: dict[tuple[str, int], list[int] | None]
) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    return await _call(
        connection,
        45,
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
    response = await _call(connection, 46, {"timeout": 60_000, "topics": None}, 0)
    return {(str(t.name), int(p.partition_index)): p for t in response.topics for p in t.partitions}


@reassign_app.command("verify")
def verify(plan_file: PlanFile, bootstrap_server: Bootstrap = "localhost:9092") -> None:
    """Report, per partition of the plan, whether its reassignment completed."""

    async def command() -> None:
        plan = parse_plan(_read_json(plan_file))
        connection = await _connect(bootstrap_server)
        try:
            ongoing = await _ongoing(connection)
            current = _assignment(await _metadata(connection))
        finally:
            await connection.close()
        print("Status of partition reassignment:")
        unfinished = False
        for (topic, partition), target in sorted(plan.items()):
            name = f"{topic}-{partition}"
            if (topic, partition) in ongoing:
                unfinished = True
                print(f"Reassignment of partition {name} is still in progress.")
            elif current.get((topic, partition)) == target:
                print(f"Reassignment of partition {name} is completed.")
            else:
                unfinished = True
                replicas = ",".join(str(r) for r in current.get((topic, partition), []))
                wanted = ",".join(str(r) for r in target)
                print(
                    f"There is no active reassignment of partition {name}, but replica set is "
                    f"{replicas} rather than {wanted}."
                )
        if unfinished:
            raise typer.Exit(code=1)

    _run(command)


@reassign_app.command("cancel")
def cancel(plan_file: PlanFile, bootstrap_server: Bootstrap = "localhost:9092") -> None:
    """Cancel the reassignments of the plan's partitions (back to the original replicas)."""

    async def command() -> None:
        plan = parse_plan(_read_json(plan_file))
        connection, _ = await _controller(bootstrap_server)
        try:
            response = await _alter(connection, dict.fromkeys(plan))
        finally:
            await connection.close()
        _report(response, "cancelled")

    _run(command)


@reassign_app.command("list")
def list_reassignments(bootstrap_server: Bootstrap = "localhost:9092") -> None:
    """List the partitions being reassigned."""

    async def command() -> None:
        connection = await _connect(bootstrap_server)
        try:
            ongoing = await _ongoing(connection)
        finally:
            await connection.close()
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
                43,
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
