"""The controller of a voter, wired to the node's config service: Kafka's
enableDefaultUncleanLeaderElection / enableTopicUncleanLeaderElection (a dynamic change of
`unclean.leader.election.enable`, cluster-wide or per topic, wakes the controller)."""

from __future__ import annotations

from trafka.node.clock import Clock
from trafka.node.config.service import ConfigService
from trafka.node.controller.service import ControllerService, controller_config_of
from trafka.node.metadata_store import MetadataStore
from trafka.node.security.inter_broker import InterBrokerClient


def controller_for(
    *,
    node_id: int,
    store: MetadataStore,
    clock: Clock,
    configs: ConfigService,
    inter_broker: InterBrokerClient,
) -> ControllerService:
    controller = ControllerService(
        node_id=node_id,
        store=store,
        clock=clock,
        config=controller_config_of(configs.config),
        inter_broker=inter_broker,
    )
    configs.on_broker_config.append(
        lambda changed: controller.unclean_default_changed(
            changed.get_bool("unclean.leader.election.enable")
        )
    )
    configs.on_notified_topics.append(controller.topic_configs_changed)
    return controller
