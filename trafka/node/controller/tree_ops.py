"""Turn a `ControllerStep`'s writes into one multi for the quorum's `ZNodeTree`.

The controller speaks in typed ops (`effects.CreateNode` with a `znodes` payload,
`DeleteNode(recursive=True, if_exists=True)`, ...); ZooKeeper's multi has only create,
delete, set and check of single nodes with bytes. This pure function bridges the two, given a
read view of the tree as it is just before the multi (the shell passes the replica's tree):

- payloads are encoded with their `to_json()` (None -> empty data);
- `CreateNode` first creates missing parents, with empty data, as Kafka's
  `createRecursive` does;
- `DeleteNode(recursive=True)` deletes the descendants first, deepest first;
- `DeleteNode(if_exists=True)` on an absent node is dropped.

Existence is tracked through the ops already translated, so an op may rely on an earlier op
of the same multi. Raises `MultiTooLarge` beyond the tree's `MAX_MULTI_OPS` (the shell then
reports a failed step, STYLE 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from trafka.metadata_quorum import tree, znodes
from trafka.node.controller.effects import (
    CheckVersion,
    CreateNode,
    DeleteNode,
    SetNode,
    ZnodeData,
    ZnodeOp,
)
from trafka.node.controller.payloads import CONTROLLER_EPOCH_PATH
from trafka.node.replication.leader import IsrWrite


class TreeView(Protocol):
    """The reads the translation needs (`ZNodeTree` provides both)."""

    def exists(self, path: str) -> object | None: ...

    def children(self, path: str) -> list[str]: ...


class MultiTooLarge(ValueError):
    pass


def encode(data: ZnodeData) -> bytes:
    """A payload's bytes: Kafka's JSON (or the decimal epoch), empty for None."""
    return b"" if data is None else data.to_json()


def to_multi_ops(ops: Sequence[ZnodeOp], view: TreeView) -> tuple[tree.MultiOp, ...]:
    """The multi ops for `ops`, as seen from `view`."""
    translated = _translate(ops, view)
    if len(translated) > tree.MAX_MULTI_OPS:
        raise MultiTooLarge(f"{len(translated)} ops > {tree.MAX_MULTI_OPS}")
    return tuple(translated)


def to_multis(
    ops: Sequence[ZnodeOp], view: TreeView, max_ops: int | None = None
) -> list[tuple[tree.MultiOp, ...]]:
    """`ops` as one multi, or, beyond `max_ops` (default `MAX_MULTI_OPS`), as several that
    the shell runs in order, stopping at the first failure.

    Every chunk starts with the controller's fence (the first op: the check of
    `/controller_epoch`, or, at failover, its conditional set; later chunks then check the
    version that set produced), so a deposed controller cannot land any chunk. A failure
    after some chunks is handled like any failed step (`WritesFailed`): the controller
    reloads from the tree, and its writes are ordered so every prefix is a state it can
    resume from (e.g. AR is written last in a reassignment, `/admin/delete_topics/<t>`
    last in a deletion).
    """
    limit = tree.MAX_MULTI_OPS if max_ops is None else max_ops
    translated = _translate(ops, view)
    if len(translated) <= limit:
        return [tuple(translated)]
    if limit < 2:
        raise MultiTooLarge("max_ops must leave room for the fence")
    fence = translated[0]
    if isinstance(fence, tree.Check):
        refence: tree.MultiOp = fence
    elif isinstance(fence, tree.SetData):
        refence = tree.Check(fence.path, fence.version + 1)
    elif isinstance(fence, tree.Create) and fence.path == CONTROLLER_EPOCH_PATH:
        refence = tree.Check(fence.path, 0)
    else:
        raise MultiTooLarge("a large step must start with the controller's fence")
    chunks = [tuple(translated[:limit])]
    rest = translated[limit:]
    step = limit - 1
    for start in range(0, len(rest), step):
        chunks.append((refence, *rest[start : start + step]))
    return chunks


def _translate(ops: Sequence[ZnodeOp], view: TreeView) -> list[tree.MultiOp]:
    translation = _Translation(view)
    for op in ops:
        translation.add(op)
    return translation.ops


class _Translation:
    def __init__(self, view: TreeView) -> None:
        self.view = view
        self.ops: list[tree.MultiOp] = []
        self.created: set[str] = set()
        self.deleted: set[str] = set()

    def exists(self, path: str) -> bool:
        if path in self.deleted:
            return False
        return path in self.created or path == "/" or self.view.exists(path) is not None

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = set(self.view.children(path)) if self.view.exists(path) is not None else set()
        names |= {p[len(prefix) :] for p in self.created if p.startswith(prefix)}
        live = [n for n in names if "/" not in n and prefix + n not in self.deleted]
        return sorted(live)

    def add(self, op: ZnodeOp) -> None:
        if isinstance(op, CheckVersion):
            self.ops.append(tree.Check(op.path, op.expected_version))
        elif isinstance(op, SetNode):
            self.ops.append(tree.SetData(op.path, encode(op.data), op.expected_version))
        elif isinstance(op, CreateNode):
            self._create(op)
        else:
            self._delete(op)

    def _create(self, op: CreateNode) -> None:
        parts = op.path.strip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/" + "/".join(parts[:depth])
            if not self.exists(parent):
                self._created(tree.Create(parent, b""))
        if op.sequential:  # its final name is the tree's; nothing later refers to it
            self.ops.append(tree.Create(op.path, encode(op.data), sequential=True))
            return
        self._created(tree.Create(op.path, encode(op.data)))

    def _created(self, create: tree.Create) -> None:
        self.ops.append(create)
        self.created.add(create.path)
        self.deleted.discard(create.path)

    def _delete(self, op: DeleteNode) -> None:
        if op.if_exists and not self.exists(op.path):
            return
        if op.recursive:
            for path in self._descendants(op.path):
                self._deleted(path)
        self._deleted(op.path)

    def _descendants(self, path: str) -> list[str]:
        """Every node below `path`, deepest first."""
        found: list[str] = []
        for child in self.children(path):
            child_path = f"{path.rstrip('/')}/{child}"
            found.extend(self._descendants(child_path))
            found.append(child_path)
        return found

    def _deleted(self, path: str) -> None:
        self.ops.append(tree.Delete(path, tree.ANY_VERSION))
        self.deleted.add(path)
        self.created.discard(path)


def isr_write_ops(write: IsrWrite) -> tuple[ZnodeOp, ...]:
    """A leader's ISR change (`replication.leader.IsrWrite`) as controller-style ops: the
    conditional set of the partition state and the sequential `/isr_change_notification`
    child (ZK-12), to run as one multi through `to_multi_ops`."""
    tp = write.tp
    state = znodes.PartitionState(
        write.leader, write.leader_epoch, tuple(write.isr), write.controller_epoch
    )
    notification = znodes.IsrChangeNotification((znodes.TopicPartition(tp.topic, tp.partition),))
    return (
        SetNode(
            znodes.partition_state_path(tp.topic, tp.partition), state, write.expected_zk_version
        ),
        CreateNode(
            f"{znodes.ISR_CHANGE_NOTIFICATION}/{znodes.ISR_CHANGE_PREFIX}",
            notification,
            sequential=True,
        ),
    )
