"""`ktool quorum`: kafka-metadata-quorum.sh and zookeeper-shell for the metadata quorum.

    ktool quorum status       (kafka-metadata-quorum.sh describe --status)
    ktool quorum replication  (kafka-metadata-quorum.sh describe --replication)
    ktool quorum ls PATH | get PATH | stat PATH | tree [PATH] [--data]
    ktool quorum export [--out FILE]     (the JSON snapshot of docs/metadata-quorum.md)

Where the tree comes from (one of):

* `--data-dir DIR`: a node's quorum data dir, read offline from its snapshot and journal.
  Read-only; entries up to the commit index stored on disk (up to ~1 s behind a live node).
* `--quorum-voters 1@h:p,... --secret-file F` (or `--secret S`): join the quorum as a
  read-only learner for the duration of the command (no session is opened, nothing is
  written to the log; the learner's journal lives in a temporary directory). Per-voter
  offsets are only known to the leader, so `replication` prints -1 for them this way.

* `--bootstrap-server host:port`: the node's normal Kafka listener. `status` and
  `replication` send Kafka's DescribeQuorum (API 55, v0-v1) for the `__cluster_metadata`
  partition 0, plus Metadata for the cluster id, exactly what kafka-metadata-quorum.sh asks
  (works against a Kafka KRaft cluster too). `ls`/`get`/`stat`/`tree`/`export` send
  trafka's own TrafkaDescribeZNodes (API key 10000, not a Kafka API, not advertised in
  ApiVersions; `trafka.net.messages.describe_znodes`), with a quorum barrier first (a
  linearizable read) and paging through big trees (`next_path_index`/`next_resume_after`);
  a Kafka broker closes the connection on it. `export` also sends DescribeQuorum for its
  status fields.

The requests on a node's listener live in `trafka.client.metadata` (shared with the
Spark audit's `--bootstrap-server`); this module re-exports `read_znodes`, `export_remote`,
`status_from_describe_quorum` and `status_fields` under their old names.

The formatting functions (`format_status`, `format_replication`, `format_stat`, `format_ls`,
`format_tree`) are pure and take plain values.
"""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import trio
import typer

from trafka.client.metadata import (
    DESCRIBE_QUORUM_API_KEY,
    MAX_PAGES,
    METADATA_API_KEY,
    MetadataReadError,
    RemoteRead,
    ZNode,
    describe_quorum_on,
    export_remote,
    on_server,
    read_znodes,
    status_fields,
    status_from_describe_quorum,
)
from trafka.metadata_quorum.bridge import MetadataQuorum
from trafka.metadata_quorum.config import QuorumConfig, QuorumConfigError, load_secret, parse_voters
from trafka.metadata_quorum.export import export_tree
from trafka.metadata_quorum.status import QuorumStatus, ReplicaState
from trafka.metadata_quorum.transport import load_data_dir
from trafka.metadata_quorum.tree import Stat, ZNodeTree, ZooKeeperError
from trafka.metadata_quorum.znodes import CLUSTER_ID, ClusterId, ZNodeFormatError
from trafka.net.client import KafkaConnection
from trafka.tools.output import JsonFlag, json_text, table_document

__all__ = [
    "DESCRIBE_QUORUM_API_KEY",
    "MAX_PAGES",
    "METADATA_API_KEY",
    "QuorumCommandError",
    "RemoteRead",
    "ZNode",
    "export_remote",
    "quorum_app",
    "read_znodes",
    "status_fields",
    "status_from_describe_quorum",
]

quorum_app = typer.Typer(
    help="Describe the metadata quorum and browse its znode tree.", no_args_is_help=True
)

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="A node's quorum data dir (read offline).")
]
VotersOption = Annotated[
    str | None,
    typer.Option("--quorum-voters", help="1@host:port,...: join as a read-only learner."),
]
SecretFileOption = Annotated[
    Path | None, typer.Option("--secret-file", help="File with the cluster secret.")
]
SecretOption = Annotated[str | None, typer.Option("--secret", help="The cluster secret.")]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        help="host:port of a node's Kafka listener (DescribeQuorum; TrafkaDescribeZNodes).",
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for the learner to catch up.")
]

LEARNER_NODE_ID = -1


QuorumCommandError = MetadataReadError
"""Every failure of a command (the remote reader's error type, under the command's name)."""


# ---------------------------------------------------------------------------------------
# Pure formatting


def format_status(status: QuorumStatus) -> str:
    """The lines of `kafka-metadata-quorum.sh describe --status`."""
    voters = ",".join(str(v.node_id) for v in status.voters)
    observers = ",".join(str(o.node_id) for o in status.observers)
    rows = [
        ("ClusterId", status.cluster_id or "None"),
        ("LeaderId", str(status.leader_id)),
        ("LeaderEpoch", str(status.leader_epoch)),
        ("HighWatermark", str(status.high_watermark)),
        ("MaxFollowerLag", str(status.max_follower_lag)),
        ("MaxFollowerLagTimeMs", str(status.max_follower_lag_time_ms)),
        ("CurrentVoters", f"[{voters}]"),
        ("CurrentObservers", f"[{observers}]"),
    ]
    return "\n".join(f"{name + ':':<24}{value}" for name, value in rows) + "\n"


def status_document(status: QuorumStatus) -> dict[str, object]:
    """`status --json`: the fields of `describe --status` in snake_case, the voters and
    observers as lists of node ids (kafka-metadata-quorum.sh has no JSON output)."""
    return {
        "cluster_id": status.cluster_id or None,
        "leader_id": status.leader_id,
        "leader_epoch": status.leader_epoch,
        "high_watermark": status.high_watermark,
        "max_follower_lag": status.max_follower_lag,
        "max_follower_lag_time_ms": status.max_follower_lag_time_ms,
        "current_voters": [v.node_id for v in status.voters],
        "current_observers": [o.node_id for o in status.observers],
    }


def _replication_rows(status: QuorumStatus) -> list[tuple[int, int, int, int, int, str]]:
    leader_end = status.leader_log_end_offset
    return [
        (
            replica.node_id,
            replica.log_end_offset,
            replica.lag(leader_end),
            replica.last_fetch_timestamp_ms,
            replica.last_caught_up_timestamp_ms,
            replica.status,
        )
        for replica in sorted(
            (*status.voters, *status.observers),
            key=lambda r: (r.status != "Leader", r.status == "Observer", r.node_id),
        )
    ]


REPLICATION_HEADER = (
    "NodeId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)


def replication_document(status: QuorumStatus) -> list[dict[str, object]]:
    """`replication --json`: one object per row of `describe --replication`."""
    return table_document(REPLICATION_HEADER, _replication_rows(status))


def stat_document(path: str, stat: Stat) -> dict[str, object]:
    """`stat --json`: the Stat's fields (zookeeper-shell's names in snake_case, numbers)."""
    return {
        "path": path,
        "czxid": stat.czxid,
        "ctime_ms": stat.ctime_ms,
        "mzxid": stat.mzxid,
        "mtime_ms": stat.mtime_ms,
        "pzxid": stat.pzxid,
        "cversion": stat.cversion,
        "data_version": stat.version,
        "ephemeral_owner": stat.ephemeral_owner,
        "data_length": stat.data_length,
        "num_children": stat.num_children,
    }


def data_document(path: str, data: bytes) -> dict[str, object]:
    """`get --json` (and each node of `tree --data --json`): `data` as UTF-8 text, or null
    with `data_base64` when the bytes are not UTF-8."""
    try:
        return {"path": path, "data": data.decode("utf-8"), "data_base64": None}
    except UnicodeDecodeError:
        return {"path": path, "data": None, "data_base64": base64.b64encode(data).decode("ascii")}


def tree_document(nodes: Sequence[tuple[str, bytes]], *, with_data: bool) -> list[object]:
    """`tree --json`: the paths, or with `--data` one `data_document` per node."""
    if with_data:
        return [data_document(path, data) for path, data in nodes]
    return [path for path, _ in nodes]


def _json_lines(document: object) -> str:
    return json_text(document) + "\n"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "\t".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row))
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_replication(status: QuorumStatus) -> str:
    """The table of `kafka-metadata-quorum.sh describe --replication`."""
    rows = [tuple(str(cell) for cell in row) for row in _replication_rows(status)]
    return _table(REPLICATION_HEADER, rows)


def _java_date(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%a %b %d %H:%M:%S UTC %Y")


def format_stat(stat: Stat) -> str:
    """zookeeper-shell's `stat` output."""
    rows = [
        ("cZxid", hex(stat.czxid)),
        ("ctime", _java_date(stat.ctime_ms)),
        ("mZxid", hex(stat.mzxid)),
        ("mtime", _java_date(stat.mtime_ms)),
        ("pZxid", hex(stat.pzxid)),
        ("cversion", str(stat.cversion)),
        ("dataVersion", str(stat.version)),
        ("aclVersion", "0"),
        ("ephemeralOwner", hex(stat.ephemeral_owner)),
        ("dataLength", str(stat.data_length)),
        ("numChildren", str(stat.num_children)),
    ]
    return "".join(f"{name} = {value}\n" for name, value in rows)


def format_ls(children: Sequence[str]) -> str:
    """zookeeper-shell's `ls`: `[a, b, c]`."""
    return "[" + ", ".join(children) + "]\n"


def format_data(data: bytes) -> str:
    try:
        return data.decode("utf-8") + "\n"
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii") + "\n"


def format_tree(nodes: Sequence[tuple[str, bytes]], *, with_data: bool = False) -> str:
    """One full path per line (depth first), optionally ` = <data>`."""
    lines = []
    for path, data in nodes:
        lines.append(f"{path} = {format_data(data).rstrip()}" if with_data and data else path)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class Snapshot:
    """What a command needs: a tree (owned by the caller) and the quorum's status."""

    tree: ZNodeTree
    status: QuorumStatus
    source: str


def _cluster_id(tree: ZNodeTree) -> str:
    try:
        return ClusterId.from_json(tree.get(CLUSTER_ID)[0]).cluster_id
    except (ZooKeeperError, ZNodeFormatError):
        return ""


def _from_data_dir(data_dir: Path) -> Snapshot:
    if not data_dir.is_dir():
        raise QuorumCommandError(f"{data_dir} is not a directory")
    state = load_data_dir(data_dir)
    voters: tuple[ReplicaState, ...] = ()
    if state.voters:
        try:
            voters = tuple(
                ReplicaState(v.node_id, -1, -1, -1, "Unknown") for v in parse_voters(state.voters)
            )
        except QuorumConfigError:
            voters = ()
    status = QuorumStatus(
        cluster_id=_cluster_id(state.tree),
        node_id=-1,
        leader_id=-1,
        leader_epoch=state.term,
        high_watermark=state.commit_index,
        last_applied=state.commit_index,
        is_leader=False,
        has_quorum=False,
        voters=voters,
        observers=(),
        now_ms=int(time.time() * 1000),
    )
    return Snapshot(state.tree, status, "data-dir")


async def _learner_snapshot(voters: str, secret: str, timeout_s: float, scratch: Path) -> Snapshot:
    config = QuorumConfig(
        node_id=LEARNER_NODE_ID,
        voters=parse_voters(voters),
        data_dir=scratch,
        secret=secret,
        open_session=False,
        fsync_interval_ms=60_000,
    )
    quorum = MetadataQuorum(config)
    try:
        async with trio.open_nursery() as nursery:
            await quorum.start(nursery)
            with trio.move_on_after(timeout_s) as scope:
                await quorum.wait_ready()
            if scope.cancelled_caught:
                raise QuorumCommandError(f"the quorum did not answer within {timeout_s} s")
            # A private copy of the tree, so the command reads it after the learner stopped.
            tree = quorum.read_local(lambda t: pickle.loads(pickle.dumps(t)))
            status = quorum.status()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await quorum.aclose()
    return Snapshot(tree, status, "learner")


def _snapshot(
    data_dir: Path | None,
    voters: str | None,
    secret: str | None,
    secret_file: Path | None,
    timeout_s: float,
) -> Snapshot:
    if data_dir is not None:
        return _from_data_dir(data_dir)
    if voters:
        with tempfile.TemporaryDirectory(prefix="ktool-quorum-") as scratch:
            if not (secret or secret_file):
                raise QuorumCommandError(
                    "--secret or --secret-file is required with --quorum-voters"
                )
            key = load_secret(
                Path(scratch),
                parse_voters(voters),
                secret,
                str(secret_file) if secret_file else None,
            )
            return trio.run(_learner_snapshot, voters, key, timeout_s, Path(scratch))
    raise QuorumCommandError("give --bootstrap-server, --data-dir or --quorum-voters")


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise QuorumCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    return host, int(port)


async def _describe_quorum(bootstrap: str, timeout_s: float) -> QuorumStatus:
    host, port = _host_port(bootstrap)
    return await on_server(host, port, timeout_s, "ktool-quorum", describe_quorum_on)


def _status(
    bootstrap: str | None,
    data_dir: Path | None,
    voters: str | None,
    secret: str | None,
    secret_file: Path | None,
    timeout_s: float,
) -> QuorumStatus:
    if bootstrap:
        return trio.run(_describe_quorum, bootstrap, timeout_s)
    return _snapshot(data_dir, voters, secret, secret_file, timeout_s).status


# ---------------------------------------------------------------------------------------
# Tree reads through a node's listener (TrafkaDescribeZNodes, API key 10000)


async def _remote(bootstrap: str, timeout_s: float, path: str, **flags: bool) -> RemoteRead:
    host, port = _host_port(bootstrap)

    async def action(connection: KafkaConnection) -> RemoteRead:
        return await read_znodes(connection, path, **flags)

    return await on_server(host, port, timeout_s, "ktool-quorum", action)


def _one(bootstrap: str, timeout_s: float, path: str, **flags: bool) -> ZNode:
    return trio.run(lambda: _remote(bootstrap, timeout_s, path, **flags)).nodes[0]


def _run(action: Callable[[], str]) -> None:
    try:
        sys.stdout.write(action())
    except (QuorumCommandError, QuorumConfigError, ZooKeeperError, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        raise typer.Exit(code=1) from None


# ---------------------------------------------------------------------------------------
# Commands


@quorum_app.command("status")
def status_command(
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """Leader, epoch, high watermark, lag, voters and observers."""

    def action() -> str:
        status = _status(bootstrap_server, data_dir, quorum_voters, secret, secret_file, timeout)
        return _json_lines(status_document(status)) if as_json else format_status(status)

    _run(action)


@quorum_app.command("replication")
def replication_command(
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """Per-replica log end offset, lag and fetch times."""

    def action() -> str:
        status = _status(bootstrap_server, data_dir, quorum_voters, secret, secret_file, timeout)
        if as_json:
            return _json_lines(replication_document(status))
        return format_replication(status)

    _run(action)


@quorum_app.command("ls")
def ls_command(
    path: Annotated[str, typer.Argument(help="A znode path.")] = "/",
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """The children of a znode."""

    def action() -> str:
        if bootstrap_server:
            children = list(_one(bootstrap_server, timeout, path, children=True).children)
        else:
            tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
            children = list(tree.children(path))
        return _json_lines(children) if as_json else format_ls(children)

    _run(action)


@quorum_app.command("get")
def get_command(
    path: Annotated[str, typer.Argument(help="A znode path.")],
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """The data of a znode (UTF-8, or base64: when binary)."""

    def action() -> str:
        if bootstrap_server:
            data = _one(bootstrap_server, timeout, path, data=True).data
        else:
            tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
            data = tree.get(path)[0]
        return _json_lines(data_document(path, data)) if as_json else format_data(data)

    _run(action)


@quorum_app.command("stat")
def stat_command(
    path: Annotated[str, typer.Argument(help="A znode path.")],
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """The Stat of a znode (zookeeper-shell's layout)."""

    def action() -> str:
        if bootstrap_server:
            stat = _one(bootstrap_server, timeout, path).stat
        else:
            tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
            stat = tree.get(path)[1]
        return _json_lines(stat_document(path, stat)) if as_json else format_stat(stat)

    _run(action)


@quorum_app.command("tree")
def tree_command(
    path: Annotated[str, typer.Argument(help="Root of the listing.")] = "/",
    with_data: Annotated[bool, typer.Option("--data", help="Show each node's data.")] = False,
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
    as_json: JsonFlag = False,
) -> None:
    """Every path under a znode, depth first."""

    def action() -> str:
        if bootstrap_server:
            read = trio.run(
                lambda: _remote(bootstrap_server, timeout, path, recursive=True, data=with_data)
            )
            nodes = [(n.path, n.data) for n in read.nodes]
        else:
            tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
            nodes = [(p, d) for p, d, _ in tree.walk(path)]
        if as_json:
            return _json_lines(tree_document(nodes, with_data=with_data))
        return format_tree(nodes, with_data=with_data)

    _run(action)


@quorum_app.command("export")
def export_command(
    out: Annotated[str, typer.Option("--out", help="Output file ('-' = stdout).")] = "-",
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
) -> None:
    """Write the whole tree as JSON (format: docs/metadata-quorum.md)."""

    def action() -> str:
        if bootstrap_server:
            status = trio.run(_describe_quorum, bootstrap_server, timeout)
            read = trio.run(
                lambda: _remote(
                    bootstrap_server, timeout, "/", recursive=True, data=True, sessions=True
                )
            )
            document = export_remote(
                read,
                exported_at_ms=int(time.time() * 1000),
                status=status_fields(status, "bootstrap-server"),
            )
        else:
            snapshot = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout)
            document = export_tree(
                snapshot.tree,
                exported_at_ms=int(time.time() * 1000),
                status=status_fields(snapshot.status, snapshot.source),
            )
        text = json.dumps(document, separators=(",", ":")) + "\n"
        if out == "-":
            return text
        Path(out).write_text(text)
        return f"exported {len(document['nodes'])} znodes to {out}\n"

    _run(action)
