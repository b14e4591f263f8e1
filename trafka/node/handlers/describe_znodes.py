"""TrafkaDescribeZNodes v0 (API key 10000, NOT a Kafka API): read the znode tree.

`ktool quorum ls|get|stat|tree|export --bootstrap-server` browse the metadata quorum's tree
through the node's normal Kafka listener (issue 4); Kafka has no such request, so trafka
adds this one. Layout, bounds and paging: `trafka.net.messages.describe_znodes` and
docs/protocol.md. Registered with `advertised=False`: the server accepts the key (its version
table comes from the registry) but ApiVersions never lists it, so standard clients see a
plain Kafka broker.

Answered from the node's local replica (`MetadataQuorum.read_local`, one atomic read per
page); with `sync` a quorum barrier is committed first (a linearizable read, as ZooKeeper's
`sync` + read), bounded by `SYNC_TIMEOUT_S` (then REQUEST_TIMED_OUT). Paths are the
replicated tree's own paths (`zookeeper.chroot` is not applied), as `--data-dir` reads them.

Read-only: no watches are set. Authorization: DESCRIBE on the CLUSTER (else
CLUSTER_AUTHORIZATION_FAILED). Credentials are never answered: the data of every node under
``/config/users`` (SCRAM salts, stored keys, server keys) is left out (`CREDENTIAL_PATHS`),
whoever asks. NOT implemented: chroot-relative paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from trafka.metadata_quorum.tree import (
    BadArgumentsError,
    ZNodeTree,
    ZooKeeperError,
    join_path,
    name_of,
    parent_of,
    validate_path,
)
from trafka.net.messages.describe_znodes import (
    DESCRIBE_ZNODES_API_KEY,
    DESCRIBE_ZNODES_API_NAME,
    MAX_NODES_PER_RESPONSE,
    MAX_PATHS_PER_REQUEST,
    MAX_RESPONSE_BYTES,
    DescribeZNodesRequestV0,
    DescribeZNodesResponseV0,
    ZNodeEntryV0,
    ZNodeSessionV0,
)
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation

SYNC_TIMEOUT_S: Final = 10.0
CREDENTIAL_PATHS: Final = ("/config/users",)
"""Subtrees whose data holds credentials: never sent."""


def holds_credentials(path: str) -> bool:
    return any(path.startswith(root + "/") for root in CREDENTIAL_PATHS)


_ENTRY_OVERHEAD_BYTES: Final = 80  # fixed fields of one entry on the wire


def _error(code: ErrorCode, message: str) -> DescribeZNodesResponseV0:
    return DescribeZNodesResponseV0(error_code=code, error_message=message)


def _children_or_empty(tree: ZNodeTree, path: str) -> list[str]:
    try:
        return tree.children(path)
    except ZooKeeperError:
        return []


def walk_from(tree: ZNodeTree, root: str, after: str | None) -> Iterator[str]:
    """Paths under `root` depth first, children sorted (`ZNodeTree.walk`'s order).

    With `after` (a path under `root`, possibly deleted since): the paths that come after it
    in that order, without walking what precedes it (ancestors' later siblings are stacked
    from the top down, then `after`'s own children). Pure; raises ZooKeeperError when `root`
    is missing or `after` is not a path under it.
    """
    tree.get(root)  # NoNodeError / BadArgumentsError
    stack: list[str]
    if after is None:
        stack = [root]
    else:
        prefix = root if root == "/" else root + "/"
        validate_path(after)
        if after != root and not after.startswith(prefix):
            raise BadArgumentsError(after, f"resume_after {after} is not under {root}")
        chain: list[str] = []
        current = after
        while current != root:
            chain.append(current)
            current = parent_of(current)
        stack = []
        for node in reversed(chain):
            parent, name = parent_of(node), name_of(node)
            later = [n for n in _children_or_empty(tree, parent) if n > name]
            stack.extend(join_path(parent, n) for n in reversed(later))
        stack.extend(join_path(after, n) for n in reversed(_children_or_empty(tree, after)))
    while stack:
        current = stack.pop()
        if tree.exists(current) is None:
            continue
        yield current
        stack.extend(join_path(current, n) for n in reversed(tree.children(current)))


def _entry(tree: ZNodeTree, path: str, request: DescribeZNodesRequestV0) -> ZNodeEntryV0:
    try:
        data, stat = tree.get(path)
        children = tuple(tree.children(path)) if request.include_children else ()
    except ZooKeeperError as error:
        return ZNodeEntryV0(path=path, error_code=int(error.code))  # type: ignore[arg-type]
    fields: dict[str, Any] = {}
    if request.include_stat:
        fields = dataclasses.asdict(stat)
    return ZNodeEntryV0(
        path=path,
        error_code=0,  # type: ignore[arg-type]
        data=data if request.include_data and not holds_credentials(path) else None,
        children=children,
        **fields,
    )


def _size(entry: ZNodeEntryV0) -> int:
    return (
        _ENTRY_OVERHEAD_BYTES
        + len(entry.path)
        + (len(entry.data) if entry.data is not None else 0)
        + sum(2 + len(name) for name in entry.children)
    )


def describe(tree: ZNodeTree, request: DescribeZNodesRequestV0) -> DescribeZNodesResponseV0:
    """One page of the answer, read from `tree` (pure; the caller holds the replica's lock)."""
    wanted = int(request.max_nodes)
    limit = MAX_NODES_PER_RESPONSE if wanted <= 0 else min(wanted, MAX_NODES_PER_RESPONSE)
    entries: list[ZNodeEntryV0] = []
    used = 0
    next_index, next_after = -1, None

    def fits(entry: ZNodeEntryV0) -> bool:
        # At least one entry per page, so paging always makes progress.
        return not entries or (len(entries) < limit and used + _size(entry) <= MAX_RESPONSE_BYTES)

    for index, path in enumerate(request.paths):
        resume = request.resume_after if index == 0 else None
        if not request.recursive:
            entry = _entry(tree, path, request)
            if not fits(entry):
                next_index = index
                break
            entries.append(entry)
            used += _size(entry)
            continue
        last = resume
        try:
            walk = walk_from(tree, path, resume)
            stopped = False
            for node_path in walk:
                entry = _entry(tree, node_path, request)
                if not fits(entry):
                    next_index, next_after, stopped = index, last, True
                    break
                entries.append(entry)
                used += _size(entry)
                last = node_path
            if stopped:
                break
        except ZooKeeperError as error:
            entry = ZNodeEntryV0(path=path, error_code=int(error.code))  # type: ignore[arg-type]
            if not fits(entry):
                next_index, next_after = index, resume
                break
            entries.append(entry)
            used += _size(entry)
    sessions: tuple[ZNodeSessionV0, ...] = ()
    if request.include_sessions:
        sessions = tuple(
            ZNodeSessionV0(
                session_id=s.session_id,  # type: ignore[arg-type]
                owner=s.owner,
                timeout_ms=s.timeout_ms,  # type: ignore[arg-type]
            )
            for s in tree.sessions()
        )
    return DescribeZNodesResponseV0(
        error_code=ErrorCode.none,
        last_zxid=tree.last_zxid,  # type: ignore[arg-type]
        next_path_index=next_index,  # type: ignore[arg-type]
        next_resume_after=next_after,
        entries=tuple(entries),
        sessions=sessions,
    )


@register(
    api_key=DESCRIBE_ZNODES_API_KEY,
    name=DESCRIBE_ZNODES_API_NAME,
    min_version=0,
    max_version=0,
    advertised=False,
)
async def handle(ctx: RequestContext, request: DescribeZNodesRequestV0) -> DescribeZNodesResponseV0:
    if not ctx.authorize(AclOperation.DESCRIBE):
        return _error(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    store = ctx.services.store
    if not 1 <= len(request.paths) <= MAX_PATHS_PER_REQUEST:
        return _error(
            ErrorCode.invalid_request, f"between 1 and {MAX_PATHS_PER_REQUEST} paths per request"
        )
    if request.sync:
        try:
            with trio.fail_after(SYNC_TIMEOUT_S):
                await store.sync()
        except (trio.TooSlowError, ZooKeeperError) as error:
            return _error(ErrorCode.request_timed_out, f"quorum barrier failed: {error!r}")
    try:
        response: DescribeZNodesResponseV0 = store.read_local(lambda tree: describe(tree, request))
    except ZooKeeperError as error:  # the node's replica of the tree cannot be read
        return _error(ErrorCode.broker_not_available, f"metadata quorum unavailable: {error!r}")
    return response
