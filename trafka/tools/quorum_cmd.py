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
from typing import Annotated, Any

import trio
import typer
from kio.schema.errors import ErrorCode as KafkaErrorCode

from trafka.metadata_quorum.bridge import MetadataQuorum
from trafka.metadata_quorum.config import QuorumConfig, QuorumConfigError, load_secret, parse_voters
from trafka.metadata_quorum.export import EXPORT_FORMAT, EXPORT_VERSION, export_tree, node_document
from trafka.metadata_quorum.status import METADATA_TOPIC, QuorumStatus, ReplicaState
from trafka.metadata_quorum.transport import load_data_dir
from trafka.metadata_quorum.tree import Stat, ZNodeTree, ZooKeeperError
from trafka.metadata_quorum.znodes import CLUSTER_ID, ClusterId, ZNodeFormatError
from trafka.net import codec
from trafka.net.client import ClientError, ConnectionBroken, KafkaConnection
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_NAME,
    MAX_NODES_PER_RESPONSE,
    DescribeZNodesRequestV0,
)
from trafka.node.handlers.kio_shape import build

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
DESCRIBE_QUORUM_API_KEY = 55
METADATA_API_KEY = 3


class QuorumCommandError(Exception):
    pass


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


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "\t".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row))
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_replication(status: QuorumStatus) -> str:
    """The table of `kafka-metadata-quorum.sh describe --replication`."""
    leader_end = status.leader_log_end_offset
    rows = [
        (
            str(replica.node_id),
            str(replica.log_end_offset),
            str(replica.lag(leader_end)),
            str(replica.last_fetch_timestamp_ms),
            str(replica.last_caught_up_timestamp_ms),
            replica.status,
        )
        for replica in sorted(
            (*status.voters, *status.observers),
            key=lambda r: (r.status != "Leader", r.status == "Observer", r.node_id),
        )
    ]
    header = (
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    )
    return _table(header, rows)


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


def status_from_describe_quorum(response: Any, cluster_id: str, now_ms: int) -> QuorumStatus:
    """A QuorumStatus from a DescribeQuorum v0-v2 response (pure)."""
    if int(response.error_code) != 0:
        raise QuorumCommandError(f"DescribeQuorum failed: {_kafka_error(response.error_code)}")
    partition = next(
        (
            p
            for t in response.topics
            if str(t.topic_name) == METADATA_TOPIC
            for p in t.partitions
            if int(p.partition_index) == 0
        ),
        None,
    )
    if partition is None:
        raise QuorumCommandError(f"DescribeQuorum answered without {METADATA_TOPIC}-0")
    if int(partition.error_code) != 0:
        raise QuorumCommandError(f"DescribeQuorum failed: {_kafka_error(partition.error_code)}")
    leader_id = int(partition.leader_id)

    def replica(state: Any, observer: bool) -> ReplicaState:
        node_id = int(state.replica_id)
        role = "Observer" if observer else ("Leader" if node_id == leader_id else "Follower")
        return ReplicaState(
            node_id,
            int(state.log_end_offset),
            int(getattr(state, "last_fetch_timestamp", -1)),
            int(getattr(state, "last_caught_up_timestamp", -1)),
            role,
        )

    return QuorumStatus(
        cluster_id=cluster_id,
        node_id=-1,
        leader_id=leader_id,
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        last_applied=int(partition.high_watermark),
        is_leader=False,
        has_quorum=leader_id >= 0,
        voters=tuple(replica(v, False) for v in partition.current_voters),
        observers=tuple(replica(o, True) for o in partition.observers),
        now_ms=now_ms,
    )


def _kafka_error(code: Any) -> str:
    try:
        return KafkaErrorCode(int(code)).name.upper()
    except ValueError:
        return f"ERROR_{int(code)}"


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise QuorumCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    return host, int(port)


async def _describe_quorum(bootstrap: str, timeout_s: float) -> QuorumStatus:
    host, port = _host_port(bootstrap)
    try:
        with trio.fail_after(timeout_s):
            connection = await KafkaConnection.connect(host, port, client_id="ktool-quorum")
            try:
                await connection.negotiate_api_versions()
                metadata_version = connection.version_for(METADATA_API_KEY, 2, 12)
                metadata_class = codec.request_class(METADATA_API_KEY, metadata_version)
                metadata = await connection.request(
                    build(metadata_class, {"topics": []}), metadata_version
                )
                version = connection.version_for(DESCRIBE_QUORUM_API_KEY, 0, 1)
                request_class = codec.request_class(DESCRIBE_QUORUM_API_KEY, version)
                request = build(
                    request_class,
                    {
                        "topics": [
                            {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}
                        ]
                    },
                )
                response = await connection.request(request, version)
            finally:
                await connection.close()
    except trio.TooSlowError:
        raise QuorumCommandError(f"{bootstrap} did not answer within {timeout_s} s") from None
    except ClientError as error:
        raise QuorumCommandError(str(error)) from None
    cluster_id = str(getattr(metadata, "cluster_id", "") or "")
    return status_from_describe_quorum(response, cluster_id, int(time.time() * 1000))


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

#: Pages of one read; a tree this large (pages x 10,000 nodes) is refused, not read forever.
MAX_PAGES = 1000


@dataclass(frozen=True)
class ZNode:
    """One znode as TrafkaDescribeZNodes reports it (data/children empty unless asked)."""

    path: str
    data: bytes
    stat: Stat
    children: tuple[str, ...]


@dataclass(frozen=True)
class RemoteRead:
    """The znodes of one (possibly paged) read and the zxids the pages were read at."""

    nodes: tuple[ZNode, ...]
    sessions: tuple[tuple[int, str, int], ...]
    first_zxid: int
    last_zxid: int


def _zookeeper_error(path: str, code: int) -> QuorumCommandError:
    if code == -101:
        return QuorumCommandError(f"Node does not exist: {path}")
    if code == -8:
        return QuorumCommandError(f"Invalid path: {path}")
    return QuorumCommandError(f"{path}: ZooKeeper error {code}")


def _znode(entry: Any) -> ZNode:
    if int(entry.error_code) != 0:
        raise _zookeeper_error(str(entry.path), int(entry.error_code))
    stat = Stat(
        czxid=int(entry.czxid),
        mzxid=int(entry.mzxid),
        pzxid=int(entry.pzxid),
        ctime_ms=int(entry.ctime_ms),
        mtime_ms=int(entry.mtime_ms),
        version=int(entry.version),
        cversion=int(entry.cversion),
        ephemeral_owner=int(entry.ephemeral_owner),
        data_length=int(entry.data_length),
        num_children=int(entry.num_children),
    )
    return ZNode(str(entry.path), bytes(entry.data or b""), stat, tuple(entry.children))


async def read_znodes(
    connection: KafkaConnection,
    path: str,
    *,
    data: bool = False,
    children: bool = False,
    recursive: bool = False,
    sessions: bool = False,
    page_nodes: int = MAX_NODES_PER_RESPONSE,
) -> RemoteRead:
    """Read `path` (with `recursive`, its whole subtree) page by page over `connection`.

    The first page asks for a quorum barrier (`sync`), so the read sees every write
    committed before the command started. Raises QuorumCommandError on any error.
    """
    nodes: list[ZNode] = []
    found_sessions: tuple[tuple[int, str, int], ...] = ()
    zxids: list[int] = []
    resume_after: str | None = None
    for page in range(MAX_PAGES):
        request = DescribeZNodesRequestV0(
            paths=(path,),
            include_data=data,
            include_stat=True,
            include_children=children,
            recursive=recursive,
            max_nodes=page_nodes,  # type: ignore[arg-type]
            resume_after=resume_after,
            include_sessions=sessions and page == 0,
            sync=page == 0,
        )
        try:
            response = await connection.request(request)
        except ConnectionBroken as error:
            raise QuorumCommandError(
                f"{error} (the node does not answer {DESCRIBE_ZNODES_API_NAME}, "
                "trafka's own request: not a trafka node?)"
            ) from None
        if int(response.error_code) != 0:
            raise QuorumCommandError(
                f"{DESCRIBE_ZNODES_API_NAME} failed: {_kafka_error(response.error_code)}"
                + (f" ({response.error_message})" if response.error_message else "")
            )
        nodes.extend(_znode(entry) for entry in response.entries)
        zxids.append(int(response.last_zxid))
        if page == 0:
            found_sessions = tuple(
                (int(s.session_id), str(s.owner), int(s.timeout_ms)) for s in response.sessions
            )
        if int(response.next_path_index) < 0:
            return RemoteRead(tuple(nodes), found_sessions, zxids[0], zxids[-1])
        resume_after = response.next_resume_after
    raise QuorumCommandError(f"{path}: more than {MAX_PAGES} pages, refusing to read further")


async def _remote(bootstrap: str, timeout_s: float, path: str, **flags: bool) -> RemoteRead:
    host, port = _host_port(bootstrap)
    try:
        with trio.fail_after(timeout_s):
            connection = await KafkaConnection.connect(host, port, client_id="ktool-quorum")
            try:
                return await read_znodes(connection, path, **flags)
            finally:
                await connection.close()
    except trio.TooSlowError:
        raise QuorumCommandError(f"{bootstrap} did not answer within {timeout_s} s") from None
    except ClientError as error:
        raise QuorumCommandError(str(error)) from None


def _one(bootstrap: str, timeout_s: float, path: str, **flags: bool) -> ZNode:
    return trio.run(lambda: _remote(bootstrap, timeout_s, path, **flags)).nodes[0]


def export_remote(
    read: RemoteRead, *, exported_at_ms: int, status: dict[str, Any]
) -> dict[str, Any]:
    """The export document (export.py's format, version 1) from a whole-tree remote read.

    Each session's `ephemerals` are the nodes it owns (`ephemeral_owner`), sorted, as the
    tree keeps them. `status.last_zxid` is the zxid of the last page (pages of a tree bigger
    than 10,000 nodes are read one after another; `first_zxid` tells how far apart).
    """
    nodes = []
    owned: dict[int, list[str]] = {}
    for node in read.nodes:
        if node.stat.ephemeral_owner:
            owned.setdefault(node.stat.ephemeral_owner, []).append(node.path)
        nodes.append(node_document(node.path, node.data, node.stat))
    sessions = [
        {
            "session_id": session_id,
            "owner": owner,
            "timeout_ms": timeout_ms,
            "ephemerals": sorted(owned.get(session_id, [])),
        }
        for session_id, owner, timeout_ms in sorted(read.sessions)
    ]
    last = {"last_zxid": read.last_zxid}
    if read.first_zxid != read.last_zxid:
        last["first_zxid"] = read.first_zxid
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at_ms": exported_at_ms,
        "status": {**last, **status},
        "nodes": nodes,
        "sessions": sessions,
    }


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
) -> None:
    """Leader, epoch, high watermark, lag, voters and observers."""
    _run(
        lambda: format_status(
            _status(bootstrap_server, data_dir, quorum_voters, secret, secret_file, timeout)
        )
    )


@quorum_app.command("replication")
def replication_command(
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
) -> None:
    """Per-replica log end offset, lag and fetch times."""
    _run(
        lambda: format_replication(
            _status(bootstrap_server, data_dir, quorum_voters, secret, secret_file, timeout)
        )
    )


@quorum_app.command("ls")
def ls_command(
    path: Annotated[str, typer.Argument(help="A znode path.")] = "/",
    bootstrap_server: BootstrapOption = None,
    data_dir: DataDirOption = None,
    quorum_voters: VotersOption = None,
    secret: SecretOption = None,
    secret_file: SecretFileOption = None,
    timeout: TimeoutOption = 15.0,
) -> None:
    """The children of a znode."""

    def action() -> str:
        if bootstrap_server:
            return format_ls(_one(bootstrap_server, timeout, path, children=True).children)
        tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
        return format_ls(tree.children(path))

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
) -> None:
    """The data of a znode (UTF-8, or base64: when binary)."""

    def action() -> str:
        if bootstrap_server:
            return format_data(_one(bootstrap_server, timeout, path, data=True).data)
        tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
        return format_data(tree.get(path)[0])

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
) -> None:
    """The Stat of a znode (zookeeper-shell's layout)."""

    def action() -> str:
        if bootstrap_server:
            return format_stat(_one(bootstrap_server, timeout, path).stat)
        tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
        return format_stat(tree.get(path)[1])

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
) -> None:
    """Every path under a znode, depth first."""

    def action() -> str:
        if bootstrap_server:
            read = trio.run(
                lambda: _remote(bootstrap_server, timeout, path, recursive=True, data=with_data)
            )
            return format_tree([(n.path, n.data) for n in read.nodes], with_data=with_data)
        tree = _snapshot(data_dir, quorum_voters, secret, secret_file, timeout).tree
        return format_tree([(p, d) for p, d, _ in tree.walk(path)], with_data=with_data)

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


def status_fields(status: QuorumStatus, source: str) -> dict[str, Any]:
    return {
        "source": source,
        "cluster_id": status.cluster_id,
        "leader_id": status.leader_id,
        "leader_epoch": status.leader_epoch,
        "high_watermark": status.high_watermark,
        "voters": [v.node_id for v in status.voters],
        "observers": [o.node_id for o in status.observers],
    }
