"""The node's long-running tasks that start once its listeners are open, besides the request
handlers: the ACL listener, the controller (a voter only), the config change listener and the
one stray-log check. Each `start_*` starts its task in the broker's nursery and, where it
follows the tree, adds its callback to the node's quorum event listeners."""

from __future__ import annotations

from collections.abc import Callable

import trio

from trafka.metadata_quorum.bridge import QuorumEvent
from trafka.node.clock import Clock
from trafka.node.config.changes import ConfigChangeListener
from trafka.node.config.service import ConfigService
from trafka.node.controller.service import ControllerService
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_store import MetadataStore
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.security.acls import AclService
from trafka.node.stray_log_cleanup import StrayLogCleanup

QuorumListeners = list[Callable[[QuorumEvent], None]]
"""Called with every WatchEvent/SessionEvent of the node's quorum replica."""


async def start_acls(
    nursery: trio.Nursery, acls: AclService, store: MetadataStore, listeners: QuorumListeners
) -> None:
    """Every node loads the ACLs before serving (after a quorum barrier) and follows their
    changes."""
    await store.sync()
    acls.reload()
    listeners.append(acls.on_quorum_event)
    nursery.start_soon(acls.run)


def start_controller(
    nursery: trio.Nursery, controller: ControllerService, listeners: QuorumListeners
) -> None:
    listeners.append(controller.wake)
    nursery.start_soon(controller.run)


def start_config_changes(
    nursery: trio.Nursery,
    store: MetadataStore,
    configs: ConfigService,
    clock: Clock,
    listeners: QuorumListeners,
) -> None:
    """Follow `/config/changes` (`trafka.node.config.changes`): apply every dynamic config
    change to this node."""
    config_listener = ConfigChangeListener(
        store,
        apply=configs.apply_config_change,
        rescan=configs.rescan_configs,
        now_ms=clock.now_ms,
    )
    listeners.append(config_listener.on_quorum_event)
    nursery.start_soon(config_listener.run)


def start_stray_log_cleanup(
    nursery: trio.Nursery,
    store: MetadataStore,
    node_id: int,
    logs: LocalLogs,
    replicas: ReplicaManager,
) -> None:
    """Once, after a quorum barrier: delete the local logs the tree no longer assigns here."""
    cleanup = StrayLogCleanup(store=store, node_id=node_id, logs=logs, replicas=replicas)
    nursery.start_soon(cleanup.run)
