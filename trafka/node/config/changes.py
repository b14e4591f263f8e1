"""Config change notifications: every broker applies a dynamic config change (Kafka's ZK mode).

Kafka (`AdminZkClient.changeConfigs`, `ZkConfigManager`, `ZkNodeChangeNotificationListener`):
the writer stores the entity's configs in `/config/topics/<t>` or `/config/brokers/<id>`
(`<default>` for the cluster-wide default) and then creates the persistent sequential node

    /config/changes/config_change_<10 digits>   {"version":2,"entity_path":"topics/orders"}

Every broker watches the children of `/config/changes`; for each notification newer than the
last one it processed it re-reads the named entity from its local replica of the tree (the
entity was written before the notification, and a replica applies commits in order) and
applies it: the topic cache, the `LogConfig` cache, the open logs, the replication throttles,
the broker's dynamic config. Applying an entity that did not change is a no-op, so the
writer (which applied the change itself) and a repeated notification cost nothing.

Bounds: a notification older than `NOTIFICATION_EXPIRY_MS` (Kafka's 15 minutes, by the
node's ctime) is deleted by whichever broker sees it first; besides Kafka's age bound at most
`MAX_NOTIFICATIONS` are kept (the oldest beyond go first), and one pass deletes at most
`MAX_PURGE_PER_PASS`.

Safety nets, since a broker must never depend on one fired watch: the listener also looks at
`/config/changes` every `WAKE_FALLBACK_S`, and it re-reads every entity (`rescan`) at start,
after a lost event stream or an expired session, and every `RESCAN_INTERVAL_MS`. A rescan
compares the tree with what is applied and changes nothing when nothing changed; it covers a
notification purged before a slow (e.g. SIGSTOPped) broker saw it. Sequence numbers cannot
detect that by themselves: the parent's cversion, which numbers them, also counts deletes.

`NotificationCursor` (which notifications to apply, when to rescan) and the helpers are pure
(names and `now_ms` in, decisions out); `ConfigChangeListener` is the trio shell over the
node's quorum replica.

Quota entities (`users/<u>`, `users/<u>/clients/<c>`, `clients/<c>`, `ips/<ip>`) are
applied by the node's quota service (`trafka.node.quota.service`, through
`ConfigService.on_quota_entities`); group entities (`groups/<g>`, KIP-848 per-group configs
in `/config/groups/<g>`) by the group coordinator (`ConfigService.on_group_configs`). Topic
creation writes
`/config/topics/<t>` without a notification, as Kafka does: a broker reads a new topic's
configs with the topic.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import trio

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.bridge import SessionEvent
from trafka.metadata_quorum.tree import WatchEvent, ZooKeeperError
from trafka.node.clock import SYSTEM_CLOCK
from trafka.node.metadata_store import MetadataStore, NoNode

log = logging.getLogger("trafka.node.config.changes")

DEFAULT_BROKER_ENTITY = "<default>"
"""Kafka's name for the cluster-wide default broker config entity."""
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
"""Kafka's `changeExpirationMs` (ZkNodeChangeNotificationListener): 15 minutes."""
MAX_NOTIFICATIONS = 1000
"""Bound on `/config/changes` children; the oldest beyond it are deleted."""
MAX_PURGE_PER_PASS = 100
"""Bound on the deletes one listener pass issues."""
RESCAN_INTERVAL_MS = 30_000
"""Full re-read of every entity, whatever the watches said."""
WAKE_FALLBACK_S = 1.0
"""The listener looks at `/config/changes` at least this often (a missed watch costs ≤ 1 s)."""


class EntityType(enum.Enum):
    TOPICS = "topics"
    BROKERS = "brokers"
    USERS = "users"
    CLIENTS = "clients"
    IPS = "ips"
    GROUPS = "groups"

    @property
    def is_quota(self) -> bool:
        return self in (EntityType.USERS, EntityType.CLIENTS, EntityType.IPS)


@dataclass(frozen=True, slots=True)
class Entity:
    entity_type: EntityType
    name: str
    """A topic name, a broker id, a (sanitized) user / client id / ip, or `<default>`; for
    a user's client-id entity `<user>/clients/<client-id>`."""

    @property
    def path(self) -> str:
        return f"{self.entity_type.value}/{self.name}"


def topic_entity_path(topic: str) -> str:
    return f"{EntityType.TOPICS.value}/{topic}"


def group_entity_path(group_id: str) -> str:
    """`groups/<sanitized group id>` (the group's `/config/groups` child)."""
    return f"{EntityType.GROUPS.value}/{znodes.sanitize_entity_name(group_id)}"


def broker_entity_path(broker: int | str) -> str:
    return f"{EntityType.BROKERS.value}/{broker}"


def parse_entity_path(entity_path: str) -> Entity | None:
    """`topics/<t>` / `brokers/<id>` / `brokers/<default>` / `groups/<g>` / `users/<u>` /
    `users/<u>/clients/<c>` / `clients/<c>` / `ips/<ip>`; None for anything else."""
    kind, sep, name = entity_path.partition("/")
    if not sep or not name:
        return None
    try:
        entity_type = EntityType(kind)
    except ValueError:
        return None
    if "/" in name:
        user, clients, client = [*name.split("/"), "", "", ""][:3]
        if not (
            entity_type is EntityType.USERS
            and name.count("/") == 2
            and clients == "clients"
            and user
            and client
        ):
            return None
    return Entity(entity_type, name)


def notification_sequence(child: str) -> int | None:
    """The sequence number of a `config_change_<digits>` child, else None."""
    if not child.startswith(znodes.CONFIG_CHANGE_PREFIX):
        return None
    digits = child[len(znodes.CONFIG_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def _by_sequence(children: Iterable[str]) -> list[tuple[int, str]]:
    found = []
    for child in children:
        sequence = notification_sequence(child)
        if sequence is not None:
            found.append((sequence, child))
    return sorted(found)


def expired_notifications(
    children: Iterable[tuple[str, int]],
    *,
    now_ms: int,
    expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    max_count: int = MAX_NOTIFICATIONS,
) -> list[str]:
    """The notifications to delete, oldest first: those created more than `expiry_ms` ago,
    and the oldest beyond the newest `max_count`. `children` are (child name, ctime_ms);
    other names are never deleted."""
    ctimes = dict(children)
    ordered = _by_sequence(ctimes)
    excess = len(ordered) - max_count
    return [
        child
        for index, (_, child) in enumerate(ordered)
        if index < excess or now_ms - ctimes[child] > expiry_ms
    ]


@dataclass(frozen=True, slots=True)
class Pass:
    """What one listener pass does."""

    rescan: bool
    """Re-read every entity (the notifications up to now are covered by it)."""
    notifications: tuple[str, ...]
    """Children of `/config/changes` to read and apply, oldest first."""

    @property
    def purge(self) -> bool:
        """Look for expired notifications (Kafka purges whenever it processed some)."""
        return self.rescan or bool(self.notifications)


class NotificationCursor:
    """The last notification a broker applied and when it next re-reads everything.

    The first pass is a rescan (the caches were loaded from the tree, but changes may have
    landed since); afterwards each pass yields the notifications after the last one seen."""

    def __init__(self, *, rescan_interval_ms: int = RESCAN_INTERVAL_MS) -> None:
        self._rescan_interval_ms = rescan_interval_ms
        self._last_sequence = -1
        self._rescan_at_ms: int | None = None
        """None: rescan on the next pass."""

    @property
    def last_sequence(self) -> int:
        return self._last_sequence

    def request_rescan(self) -> None:
        """A lost event stream or session: re-read everything on the next pass."""
        self._rescan_at_ms = None

    def next_pass(self, children: Iterable[str], now_ms: int) -> Pass:
        ordered = _by_sequence(children)
        latest = max(self._last_sequence, ordered[-1][0] if ordered else -1)
        if self._rescan_at_ms is None or now_ms >= self._rescan_at_ms:
            self._rescan_at_ms = now_ms + self._rescan_interval_ms
            self._last_sequence = latest
            return Pass(rescan=True, notifications=())
        new = tuple(child for sequence, child in ordered if sequence > self._last_sequence)
        self._last_sequence = latest
        return Pass(rescan=False, notifications=new)


async def notify_config_change(store: MetadataStore, entity_path: str) -> None:
    """After writing `/config/<entity_path>`: tell every broker (Kafka's
    `AdminZkClient.changeEntityConfig` + `createConfigChangeNotification`)."""
    await store.create_sequential(
        znodes.config_change_sequence_prefix(),
        znodes.ConfigChangeNotification(entity_path).to_json(),
    )


class ConfigChangeListener:
    """Watches `/config/changes` on the node's quorum replica and applies each change.

    `apply` (one changed entity) and `rescan` (every entity) are awaited one at a time from
    `run`; an exception they raise is logged and the listener goes on."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        apply: Callable[[Entity], Awaitable[None]],
        rescan: Callable[[], Awaitable[None]],
        now_ms: Callable[[], int] = SYSTEM_CLOCK.now_ms,
    ) -> None:
        self._store = store
        self._apply = apply
        self._rescan = rescan
        self._now_ms = now_ms
        self._wake = trio.Event()
        self.cursor = NotificationCursor()

    def on_quorum_event(self, event: object) -> None:
        """A listener of the node's quorum events: wake on our watch; rescan after a lost
        event stream or session."""
        if isinstance(event, WatchEvent):
            if event.path == znodes.CONFIG_CHANGES:
                self._wake.set()
        elif isinstance(event, SessionEvent):
            self.cursor.request_rescan()
            self._wake.set()

    def _children(self) -> list[str]:
        try:
            return list(self._store.children_local(znodes.CONFIG_CHANGES, watch=True))
        except NoNode:
            return []

    async def run_once(self) -> Pass:
        """One pass: re-arm the watch, then rescan or apply the new notifications, then
        purge. Returns what it did."""
        children = self._children()
        step = self.cursor.next_pass(children, self._now_ms())
        if step.rescan:
            await self._guarded("rescan", self._rescan())
        for child in step.notifications:
            entity = self._read_notification(child)
            if entity is not None:
                await self._guarded(f"applying {child}", self._apply(entity))
        if step.purge:
            await self._purge(children)
        return step

    @staticmethod
    async def _guarded(what: str, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception:
            log.exception("config change listener: %s failed", what)

    def _read_notification(self, child: str) -> Entity | None:
        try:
            raw, _ = self._store.get_local(f"{znodes.CONFIG_CHANGES}/{child}")
            notification = znodes.ConfigChangeNotification.from_json(bytes(raw))
        except NoNode:
            return None  # purged meanwhile: the periodic rescan covers it
        except znodes.ZNodeFormatError:
            log.warning("ignoring malformed config change notification %s", child)
            return None
        entity = parse_entity_path(notification.entity_path)
        if entity is None:
            log.debug("ignoring config change %s (%s)", child, notification.entity_path)
        return entity

    async def _purge(self, children: list[str]) -> None:
        """Delete expired notifications (every broker may; a lost race is harmless)."""
        entries = []
        for child in children:
            stat = self._store.exists_local(f"{znodes.CONFIG_CHANGES}/{child}")
            if stat is not None:
                entries.append((child, int(stat.ctime_ms)))
        for child in expired_notifications(entries, now_ms=self._now_ms())[:MAX_PURGE_PER_PASS]:
            try:
                await self._store.delete(f"{znodes.CONFIG_CHANGES}/{child}")
            except NoNode:
                pass
            except ZooKeeperError as error:
                log.debug("cannot purge %s: %s", child, error)
                return

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:  # a stopping quorum must not take the broker down
                log.exception("config change listener pass failed")
            with trio.move_on_after(WAKE_FALLBACK_S):
                await self._wake.wait()
            self._wake = trio.Event()
