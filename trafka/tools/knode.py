"""`knode`: run one trafka node.

    knode start --id 1                                   # embedded defaults
    knode start --id 2 --config server.properties        # Kafka's server.properties format
    knode start --id 1 --set listeners=PLAINTEXT://127.0.0.1:19092 --set log.dirs=/tmp/d1

    knode cluster up --nodes 3 --dir ./cluster           # a local multi-node cluster
    knode cluster up --nodes 6 --voters 3                # 3 voters + 3 broker-only nodes
    knode cluster up --nodes 3 --security sasl_ssl       # CA, certificates, SCRAM admin, ACLs

Embedded defaults: listener PLAINTEXT://localhost:9092, data in ./data/node-<id>, a
one-voter quorum (<id>@localhost:9093). `--set key=value` (repeatable) overrides the file.
SIGTERM/SIGINT shut the node down cleanly: a controlled shutdown first (the controller moves
this node's leaders away, at most 10 s), then logs flushed and checkpoints written. A bad key or
value, or a busy port, prints one line on stderr and exits with status 2 (no traceback).

`knode cluster up` writes `<dir>/node-<id>.properties` for each node (listener on
127.0.0.1:<port + id - 1>, a shared quorum secret kept in `<dir>/quorum.secret`, generated
at the first `up`). The secret file and the properties files (which hold the secret) are
mode 0600; an existing secret file that is group/world-readable, empty or shorter than 16
characters is refused with one line (exit status 2). Nodes
1..V (`--voters V`, default min(N, 3)) are `process.roles=broker,controller`: quorum voters
on 127.0.0.1:<quorum-port + id - 1>, any of which can become the controller; the others are
`process.roles=broker`: quorum learners (a full local replica of the metadata tree, no vote,
never the controller, no quorum port of their own). It starts one `knode start` process per
node (stderr in `<dir>/node-<id>.log`, pid in `<dir>/node-<id>.pid`), prints which nodes are
voters and the bootstrap servers once every node accepts connections, and stays in the
foreground: Ctrl-C / SIGTERM stops every node with SIGTERM. A node killed meanwhile can be
started again by hand with `knode start --id <id> --config <dir>/node-<id>.properties`
(docs/cluster.md). `--security sasl_ssl` adds a local CA and node certificates, SASL_SSL client
(SCRAM-SHA-512) and inter-broker listeners, Kafka's ACL authorizer and an admin super user,
and prints the client settings (`trafka.tools.local_security`, docs/security.md).
"""

from __future__ import annotations

# isort: off
from trafka.tools import lean_start  # noqa: F401 - first: before kio is imported
# isort: on

import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import trio
import typer

from trafka.log.storage_failure import halt_on_storage_failure
from trafka.metadata_quorum.config import QuorumConfigError, create_secret_file, read_secret_file
from trafka.node.broker import Broker, StartupError
from trafka.node.config.broker import BrokerConfig, ConfigError, load_properties_file
from trafka.node.loop_watchdog import LoopWatchdog
from trafka.tools import local_security

app = typer.Typer(
    name="knode",
    help="Run a trafka node (a Kafka-compatible broker with an embedded metadata quorum).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


CONTROLLED_SHUTDOWN_MAX_S = 10.0


@app.callback()
def _root() -> None:
    """Run a trafka node."""


def _fail(message: str) -> typer.Exit:
    print(f"knode: error: {message}", file=sys.stderr)
    return typer.Exit(code=2)


async def _run(broker: Broker) -> None:
    async with trio.open_nursery() as nursery:
        threshold_ms = broker.config.get_int("loop.watchdog.threshold.ms")
        if threshold_ms > 0:
            nursery.start_soon(LoopWatchdog(threshold_s=threshold_ms / 1000).run)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await nursery.start(broker.run)
            # What start-up built (modules, codecs, the tree, the logs' state) lives as long as
            # the process: out of the cyclic collector's scans, so a full collection walks
            # only what came later (~90,000 objects of imports alone cost ~30-100 ms each time).
            gc.freeze()
            print(
                f"knode: node {broker.node_id} ready on "
                + ",".join(listener.uri() for listener in broker.config.listeners),
                file=sys.stderr,
                flush=True,
            )
            async for signum in signals:
                logging.getLogger("trafka.knode").info(
                    "received %s, shutting down", signal.Signals(signum).name
                )
                # Controlled shutdown first (leaders move away), bounded; a second signal
                # is not waited for: the node stops after CONTROLLED_SHUTDOWN_MAX_S anyway.
                with trio.move_on_after(CONTROLLED_SHUTDOWN_MAX_S):
                    await broker.controlled_shutdown()
                nursery.cancel_scope.cancel()
                break


@app.command()
def start(
    node_id: Annotated[int | None, typer.Option("--id", help="node.id of this node")] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="server.properties file")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="key=value overriding the config file (repeatable)"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
) -> None:
    """Start a node and serve until SIGTERM/SIGINT."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        properties = load_properties_file(config_file) if config_file else {}
        config = BrokerConfig.build(node_id, properties, overrides or [])
        halt_on_storage_failure()  # Kafka: a failed last log dir halts the broker (exit 1)
        broker = Broker(config)
        trio.run(_run, broker)
    except (ConfigError, StartupError) as error:
        raise _fail(str(error)) from None
    except BaseExceptionGroup as group:
        found = group.subgroup((ConfigError, StartupError))
        if found is not None:
            first: BaseException = found
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise _fail(str(first)) from None
        raise


cluster_app = typer.Typer(
    name="cluster",
    help="A local multi-node cluster for development and demos.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(cluster_app, name="cluster")

CLUSTER_START_TIMEOUT_S = 120.0
CLUSTER_STOP_TIMEOUT_S = 30.0


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def default_voter_count(nodes: int) -> int:
    """Three voters tolerate one lost voter; more only slow every metadata commit."""
    return min(nodes, 3)


def _roles_summary(nodes: int, voter_count: int) -> str:
    """`voters 1,2,3; broker-only 4,5` (or just `voters 1,2,3`)."""
    text = "voters " + ",".join(str(n) for n in range(1, voter_count + 1))
    if nodes > voter_count:
        text += "; broker-only " + ",".join(str(n) for n in range(voter_count + 1, nodes + 1))
    return text


def cluster_properties(
    node_id: int,
    nodes: int,
    directory: Path,
    port: int,
    quorum_port: int,
    secret: str,
    voter_count: int | None = None,
    security_lines: list[str] | None = None,
) -> str:
    """The `server.properties` text of node `node_id` of a local cluster: nodes
    1..voter_count are voters (broker,controller), the rest broker-only learners.
    `security_lines` (`--security`) replace the PLAINTEXT listener."""
    voter_count = default_voter_count(nodes) if voter_count is None else voter_count
    voters = ",".join(f"{n}@127.0.0.1:{quorum_port + n - 1}" for n in range(1, voter_count + 1))
    roles = "broker,controller" if node_id <= voter_count else "broker"
    listeners = security_lines or [f"listeners=PLAINTEXT://127.0.0.1:{port + node_id - 1}"]
    return "\n".join(
        [
            f"# written by 'knode cluster up' for node {node_id}",
            f"node.id={node_id}",
            f"process.roles={roles}",
            *listeners,
            f"log.dirs={(directory / f'node-{node_id}').resolve()}",
            f"controller.quorum.voters={voters}",
            f"controller.quorum.secret={secret}",
            f"default.replication.factor={min(3, nodes)}",
            f"offsets.topic.replication.factor={min(3, nodes)}",
            "",
        ]
    )


def write_private_file(path: Path, text: str) -> None:
    """Replace `path` with `text`, mode 0600 from the start (it holds the quorum secret)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


@cluster_app.command("up")
def cluster_up(
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=9, help="number of nodes")] = 3,
    directory: Annotated[Path, typer.Option("--dir", help="data, logs and configs")] = Path(
        "./cluster"
    ),
    port: Annotated[int, typer.Option(help="listener port of node 1 (node n: port+n-1)")] = 9092,
    quorum_port: Annotated[
        int, typer.Option(help="quorum port of node 1 (node n: quorum-port+n-1)")
    ] = 19092,
    voters: Annotated[
        int | None,
        typer.Option(
            "--voters",
            min=1,
            help="quorum voters (nodes 1..V, broker+controller); the rest are broker-only "
            "[default: min(nodes, 3)]",
            show_default=False,
        ),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="key=value for every node (repeatable)"),
    ] = None,
    security: Annotated[
        str,
        typer.Option(
            "--security",
            help="plaintext, or sasl_ssl: a local CA and node certificates, SASL_SSL client "
            "(SCRAM-SHA-512) and inter-broker listeners, ACLs, an admin super user; the "
            "client settings are written to DIR/client.properties",
        ),
    ] = "plaintext",
    internal_port: Annotated[
        int | None,
        typer.Option(
            help="--security: inter-broker listener port of node 1 (node n: +n-1) "
            "[default: port+10]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start NODES local nodes (VOTERS of them quorum voters, the rest broker-only), print the
    bootstrap servers, stop on Ctrl-C."""
    voter_count = default_voter_count(nodes) if voters is None else voters
    if voter_count > nodes:
        raise _fail(f"--voters {voter_count} is more than --nodes {nodes}")
    security = security.strip().lower()
    if security not in ("plaintext", *local_security.PROTOCOLS):
        raise _fail(f"--security {security}: expected plaintext or sasl_ssl")
    internal = port + 10 if internal_port is None else internal_port
    directory.mkdir(parents=True, exist_ok=True)
    secured: local_security.LocalSecurity | None = None
    if security == "sasl_ssl":
        try:
            secured = local_security.prepare(directory, nodes)
        except local_security.LocalSecurityError as error:
            raise _fail(str(error)) from None
    secret_file = directory / "quorum.secret"
    try:
        if secret_file.exists():
            secret = read_secret_file(secret_file)
        else:
            secret, _created = create_secret_file(secret_file)
    except (QuorumConfigError, OSError) as error:
        raise _fail(str(error)) from None
    ports = [port + n for n in range(nodes)] + [quorum_port + n for n in range(voter_count)]
    if secured is not None:
        ports += [internal + n for n in range(nodes)]
    if len(set(ports)) < len(ports):
        raise _fail("the client, inter-broker and quorum ports overlap")
    busy = [p for p in ports if _accepts(p)]
    if busy:
        raise _fail(f"port {busy[0]} is in use (choose --port / --quorum-port)")
    processes: dict[int, subprocess.Popen[bytes]] = {}
    stop_now = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_now
        stop_now = True

    previous = {
        signum: signal.signal(signum, request_stop) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        for node_id in range(1, nodes + 1):
            config_file = directory / f"node-{node_id}.properties"
            write_private_file(
                config_file,
                cluster_properties(
                    node_id,
                    nodes,
                    directory,
                    port,
                    quorum_port,
                    secret,
                    voter_count,
                    None if secured is None else secured.node_settings(node_id, port, internal),
                ),
            )
            command = [sys.executable, "-m", "trafka.tools.knode", "start", "--id", str(node_id)]
            command += ["--config", str(config_file)]
            for item in overrides or []:
                command += ["--set", item]
            with open(directory / f"node-{node_id}.log", "ab") as log_file:
                processes[node_id] = subprocess.Popen(
                    command, stdout=subprocess.DEVNULL, stderr=log_file, stdin=subprocess.DEVNULL
                )
            (directory / f"node-{node_id}.pid").write_text(f"{processes[node_id].pid}\n")
        deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S
        waiting = set(processes)
        while waiting and not stop_now:
            for node_id in sorted(waiting):
                if processes[node_id].poll() is not None:
                    raise _fail(
                        f"node {node_id} exited with {processes[node_id].returncode}; "
                        f"see {directory / f'node-{node_id}.log'}"
                    )
                if _accepts(port + node_id - 1):
                    waiting.discard(node_id)
            if time.monotonic() > deadline:
                raise _fail(f"nodes {sorted(waiting)} did not start; see {directory}/node-*.log")
            time.sleep(0.1)
        if secured is not None and not stop_now:
            try:
                local_security.create_admin(
                    secured, "127.0.0.1", internal, timeout_s=CLUSTER_START_TIMEOUT_S
                )
            except local_security.LocalSecurityError as error:
                raise _fail(f"{error}; see {directory}/node-*.log") from None
        if not stop_now:
            bootstrap = ",".join(f"127.0.0.1:{port + n}" for n in range(nodes))
            print(
                f"knode cluster: {nodes} nodes up ({_roles_summary(nodes, voter_count)}), "
                f"data and logs in {directory}",
                flush=True,
            )
            print(f"bootstrap.servers={bootstrap}", flush=True)
            if secured is not None:
                client_file = directory / "client.properties"
                print(
                    f"knode cluster: SASL_SSL; client settings (the admin user) in {client_file}"
                    f" (librdkafka: {directory / 'client-librdkafka.properties'}):",
                    flush=True,
                )
                print(client_file.read_text(), end="", flush=True)
        reported: set[int] = set()
        while not stop_now:
            for node_id, process in processes.items():
                if process.poll() is not None and node_id not in reported:
                    reported.add(node_id)
                    print(
                        f"knode cluster: node {node_id} exited ({process.returncode}); restart "
                        f"it with: knode start --id {node_id} --config "
                        f"{directory / f'node-{node_id}.properties'}",
                        flush=True,
                    )
            time.sleep(0.2)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + CLUSTER_STOP_TIMEOUT_S
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node_id in processes:
            pid_file = directory / f"node-{node_id}.pid"
            if pid_file.exists():
                pid_file.unlink()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("knode cluster: stopped", flush=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
