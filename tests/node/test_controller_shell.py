"""The controller shell's pure parts: the controller's request dataclasses encoded as the
declared wire messages (LeaderAndIsr v4, UpdateMetadata v6, StopReplica v2) survive a round
trip through the codec with every field the brokers read."""

from __future__ import annotations

from trafka.net import codec
from trafka.node.controller.effects import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller_service import encode_request
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    TopicPartition,
    ZkVersion,
)

BROKERS = (
    BrokerInfo(BrokerId(1), 100, None, ("PLAINTEXT://127.0.0.1:9092",)),
    BrokerInfo(BrokerId(2), 101, "r2", ("PLAINTEXT://[::1]:9093",)),
)


def _round_trip(request: object) -> object:
    wire = encode_request(request)
    api_key, version = int(wire.__api_key__), int(wire.__version__)
    return codec.decode_request(api_key, version, codec.encode_request(wire))


def test_leader_and_isr_round_trip() -> None:
    request = LeaderAndIsrRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(7),
        broker_epoch=101,
        partition_states=tuple(
            LeaderAndIsrPartitionState(
                tp=TopicPartition(topic, partition),
                controller_epoch=ControllerEpoch(7),
                leader=BrokerId(2),
                leader_epoch=LeaderEpoch(3),
                isr=(BrokerId(2), BrokerId(1)),
                zk_version=ZkVersion(5),
                replicas=(BrokerId(1), BrokerId(2)),
                is_new=partition == 1,
            )
            for topic in ("a", "b")
            for partition in (0, 1)
        ),
        live_leaders=BROKERS,
    )
    decoded = _round_trip(request)
    assert decoded.controller_id == 1 and decoded.controller_epoch == 7  # type: ignore[attr-defined]
    assert decoded.broker_epoch == 101  # type: ignore[attr-defined]
    topics = {t.topic_name: t for t in decoded.topic_states}  # type: ignore[attr-defined]
    assert sorted(topics) == ["a", "b"]
    states = topics["b"].partition_states
    assert [s.partition_index for s in states] == [0, 1]
    assert states[1].leader == 2 and states[1].leader_epoch == 3 and states[1].is_new
    assert tuple(states[1].isr) == (2, 1) and tuple(states[1].replicas) == (1, 2)
    assert states[0].zk_version == 5 and not states[0].is_new
    leaders = decoded.live_leaders  # type: ignore[attr-defined]
    assert [(b.broker_id, b.host_name, b.port) for b in leaders] == [
        (1, "127.0.0.1", 9092),
        (2, "::1", 9093),
    ]


def test_update_metadata_round_trip() -> None:
    request = UpdateMetadataRequest(
        controller_id=BrokerId(2),
        controller_epoch=ControllerEpoch(4),
        broker_epoch=-1,
        partition_states=(
            UpdateMetadataPartitionState(
                tp=TopicPartition("t", 0),
                controller_epoch=ControllerEpoch(4),
                leader=BrokerId(-2),
                leader_epoch=LeaderEpoch(9),
                isr=(BrokerId(1),),
                zk_version=ZkVersion(2),
                replicas=(BrokerId(1), BrokerId(2)),
                offline_replicas=(BrokerId(2),),
            ),
        ),
        live_brokers=BROKERS,
    )
    decoded = _round_trip(request)
    assert decoded.controller_epoch == 4  # type: ignore[attr-defined]
    (topic,) = decoded.topic_states  # type: ignore[attr-defined]
    (state,) = topic.partition_states
    assert topic.topic_name == "t" and state.leader == -2 and tuple(state.offline_replicas) == (2,)
    brokers = decoded.live_brokers  # type: ignore[attr-defined]
    assert [(b.id, b.rack, b.endpoints[0].host, b.endpoints[0].port) for b in brokers] == [
        (1, None, "127.0.0.1", 9092),
        (2, "r2", "::1", 9093),
    ]


def test_stop_replica_round_trip() -> None:
    request = StopReplicaRequest(
        controller_id=BrokerId(1),
        controller_epoch=ControllerEpoch(2),
        broker_epoch=55,
        delete_partitions=True,
        partitions=(TopicPartition("x", 2), TopicPartition("x", 0), TopicPartition("y", 1)),
    )
    decoded = _round_trip(request)
    assert decoded.delete_partitions is True  # type: ignore[attr-defined]
    wanted = {(t.name, tuple(t.partition_indexes)) for t in decoded.topics}  # type: ignore[attr-defined]
    assert wanted == {("x", (2, 0)), ("y", (1,))}
