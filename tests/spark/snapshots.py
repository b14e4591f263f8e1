"""A quorum snapshot in `ktool quorum export`'s format, built with the quorum's own code.

The tree is a real `ZNodeTree` filled with Kafka's znode payloads (`znodes.*.to_json`) and
exported with `trafka.metadata_quorum.export.export_tree`, so the audit reads exactly what
the exporter writes. Content: brokers 1-4, controller 1 (epoch 7), topic `orders`
(partition 0 replicas [1,2,3,4], ISR [1,2,3], moving to [2,3,4]: adding [4], removing [1],
plus the `/admin/reassign_partitions` plan; partition 1 replicas [2,3,1], ISR [2,1]),
topic `events` pending deletion (no partition state yet), a config override on `orders`.
"""

from __future__ import annotations

import json
from typing import Any

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.export import export_tree
from trafka.metadata_quorum.tree import Create, Entry, ZNodeTree

NOW_MS = 1_700_000_000_000


def _create(tree: ZNodeTree, path: str, data: bytes = b"") -> None:
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        parent = "/" + "/".join(parts[:depth])
        if tree.exists(parent) is None:
            tree.apply(Entry("", 0, NOW_MS, Create(parent)))
    tree.apply(Entry("", 0, NOW_MS, Create(path, data)))


def exported_snapshot() -> dict[str, Any]:
    tree = ZNodeTree()
    for path in znodes.PERSISTENT_PATHS:
        _create(tree, path)
    for broker in (1, 2, 3, 4):
        registration = znodes.BrokerRegistration(
            broker, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker),), NOW_MS
        )
        _create(tree, znodes.broker_path(broker), registration.to_json())
    _create(tree, znodes.CONTROLLER, znodes.ControllerRegistration(1, NOW_MS).to_json())
    _create(tree, znodes.CONTROLLER_EPOCH, znodes.ControllerEpoch(7).to_json())
    orders = znodes.TopicAssignment(
        {0: (1, 2, 3, 4), 1: (2, 3, 1)},
        topic_id="AAAAAAAAAAAAAAAAAAAAAA",
        adding_replicas={0: (4,)},
        removing_replicas={0: (1,)},
    )
    _create(tree, znodes.topic_path("orders"), orders.to_json())
    for partition, isr, leader in ((0, (1, 2, 3), 1), (1, (2, 1), 2)):
        state = znodes.PartitionState(leader, 3, isr, 7)
        _create(tree, znodes.partition_state_path("orders", partition), state.to_json())
    plan = znodes.ReassignPartitions((znodes.PartitionReassignment("orders", 0, (2, 3, 4)),))
    _create(tree, znodes.REASSIGN_PARTITIONS, plan.to_json())
    _create(tree, znodes.topic_path("events"), znodes.TopicAssignment({0: (1, 2)}).to_json())
    _create(tree, znodes.delete_topic_path("events"))
    config = znodes.EntityConfig({"retention.ms": "1000", "cleanup.policy": "delete"})
    _create(tree, znodes.topic_config_path("orders"), config.to_json())
    snapshot = export_tree(
        tree, exported_at_ms=NOW_MS, status={"leader_id": 1, "leader_epoch": 3, "voters": [1, 2, 3]}
    )
    # Through JSON text, as `ktool quorum export` writes it.
    result: dict[str, Any] = json.loads(json.dumps(snapshot))
    return result
