"""The controller's requests on the wire: `effects.*Request` -> LeaderAndIsr v4,
UpdateMetadata v6, StopReplica v2 (the declared messages of `trafka.net.messages`), each
carrying the controller id and epoch."""

from __future__ import annotations

from typing import Any

from kio.schema.types import BrokerId as KioBrokerId
from kio.static.primitive import i16, i32, i64

from trafka.net.messages import leader_and_isr as lai
from trafka.net.messages import stop_replica as sr
from trafka.net.messages import update_metadata as um
from trafka.node.controller.effects import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.replication.ids import BrokerId


def endpoint_of(info: BrokerInfo, listener_name: str | None = None) -> tuple[str, int] | None:
    """host, port of a broker's endpoint on `listener_name` (the inter-broker listener);
    None: its first endpoint that parses."""
    for name, host, port, _ in endpoints_of(info):
        if listener_name is None or name == listener_name:
            return host, port
    return None


def endpoints_of(info: BrokerInfo) -> list[tuple[str, str, int, str]]:
    """(listener name, host, port, security protocol) of each endpoint that parses."""
    result = []
    protocols = list(info.security_protocols) + ["PLAINTEXT"] * len(info.endpoints)
    for text, protocol in zip(info.endpoints, protocols, strict=False):
        name, _, rest = text.partition("://")
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            result.append((name, host.strip("[]"), int(port), protocol))
    return result


_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _b(broker_id: int) -> Any:
    return KioBrokerId(int(broker_id))


def _bs(broker_ids: tuple[BrokerId, ...]) -> tuple[Any, ...]:
    return tuple(_b(b) for b in broker_ids)


def encode_request(request: Any) -> Any:
    """effects.* request -> the declared wire message (LeaderAndIsr v4, UpdateMetadata v6,
    StopReplica v2)."""
    if isinstance(request, LeaderAndIsrRequest):
        by_topic: dict[str, list[Any]] = {}
        for s in request.partition_states:
            by_topic.setdefault(s.tp.topic, []).append(
                lai.LeaderAndIsrPartitionStateV4(
                    partition_index=i32(s.tp.partition),
                    controller_epoch=i32(s.controller_epoch),
                    leader=_b(s.leader),
                    leader_epoch=i32(s.leader_epoch),
                    isr=_bs(s.isr),
                    zk_version=i32(s.zk_version),
                    replicas=_bs(s.replicas),
                    is_new=s.is_new,
                )
            )
        leaders = []
        for info in request.live_leaders:
            endpoint = endpoint_of(info)
            if endpoint is not None:
                leaders.append(
                    lai.LeaderAndIsrLiveLeaderV4(
                        broker_id=_b(info.broker_id), host_name=endpoint[0], port=i32(endpoint[1])
                    )
                )
        return lai.LeaderAndIsrRequestV4(
            controller_id=_b(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            topic_states=tuple(
                lai.LeaderAndIsrTopicStateV4(topic_name=t, partition_states=tuple(p))  # type: ignore[arg-type]
                for t, p in sorted(by_topic.items())
            ),
            live_leaders=tuple(leaders),
        )
    if isinstance(request, UpdateMetadataRequest):
        um_topics: dict[str, list[Any]] = {}
        for u in request.partition_states:
            um_topics.setdefault(u.tp.topic, []).append(
                um.UpdateMetadataPartitionStateV6(
                    partition_index=i32(u.tp.partition),
                    controller_epoch=i32(u.controller_epoch),
                    leader=_b(u.leader),
                    leader_epoch=i32(u.leader_epoch),
                    isr=_bs(u.isr),
                    zk_version=i32(u.zk_version),
                    replicas=_bs(u.replicas),
                    offline_replicas=_bs(u.offline_replicas),
                )
            )
        brokers = []
        for info in request.live_brokers:
            endpoints = endpoints_of(info)
            if not endpoints:
                continue
            brokers.append(
                um.UpdateMetadataBrokerV6(
                    id=_b(info.broker_id),
                    endpoints=tuple(
                        um.UpdateMetadataEndpointV6(
                            port=i32(port),
                            host=host,
                            listener=name,
                            security_protocol=i16(_SECURITY_PROTOCOL_IDS.get(protocol, 0)),
                        )
                        for name, host, port, protocol in endpoints
                    ),
                    rack=info.rack,
                )
            )
        return um.UpdateMetadataRequestV6(
            controller_id=_b(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            topic_states=tuple(
                um.UpdateMetadataTopicStateV6(topic_name=t, partition_states=tuple(p))  # type: ignore[arg-type]
                for t, p in sorted(um_topics.items())
            ),
            live_brokers=tuple(brokers),
        )
    assert isinstance(request, StopReplicaRequest)
    sr_topics: dict[str, list[int]] = {}
    for tp in request.partitions:
        sr_topics.setdefault(tp.topic, []).append(tp.partition)
    return sr.StopReplicaRequestV2(
        controller_id=_b(request.controller_id),
        controller_epoch=i32(request.controller_epoch),
        broker_epoch=i64(request.broker_epoch),
        delete_partitions=request.delete_partitions,
        topics=tuple(
            sr.StopReplicaTopicV2(name=t, partition_indexes=tuple(i32(p) for p in ps))  # type: ignore[arg-type]
            for t, ps in sorted(sr_topics.items())
        ),
    )
