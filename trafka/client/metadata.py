"""Read a live node's metadata through its Kafka listener: the znode tree and quorum status.

The client side of trafka's own TrafkaDescribeZNodes (API key 10000, v0; docs/protocol.md,
`trafka.net.messages.describe_znodes`) and of Kafka's DescribeQuorum (API 55, v0-v1) plus
Metadata (API 3, for the cluster id). Two callers share it:

* `ktool quorum ls|get|stat|tree|export --bootstrap-server` (trafka.tools.quorum_cmd);
* the Spark audit's `--bootstrap-server` (trafka.spark.commands), which needs the same
  document `ktool quorum export` writes, read live instead of from a file.

It lives in `trafka.client`, below `node/` in the layers, so `spark/` and `tools/` use it
without importing the node; it builds kio messages with `trafka.net.kio_shape.build`.

`read_znodes` pages through a tree (first page with a quorum barrier: a linearizable read);
`export_remote` turns a whole-tree read into the export document of
`trafka.metadata_quorum.export` (format version 1); `fetch_export_document` does the whole
live export against `HOST:PORT[,HOST:PORT...]`, asking each server in turn until one answers
(Kafka's bootstrap semantics). Every failure is a `MetadataReadError` with a one-line
message: refused or unreachable servers, timeouts, a Kafka broker that closes the
connection on the private request ("not a trafka node?"), error codes.

Not implemented: SASL/SSL (as the rest of trafka), retries on one server (the next server
is tried instead), one consistent snapshot for trees bigger than one page (10,000 nodes;
the pages' zxids are reported as `first_zxid`/`last_zxid`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio
from kio.schema.errors import ErrorCode as KafkaErrorCode

from trafka.client import command_config
from trafka.metadata_quorum.export import EXPORT_FORMAT, EXPORT_VERSION, node_document
from trafka.metadata_quorum.status import METADATA_TOPIC, QuorumStatus, ReplicaState
from trafka.metadata_quorum.tree import Stat
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, ConnectionBroken, KafkaConnection
from trafka.net.kio_shape import build
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_NAME,
    MAX_NODES_PER_RESPONSE,
    DescribeZNodesRequestV0,
)

DESCRIBE_QUORUM_API_KEY = ApiKey.DESCRIBE_QUORUM
METADATA_API_KEY = ApiKey.METADATA
DEFAULT_TIMEOUT_S = 15.0
#: Pages of one read; a tree this large (pages x 10,000 nodes) is refused, not read forever.
MAX_PAGES = 1000
#: Servers of one bootstrap list tried at most (each with its own timeout).
MAX_BOOTSTRAP_SERVERS = 100
BOOTSTRAP_SOURCE = "bootstrap-server"

T = TypeVar("T")


class MetadataReadError(Exception):
    """The metadata could not be read from the node (one-line message)."""


# ---------------------------------------------------------------------------------------
# Pure parts


def parse_bootstrap(bootstrap: str) -> tuple[tuple[str, int], ...]:
    """`host:port[,host:port...]` -> ((host, port), ...); `[::1]:9092` for IPv6."""
    servers: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise MetadataReadError(
                f"invalid --bootstrap-server {bootstrap!r}: expected host:port[,host:port...]"
            )
        servers.append((host, int(port)))
    if not servers:
        raise MetadataReadError("--bootstrap-server is empty: expected host:port[,...]")
    if len(servers) > MAX_BOOTSTRAP_SERVERS:
        raise MetadataReadError(f"more than {MAX_BOOTSTRAP_SERVERS} bootstrap servers")
    return tuple(servers)


def kafka_error_name(code: Any) -> str:
    try:
        return KafkaErrorCode(int(code)).name.upper()
    except ValueError:
        return f"ERROR_{int(code)}"


def status_from_describe_quorum(response: Any, cluster_id: str, now_ms: int) -> QuorumStatus:
    """A QuorumStatus from a DescribeQuorum v0-v2 response (pure)."""
    if int(response.error_code) != 0:
        raise MetadataReadError(f"DescribeQuorum failed: {kafka_error_name(response.error_code)}")
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
        raise MetadataReadError(f"DescribeQuorum answered without {METADATA_TOPIC}-0")
    if int(partition.error_code) != 0:
        raise MetadataReadError(f"DescribeQuorum failed: {kafka_error_name(partition.error_code)}")
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


def status_fields(status: QuorumStatus, source: str) -> dict[str, Any]:
    """The export document's `status` object (docs/metadata-quorum.md)."""
    return {
        "source": source,
        "cluster_id": status.cluster_id,
        "leader_id": status.leader_id,
        "leader_epoch": status.leader_epoch,
        "high_watermark": status.high_watermark,
        "voters": [v.node_id for v in status.voters],
        "observers": [o.node_id for o in status.observers],
    }


@dataclass(frozen=True, slots=True)
class ZNode:
    """One znode as TrafkaDescribeZNodes reports it (data/children empty unless asked)."""

    path: str
    data: bytes
    stat: Stat
    children: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RemoteRead:
    """The znodes of one (possibly paged) read and the zxids the pages were read at."""

    nodes: tuple[ZNode, ...]
    sessions: tuple[tuple[int, str, int], ...]
    first_zxid: int
    last_zxid: int


def _zookeeper_error(path: str, code: int) -> MetadataReadError:
    if code == -101:
        return MetadataReadError(f"Node does not exist: {path}")
    if code == -8:
        return MetadataReadError(f"Invalid path: {path}")
    return MetadataReadError(f"{path}: ZooKeeper error {code}")


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


# ---------------------------------------------------------------------------------------
# Requests on one connection


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
    committed before the command started. Raises MetadataReadError on any error.
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
            raise MetadataReadError(
                f"{error} (the node does not answer {DESCRIBE_ZNODES_API_NAME}, "
                "trafka's own request: not a trafka node?)"
            ) from None
        if int(response.error_code) != 0:
            raise MetadataReadError(
                f"{DESCRIBE_ZNODES_API_NAME} failed: {kafka_error_name(response.error_code)}"
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
    raise MetadataReadError(f"{path}: more than {MAX_PAGES} pages, refusing to read further")


async def describe_quorum_on(connection: KafkaConnection) -> QuorumStatus:
    """Metadata (cluster id) then DescribeQuorum for `__cluster_metadata`-0, as
    kafka-metadata-quorum.sh asks; negotiates ApiVersions first."""
    await connection.negotiate_api_versions()
    metadata_version = connection.version_for(METADATA_API_KEY, 2, 12)
    metadata_class = codec.request_class(METADATA_API_KEY, metadata_version)
    metadata = await connection.request(build(metadata_class, {"topics": []}), metadata_version)
    version = connection.version_for(DESCRIBE_QUORUM_API_KEY, 0, 1)
    request_class = codec.request_class(DESCRIBE_QUORUM_API_KEY, version)
    request = build(
        request_class,
        {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]},
    )
    response = await connection.request(request, version)
    cluster_id = str(getattr(metadata, "cluster_id", "") or "")
    return status_from_describe_quorum(response, cluster_id, int(time.time() * 1000))


# ---------------------------------------------------------------------------------------
# Whole reads against a bootstrap list


async def on_server(
    host: str,
    port: int,
    timeout_s: float,
    client_id: str,
    action: Callable[[KafkaConnection], Awaitable[T]],
) -> T:
    """Run `action(connection)` on a fresh connection to host:port within `timeout_s`;
    timeouts and connection failures become MetadataReadError."""
    where = f"{host}:{port}"
    try:
        with trio.fail_after(timeout_s):
            connection = await KafkaConnection.connect(
                host,
                port,
                client_id=client_id,
                connect_timeout_s=timeout_s,
                security=command_config.current(),
            )
            try:
                return await action(connection)
            finally:
                await connection.close()
    except trio.TooSlowError:
        raise MetadataReadError(f"{where} did not answer within {timeout_s} s") from None
    except ClientError as error:
        raise MetadataReadError(str(error)) from None


async def export_on(connection: KafkaConnection, *, server: str) -> dict[str, Any]:
    """The whole export document over one connection: DescribeQuorum (with the cluster id
    from Metadata), then the whole tree with data and sessions. `status` holds
    `status_fields(...)` (source "bootstrap-server"), `last_zxid` and `bootstrap_server`."""
    status = await describe_quorum_on(connection)
    read = await read_znodes(connection, "/", recursive=True, data=True, sessions=True)
    fields = {**status_fields(status, BOOTSTRAP_SOURCE), "bootstrap_server": server}
    return export_remote(read, exported_at_ms=int(time.time() * 1000), status=fields)


async def fetch_export_document(
    bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, client_id: str = "trafka-audit"
) -> dict[str, Any]:
    """`export_on` against each server of `bootstrap` in turn until one answers (each
    within `timeout_s`). Raises MetadataReadError naming every server's failure when none
    does."""
    failures: list[str] = []
    for host, port in parse_bootstrap(bootstrap):
        where = f"{host}:{port}"
        try:
            return await on_server(
                host, port, timeout_s, client_id, functools.partial(export_on, server=where)
            )
        except MetadataReadError as error:
            failures.append(str(error) if where in str(error) else f"{where}: {error}")
    raise MetadataReadError("no server answered: " + "; ".join(failures))


def read_export_document(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """`fetch_export_document` for synchronous callers (starts and ends its own trio run)."""
    document: dict[str, Any] = trio.run(fetch_export_document, bootstrap, timeout_s)
    return document
