"""Cluster metadata tables from a quorum snapshot (`ktool quorum export` JSON), no Spark here.

The snapshot is the replicated znode tree. Accepted shapes (the exporter's format is
defined in docs/metadata-quorum.md; these cover it and hand-written files):

* `{"nodes": [{"path": "/brokers/ids/1", "data": "<utf-8 text>"}, ...], "status": {...}}`
  (`data_base64`/`data_b64` instead of `data` for binary payloads; `data` may also be a
  JSON object, which is re-serialised; `znodes` or `tree` are accepted for `nodes`);
* `{"nodes": {"/brokers/ids/1": <data>, ...}}` or a flat `{"/path": <data>, ...}`;
* a nested tree `{"name": "", "data": ..., "children": [...]}` (or `children` as an object
  of name -> node).

Payloads are decoded with the quorum's typed codecs (`trafka.metadata_quorum.znodes`):
Kafka's ZooKeeper paths and JSON. A payload that does not decode becomes a row in
`metadata_errors` instead of stopping the export.

Tables (`TABLES` gives each one's Spark DDL): brokers, topics, topic_configs, partitions,
reassignments, pending_deletions, controller, quorum_status, metadata_errors.
`partitions.under_replicated` is `size(isr) < size(replicas)` (null, like `isr`, when the
partition has no state znode yet); `reassignments` merges the
`/admin/reassign_partitions` plan (ZK-era tools) with KIP-455's adding/removing replicas
of `/brokers/topics/<t>` (a planned partition whose topic znode has neither yet gets the
difference between its replicas and the target, as ListPartitionReassignments answers).
Consumer-group offsets are not znodes: they are read from the
`__consumer_offsets` log (`trafka.spark.offsets`).

The same document comes from a live node with `--bootstrap-server`
(`trafka.client.metadata.read_export_document`: TrafkaDescribeZNodes for the tree,
DescribeQuorum for the status, whose `source` is then "bootstrap-server" and
`bootstrap_server` the node that answered); `tables_from_document` serves both.

Not implemented: ACLs, quotas, delegation tokens.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trafka.metadata_quorum import znodes

MAX_SNAPSHOT_BYTES = 1 << 30

TABLES: dict[str, str] = {
    "brokers": (
        "broker_id int, host string, port int, rack string, endpoints array<string>, "
        "registered_timestamp_ms long, jmx_port int"
    ),
    "topics": (
        "topic string, topic_id string, partition_count int, replication_factor int, "
        "configs map<string, string>, pending_deletion boolean"
    ),
    "topic_configs": "topic string, key string, value string",
    "partitions": (
        "topic string, partition int, replicas array<int>, adding_replicas array<int>, "
        "removing_replicas array<int>, leader int, leader_epoch int, isr array<int>, "
        "controller_epoch int, preferred_leader int, under_replicated boolean, "
        "offline boolean"
    ),
    "reassignments": (
        "topic string, partition int, current_replicas array<int>, "
        "target_replicas array<int>, adding_replicas array<int>, "
        "removing_replicas array<int>, source string"
    ),
    "pending_deletions": "topic string",
    "controller": "controller_id int, controller_epoch int, registered_timestamp_ms long",
    "quorum_status": "key string, value string",
    "metadata_errors": "path string, error string",
}


class SnapshotFormatError(ValueError):
    """The snapshot is not JSON or not one of the accepted shapes."""


def _data_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict | list | int | float):
        return json.dumps(value).encode("utf-8")
    raise SnapshotFormatError(f"znode data of type {type(value).__name__}")


def _node_data(node: dict[str, Any]) -> bytes:
    for key in ("data_base64", "data_b64"):
        if isinstance(node.get(key), str):
            return base64.b64decode(node[key])
    return _data_bytes(node.get("data"))


def _walk_tree(node: dict[str, Any], parent: str) -> Iterator[tuple[str, bytes]]:
    name = str(node.get("name", ""))
    path = node.get("path") or (parent.rstrip("/") + "/" + name if name else parent or "/")
    yield str(path), _node_data(node)
    children = node.get("children") or []
    if isinstance(children, dict):
        children = [
            {"name": k, **(v if isinstance(v, dict) else {"data": v})} for k, v in children.items()
        ]
    for child in children:
        if isinstance(child, dict):
            yield from _walk_tree(child, str(path))


def znodes_from_snapshot(doc: Any) -> tuple[dict[str, bytes], dict[str, Any]]:
    """`({path: data}, status)` from a parsed snapshot document."""
    if not isinstance(doc, dict):
        raise SnapshotFormatError("a snapshot is a JSON object")
    status = doc.get("status") or doc.get("quorum") or {}
    if not isinstance(status, dict):
        status = {"status": status}
    nodes_value = next((doc[k] for k in ("nodes", "znodes", "tree") if k in doc), None)
    result: dict[str, bytes] = {}
    if nodes_value is None:
        if "children" in doc:
            nodes_value = doc
        else:
            nodes_value = {k: v for k, v in doc.items() if k.startswith("/")}
    if isinstance(nodes_value, list):
        for node in nodes_value:
            if not isinstance(node, dict) or not isinstance(node.get("path"), str):
                raise SnapshotFormatError("each node needs a 'path'")
            result[node["path"]] = _node_data(node)
    elif isinstance(nodes_value, dict) and "children" in nodes_value:
        result.update(_walk_tree(nodes_value, ""))
    elif isinstance(nodes_value, dict):
        for path, value in nodes_value.items():
            data = (
                _node_data(value)
                if isinstance(value, dict)
                and ("data" in value or "data_base64" in value or "data_b64" in value)
                else _data_bytes(value)
            )
            result[str(path)] = data
    else:
        raise SnapshotFormatError("no 'nodes' in the snapshot")
    return result, status


def read_snapshot_document(path: str) -> Any:
    """The parsed JSON of a snapshot file (at most MAX_SNAPSHOT_BYTES are read)."""
    with open(path, "rb") as handle:
        raw = handle.read(MAX_SNAPSHOT_BYTES + 1)
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise SnapshotFormatError(f"{path}: larger than {MAX_SNAPSHOT_BYTES} bytes")
    try:
        return json.loads(raw)
    except ValueError as error:
        raise SnapshotFormatError(f"{path}: not JSON: {error}") from None


def load_snapshot(path: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    return znodes_from_snapshot(read_snapshot_document(path))


def _children(tree: dict[str, bytes], parent: str) -> list[str]:
    prefix = parent.rstrip("/") + "/"
    names = {p[len(prefix) :].split("/", 1)[0] for p in tree if p.startswith(prefix)}
    return sorted(n for n in names if n)


@dataclass(slots=True)
class MetadataTables:
    """Rows (dicts) of every table in `TABLES`."""

    rows: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: [] for name in TABLES}
    )

    def error(self, path: str, error: Exception | str) -> None:
        self.rows["metadata_errors"].append({"path": path, "error": str(error)})


def tables_from_document(doc: Any) -> MetadataTables:
    """Every metadata table from a snapshot document: a parsed `--metadata` file, or the
    same document read live from a node (`trafka.client.metadata`)."""
    tree, status = znodes_from_snapshot(doc)
    return metadata_tables(tree, status)


def metadata_tables(tree: dict[str, bytes], status: dict[str, Any]) -> MetadataTables:
    """Every metadata table from the znode tree and the quorum status."""
    tables = MetadataTables()
    _brokers(tree, tables)
    pending = set(_children(tree, znodes.DELETE_TOPICS))
    tables.rows["pending_deletions"] = [{"topic": t} for t in sorted(pending)]
    plan = _reassignment_plan(tree, tables)
    for topic in _children(tree, znodes.BROKER_TOPICS):
        _topic(tree, topic, topic in pending, plan, tables)
    for (topic, partition), target in sorted(plan.items()):
        if not any(
            r["topic"] == topic and r["partition"] == partition
            for r in tables.rows["reassignments"]
        ):
            tables.rows["reassignments"].append(
                {
                    "topic": topic,
                    "partition": partition,
                    "current_replicas": None,
                    "target_replicas": list(target),
                    "adding_replicas": [],
                    "removing_replicas": [],
                    "source": "/admin/reassign_partitions",
                }
            )
    _controller(tree, tables)
    tables.rows["quorum_status"] = [
        {"key": str(k), "value": v if isinstance(v, str) else json.dumps(v)}
        for k, v in sorted(status.items())
    ]
    return tables


def _brokers(tree: dict[str, bytes], tables: MetadataTables) -> None:
    for name in _children(tree, znodes.BROKER_IDS):
        path = f"{znodes.BROKER_IDS}/{name}"
        if not name.isdigit():
            continue
        try:
            broker = znodes.BrokerRegistration.from_json(tree.get(path, b""), int(name))
        except ValueError as error:
            tables.error(path, error)
            continue
        plaintext = next(iter(broker.endpoints), None)
        tables.rows["brokers"].append(
            {
                "broker_id": broker.broker_id,
                "host": plaintext.host if plaintext else None,
                "port": plaintext.port if plaintext else None,
                "rack": broker.rack,
                "endpoints": [e.connection_string() for e in broker.endpoints],
                "registered_timestamp_ms": broker.timestamp_ms,
                "jmx_port": broker.jmx_port,
            }
        )


def _reassignment_plan(
    tree: dict[str, bytes], tables: MetadataTables
) -> dict[tuple[str, int], tuple[int, ...]]:
    data = tree.get(znodes.REASSIGN_PARTITIONS)
    if not data:
        return {}
    try:
        plan = znodes.ReassignPartitions.from_json(data)
    except ValueError as error:
        tables.error(znodes.REASSIGN_PARTITIONS, error)
        return {}
    return {(p.topic, p.partition): p.replicas for p in plan.partitions}


def _topic(
    tree: dict[str, bytes],
    topic: str,
    pending_deletion: bool,
    plan: dict[tuple[str, int], tuple[int, ...]],
    tables: MetadataTables,
) -> None:
    path = znodes.topic_path(topic)
    try:
        assignment = znodes.TopicAssignment.from_json(tree.get(path, b""))
    except ValueError as error:
        tables.error(path, error)
        return
    configs: dict[str, str] = {}
    config_path = znodes.topic_config_path(topic)
    if tree.get(config_path):
        try:
            configs = znodes.EntityConfig.from_json(tree[config_path]).config
        except ValueError as error:
            tables.error(config_path, error)
    replication = max((len(r) for r in assignment.partitions.values()), default=0)
    tables.rows["topics"].append(
        {
            "topic": topic,
            "topic_id": assignment.topic_id,
            "partition_count": len(assignment.partitions),
            "replication_factor": replication,
            "configs": configs,
            "pending_deletion": pending_deletion,
        }
    )
    tables.rows["topic_configs"].extend(
        {"topic": topic, "key": k, "value": v} for k, v in sorted(configs.items())
    )
    for partition, replicas in sorted(assignment.partitions.items()):
        _partition(tree, topic, partition, replicas, assignment, plan, tables)


def _partition(
    tree: dict[str, bytes],
    topic: str,
    partition: int,
    replicas: tuple[int, ...],
    assignment: znodes.TopicAssignment,
    plan: dict[tuple[str, int], tuple[int, ...]],
    tables: MetadataTables,
) -> None:
    state_path = znodes.partition_state_path(topic, partition)
    state: znodes.PartitionState | None = None
    if state_path in tree:
        try:
            state = znodes.PartitionState.from_json(tree[state_path])
        except ValueError as error:
            tables.error(state_path, error)
    adding = list(assignment.adding_replicas.get(partition, ()))
    removing = list(assignment.removing_replicas.get(partition, ()))
    isr = list(state.isr) if state else None
    leader = state.leader if state else -1
    tables.rows["partitions"].append(
        {
            "topic": topic,
            "partition": partition,
            "replicas": list(replicas),
            "adding_replicas": adding,
            "removing_replicas": removing,
            "leader": leader,
            "leader_epoch": state.leader_epoch if state else None,
            "isr": isr,
            "controller_epoch": state.controller_epoch if state else None,
            "preferred_leader": replicas[0] if replicas else None,
            "under_replicated": None if isr is None else len(isr) < len(replicas),
            "offline": leader < 0,
        }
    )
    target = plan.get((topic, partition))
    if adding or removing or target is not None:
        if target is None:
            target = tuple(r for r in replicas if r not in removing)
        elif not adding and not removing:
            # Planned, not started (no KIP-455 fields yet): the difference to the target,
            # as ListPartitionReassignments reports it.
            adding = [r for r in target if r not in replicas]
            removing = [r for r in replicas if r not in target]
        tables.rows["reassignments"].append(
            {
                "topic": topic,
                "partition": partition,
                "current_replicas": list(replicas),
                "target_replicas": list(target),
                "adding_replicas": adding,
                "removing_replicas": removing,
                "source": "/admin/reassign_partitions"
                if (topic, partition) in plan
                else "/brokers/topics (KIP-455)",
            }
        )


def _controller(tree: dict[str, bytes], tables: MetadataTables) -> None:
    controller_id: int | None = None
    timestamp: int | None = None
    epoch: int | None = None
    if tree.get(znodes.CONTROLLER):
        try:
            registration = znodes.ControllerRegistration.from_json(tree[znodes.CONTROLLER])
            controller_id = registration.broker_id
            timestamp = registration.timestamp_ms
        except ValueError as error:
            tables.error(znodes.CONTROLLER, error)
    if tree.get(znodes.CONTROLLER_EPOCH):
        try:
            epoch = znodes.ControllerEpoch.from_json(tree[znodes.CONTROLLER_EPOCH]).epoch
        except ValueError as error:
            tables.error(znodes.CONTROLLER_EPOCH, error)
    if controller_id is not None or epoch is not None:
        tables.rows["controller"].append(
            {
                "controller_id": controller_id,
                "controller_epoch": epoch,
                "registered_timestamp_ms": timestamp,
            }
        )
