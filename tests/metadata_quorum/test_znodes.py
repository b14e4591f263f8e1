"""Kafka's znode payloads: exact bytes for known layouts, round trips, hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafka.metadata_quorum import znodes
from trafka.metadata_quorum.znodes import (
    BrokerRegistration,
    ClusterId,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerRegistration,
    Endpoint,
    EntityConfig,
    FeatureRange,
    IsrChangeNotification,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    ProducerIdBlock,
    ReassignPartitions,
    TopicAssignment,
    TopicPartition,
    ZNodeFormatError,
)


def test_broker_registration_matches_kafka_layout() -> None:
    registration = BrokerRegistration(
        broker_id=1,
        endpoints=(
            Endpoint("PLAINTEXT", "broker1", 9092),
            Endpoint("SSL", "broker1", 9093, "SSL"),
        ),
        timestamp_ms=1700000000000,
        rack="r1",
        features={"metadata.version": FeatureRange(1, 7)},
    )
    value = json.loads(registration.to_json())
    assert value == {
        "features": {"metadata.version": {"min_version": 1, "max_version": 7}},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "endpoints": ["PLAINTEXT://broker1:9092", "SSL://broker1:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "broker1",
        "version": 5,
        "timestamp": "1700000000000",
        "rack": "r1",
    }
    assert BrokerRegistration.from_json(registration.to_json(), 1) == registration


def test_broker_registration_reads_kafka_written_json() -> None:
    # As written by a Kafka 2.x broker (version 4, no features, rack absent).
    raw = (
        b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SSL"},'
        b'"endpoints":["INTERNAL://10.0.0.1:9092","EXTERNAL://[::1]:9093"],"jmx_port":9999,'
        b'"host":"10.0.0.1","timestamp":"1500000000000","port":9092,"version":4}'
    )
    parsed = BrokerRegistration.from_json(raw, 3)
    assert parsed.endpoints == (
        Endpoint("INTERNAL", "10.0.0.1", 9092, "PLAINTEXT"),
        Endpoint("EXTERNAL", "::1", 9093, "SSL"),
    )
    assert parsed.rack is None and parsed.jmx_port == 9999 and parsed.version == 4
    assert Endpoint("EXTERNAL", "::1", 9093).connection_string() == "EXTERNAL://[::1]:9093"


def test_small_payloads_exact_bytes() -> None:
    assert ControllerRegistration(2, 17).to_json() == (
        b'{"version":1,"brokerid":2,"timestamp":"17"}'
    )
    assert ControllerEpoch(5).to_json() == b"5"
    assert ControllerEpoch.from_json(b"12") == ControllerEpoch(12)
    assert ClusterId("abc").to_json() == b'{"version":"1","id":"abc"}'
    assert PartitionState(1, 0, (1, 2), 3).to_json() == (
        b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    )
    assert TopicAssignment({1: (2, 3), 0: (1, 2)}, "AAAAAAAAAAAAAAAAAAAAAA").to_json() == (
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{"0":[1,2],"1":[2,3]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert IsrChangeNotification((TopicPartition("t", 0),)).to_json() == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    )
    assert EntityConfig({"b": "2", "a": "1"}).to_json() == (
        b'{"version":1,"config":{"a":"1","b":"2"}}'
    )
    assert ConfigChangeNotification("topics/t").to_json() == (
        b'{"version":2,"entity_path":"topics/t"}'
    )
    assert ProducerIdBlock(1, 0, 999).to_json() == (
        b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    )


def test_topic_assignment_reads_version_1() -> None:
    parsed = TopicAssignment.from_json(b'{"version":1,"partitions":{"0":[1],"1":[2]}}')
    assert parsed == TopicAssignment({0: (1,), 1: (2,)})


ROUND_TRIPS = [
    ControllerRegistration(1, 2),
    ControllerEpoch(9),
    TopicAssignment({0: (1, 2)}, None, {0: (3,)}, {0: (1,)}),
    PartitionState(2, 7, (2,), 4, 1),
    ReassignPartitions((PartitionReassignment("t", 0, (1, 2)),)),
    PreferredReplicaElection((TopicPartition("t", 1),)),
    IsrChangeNotification((TopicPartition("u", 2), TopicPartition("v", 3))),
    EntityConfig({"retention.ms": "1000"}),
    ConfigChangeNotification("brokers/1"),
    ClusterId("x-y"),
    ProducerIdBlock(2, 1000, 1999),
]


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=lambda v: type(v).__name__)
def test_round_trip(value: object) -> None:
    assert type(value).from_json(value.to_json()) == value  # type: ignore[attr-defined]


DECODERS = [
    lambda b: BrokerRegistration.from_json(b, 1),
    ControllerRegistration.from_json,
    ControllerEpoch.from_json,
    TopicAssignment.from_json,
    PartitionState.from_json,
    ReassignPartitions.from_json,
    PreferredReplicaElection.from_json,
    IsrChangeNotification.from_json,
    EntityConfig.from_json,
    ConfigChangeNotification.from_json,
    ClusterId.from_json,
    ProducerIdBlock.from_json,
]


@given(
    st.one_of(
        st.binary(max_size=64),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=12), inner, max_size=4)
            ),
            max_leaves=10,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_arbitrary_bytes_only_raise_format_errors(raw: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(raw)
        except ZNodeFormatError:
            pass


def test_paths() -> None:
    assert znodes.broker_path(3) == "/brokers/ids/3"
    assert znodes.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert znodes.isr_change_sequence_prefix() == "/isr_change_notification/isr_change_"
    assert znodes.topic_config_path("t") == "/config/topics/t"
    assert znodes.delete_topic_path("t") == "/admin/delete_topics/t"
