"""The node's ACLs: the authorizer it runs, the ACL writes, and the change listener.

* `build_authorizer`: ``authorizer.class.name`` empty -> `AllowAllAuthorizer` (Kafka without
  an authorizer); one of `AUTHORIZER_CLASS_NAMES` (Kafka's AclAuthorizer, StandardAuthorizer,
  SimpleAclAuthorizer) -> `AclAuthorizer` with ``super.users`` and
  ``allow.everyone.if.no.acl.found``; anything else fails start-up.
* `AclService.create` / `delete`: CreateAcls and DeleteAcls as Kafka's ZooKeeper-mode
  AclAuthorizer wrote them: per resource pattern a compare-and-set of
  ``/kafka-acl/<Type>/<name>`` (or ``/kafka-acl-extended/prefixed/...``; the node is
  deleted when its last entry goes), then a sequential change notification
  (`trafka.security.acl`). The writer updates its own copy at once.
* `AclService.run`: every broker watches ``/kafka-acl-changes`` and
  ``/kafka-acl-extended-changes`` on its replica of the tree; when a new notification
  appears it re-reads every ACL node (one atomic read of the local replica: a replica
  applies commits in order, so the ACL node written before the notification is there). A
  missed watch costs at most `WAKE_FALLBACK_S`; everything is re-read at least every
  `RESCAN_INTERVAL_MS` and after a lost event stream or session. Notifications older than
  Kafka's 15 minutes are deleted (at most `MAX_PURGE_PER_PASS` per pass).

The pure parts (`read_all`, `plan_removal`) take a `ZNodeTree` or values; the rest is the
trio shell over the node's quorum replica.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

import trio

from trafka.metadata_quorum.bridge import MultiFailedError, SessionEvent
from trafka.metadata_quorum.tree import (
    Delete,
    ErrorCode,
    NodeExistsError,
    NoNodeError,
    SetData,
    WatchEvent,
    ZNodeTree,
    ZooKeeperError,
)
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_store import MetadataStore
from trafka.security.acl import (
    ACL_CHANGE_PREFIX,
    ACL_CHANGES,
    ACL_EXTENDED_CHANGES,
    ACL_EXTENDED_ROOT,
    ACL_ROOT,
    AUTHORIZER_CLASS_NAMES,
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclError,
    PatternType,
    ResourcePattern,
    acl_path,
    change_notification,
    decode_entries,
    encode_entries,
    parse_super_users,
    resource_type_from_name,
)
from trafka.security.authorizer import AllowAllAuthorizer, Authorizer

log = logging.getLogger("trafka.node.security.acls")

WAKE_FALLBACK_S: Final = 1.0
RESCAN_INTERVAL_MS: Final = 30_000
NOTIFICATION_EXPIRY_MS: Final = 15 * 60 * 1000
"""Kafka's `changeExpirationMs` for ACL change notifications."""
MAX_PURGE_PER_PASS: Final = 100
MAX_UPDATE_ATTEMPTS: Final = 20
CHANGE_PATHS: Final = (ACL_CHANGES, ACL_EXTENDED_CHANGES)


class AuthorizerConfigError(ValueError):
    """An ``authorizer.class.name`` trafka cannot run."""


def build_authorizer(config: BrokerConfig) -> Authorizer:
    class_name = str(config.get("authorizer.class.name") or "").strip()
    if not class_name:
        return AllowAllAuthorizer()
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise AuthorizerConfigError(
            f"authorizer.class.name={class_name} is not supported; use "
            + " or ".join(sorted(AUTHORIZER_CLASS_NAMES))
        )
    return AclAuthorizer(
        super_users=parse_super_users(config.get("super.users")),
        allow_everyone_if_no_acl_found=config.get_bool("allow.everyone.if.no.acl.found"),
    )


# ---- pure reads ----------------------------------------------------------------------------


def _children(tree: ZNodeTree, path: str) -> list[str]:
    try:
        return tree.children(path)
    except ZooKeeperError:
        return []


def read_all(tree: ZNodeTree) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """Every ACL node of the tree; a malformed node is skipped (and logged)."""
    found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for root, pattern_type in (
        (ACL_ROOT, PatternType.LITERAL),
        (ACL_EXTENDED_ROOT, PatternType.PREFIXED),
    ):
        for type_name in _children(tree, root):
            try:
                resource_type = resource_type_from_name(type_name)
            except AclError:
                continue
            for name in _children(tree, f"{root}/{type_name}"):
                pattern = ResourcePattern(resource_type, name, pattern_type)
                try:
                    data, _ = tree.get(acl_path(pattern))
                    entries = decode_entries(bytes(data))
                except ZooKeeperError:
                    continue
                except AclError as error:
                    log.warning("ignoring ACL node %s: %s", acl_path(pattern), error)
                    continue
                if entries:
                    found[pattern] = entries
    return found


def notification_sequence(child: str) -> int | None:
    if not child.startswith(ACL_CHANGE_PREFIX):
        return None
    digits = child[len(ACL_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def latest_notifications(tree: ZNodeTree) -> tuple[int, int]:
    """The newest sequence number under each change path (-1: none)."""
    latest = []
    for path in CHANGE_PATHS:
        sequences = [notification_sequence(child) for child in _children(tree, path)]
        latest.append(max((s for s in sequences if s is not None), default=-1))
    return latest[0], latest[1]


def expired_notifications(tree: ZNodeTree, now_ms: int) -> list[str]:
    """Paths of notifications older than `NOTIFICATION_EXPIRY_MS`."""
    expired = []
    for path in CHANGE_PATHS:
        for child in _children(tree, path):
            stat = tree.exists(f"{path}/{child}")
            if stat is not None and now_ms - int(stat.ctime_ms) > NOTIFICATION_EXPIRY_MS:
                expired.append(f"{path}/{child}")
    return expired


# ---- the service ---------------------------------------------------------------------------


def _wall_ms() -> int:
    return int(time.time() * 1000)


class AclService:
    """The ACLs of one node: writes through the quorum, reads from the local copy."""

    def __init__(
        self,
        authorizer: AclAuthorizer,
        store: MetadataStore,
        *,
        now_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.authorizer = authorizer
        self._store = store
        self._now_ms = now_ms
        self._wake = trio.Event()
        self._seen: tuple[int, int] | None = None
        self._rescan_at_ms = 0
        self._write_lock = trio.Lock()

    # -- reads
    def reload(self) -> None:
        """Replace the authorizer's copy with the local replica's ACLs (one atomic read)."""
        acls, latest = self._store.read_local(
            lambda tree: (read_all(tree), latest_notifications(tree))
        )
        self.authorizer.replace_all(acls)
        self._seen = latest

    # -- writes
    async def _update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Compare-and-set of one resource's ACL node; returns the new entries."""
        path = acl_path(pattern)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            await self._store.sync()
            try:
                raw, stat = self._store.get_local(path)
                current: frozenset[AccessControlEntry] | None = decode_entries(bytes(raw))
                version = int(stat.version)
            except NoNodeError:
                current, version = None, -1
            except AclError:
                current, version = frozenset(), int(stat.version)
            new = change(current or frozenset())
            if current is not None and new == current:
                return new
            try:
                if current is None:
                    if not new:
                        return new
                    await self._store.create(path, encode_entries(new))  # parents too
                elif new:
                    await self._store.multi([SetData(path, encode_entries(new), version)])
                else:
                    await self._store.multi([Delete(path, version)])
            except NodeExistsError:
                continue
            except MultiFailedError as error:
                if error.code in (ErrorCode.BAD_VERSION, ErrorCode.NO_NODE):
                    continue
                raise
            await self._notify(pattern)
            return new
        raise ZooKeeperError(path, f"{path}: too many concurrent ACL updates")

    async def _notify(self, pattern: ResourcePattern) -> None:
        prefix, data = change_notification(pattern)
        await self._store.create_sequential(prefix, data)

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Store `bindings` (already validated); ZooKeeperError when the tree refuses."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        async with self._write_lock:
            for pattern, entries in by_pattern.items():
                new = await self._update(pattern, lambda current, e=entries: current | e)  # type: ignore[misc]
                self.authorizer.set_entries(pattern, new)

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter the bindings it removed."""
        removed: list[list[AclBinding]] = [[] for _ in filters]
        async with self._write_lock:
            await self._store.sync()
            self.reload()
            patterns = {b.pattern for f in filters for b in self.authorizer.bindings(f)}
            for pattern in sorted(patterns):

                def change(
                    current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern
                ) -> frozenset[AccessControlEntry]:
                    return frozenset(
                        entry
                        for entry in current
                        if not any(f.matches(AclBinding(pattern, entry)) for f in filters)
                    )

                before = self.authorizer.entries(pattern)
                new = await self._update(pattern, change)
                self.authorizer.set_entries(pattern, new)
                for index, binding_filter in enumerate(filters):
                    removed[index].extend(
                        AclBinding(pattern, entry)
                        for entry in sorted(before - new)
                        if binding_filter.matches(AclBinding(pattern, entry))
                    )
        return removed

    # -- the listener
    def on_quorum_event(self, event: object) -> None:
        """One of the node's quorum event listeners (`trafka.node.node_tasks`)."""
        if isinstance(event, WatchEvent):
            if event.path in CHANGE_PATHS:
                self._wake.set()
        elif isinstance(event, SessionEvent):
            self._seen = None
            self._wake.set()

    def _arm_watches(self) -> tuple[int, int]:
        latest = []
        for path in CHANGE_PATHS:
            try:
                children = self._store.children_local(path, watch=True)
            except NoNodeError:
                children = []
            sequences = [notification_sequence(child) for child in children]
            latest.append(max((s for s in sequences if s is not None), default=-1))
        return latest[0], latest[1]

    async def run_once(self) -> bool:
        """One pass; True when the ACLs were re-read."""
        latest = self._arm_watches()
        now_ms = self._now_ms()
        if self._seen == latest and now_ms < self._rescan_at_ms:
            return False
        self.reload()
        self._rescan_at_ms = now_ms + RESCAN_INTERVAL_MS
        await self._purge(now_ms)
        return True

    async def _purge(self, now_ms: int) -> None:
        expired = self._store.read_local(lambda tree: expired_notifications(tree, now_ms))
        for path in expired[:MAX_PURGE_PER_PASS]:
            try:
                await self._store.delete(path)
            except NoNodeError:
                pass
            except ZooKeeperError as error:
                log.debug("cannot purge %s: %s", path, error)
                return

    async def ensure_paths(self) -> None:
        """Kafka creates the ACL roots at start: the watches then always have a parent."""
        for path in (ACL_ROOT, ACL_EXTENDED_ROOT, *CHANGE_PATHS):
            if self._store.exists_local(path) is None:
                try:
                    await self._store.create_recursive(path)
                except ZooKeeperError as error:
                    log.debug("cannot create %s: %s", path, error)

    async def run(self) -> None:
        try:
            await self.ensure_paths()
        except Exception:
            log.exception("cannot create the ACL paths")
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("ACL change listener pass failed")
            with trio.move_on_after(WAKE_FALLBACK_S):
                await self._wake.wait()
            self._wake = trio.Event()
