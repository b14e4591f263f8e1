"""Body codec: declared messages round-trip through kio's serializer; bad bytes never crash."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from trafka.net import codec, protocol
from trafka.net.messages import DECLARED_REQUESTS, DECLARED_RESPONSES
from trafka.net.messages import controlled_shutdown as cs
from trafka.net.messages import leader_and_isr as lai
from trafka.net.messages import list_offsets_v0 as lo
from trafka.net.messages import produce_v0_v2 as produce
from trafka.net.messages import stop_replica as sr
from trafka.net.messages import update_metadata as um


def _leader_and_isr(suffix: str) -> Any:
    m = vars(lai)
    state = m[f"LeaderAndIsrPartitionState{suffix}"](
        partition_index=i32(0),
        controller_epoch=i32(3),
        leader=BrokerId(1),
        leader_epoch=i32(7),
        isr=(BrokerId(1), BrokerId(2)),
        zk_version=i32(4),
        replicas=(BrokerId(1), BrokerId(2), BrokerId(3)),
        adding_replicas=(BrokerId(3),),
        is_new=True,
    )
    return m[f"LeaderAndIsrRequest{suffix}"](
        controller_id=BrokerId(1),
        controller_epoch=i32(3),
        broker_epoch=i64(99),
        topic_states=(
            m[f"LeaderAndIsrTopicState{suffix}"](
                topic_name=TopicName("orders"), partition_states=(state,)
            ),
        ),
        live_leaders=(
            m[f"LeaderAndIsrLiveLeader{suffix}"](
                broker_id=BrokerId(1), host_name="localhost", port=i32(9092)
            ),
        ),
    )


def _update_metadata(suffix: str) -> Any:
    m = vars(um)
    return m[f"UpdateMetadataRequest{suffix}"](
        controller_id=BrokerId(1),
        controller_epoch=i32(1),
        topic_states=(
            m[f"UpdateMetadataTopicState{suffix}"](
                topic_name=TopicName("t"),
                partition_states=(
                    m[f"UpdateMetadataPartitionState{suffix}"](
                        partition_index=i32(2),
                        controller_epoch=i32(1),
                        leader=BrokerId(-1),
                        leader_epoch=i32(0),
                        isr=(),
                        zk_version=i32(0),
                        replicas=(BrokerId(2),),
                        offline_replicas=(BrokerId(2),),
                    ),
                ),
            ),
        ),
        live_brokers=(
            m[f"UpdateMetadataBroker{suffix}"](
                id=BrokerId(2),
                endpoints=(
                    m[f"UpdateMetadataEndpoint{suffix}"](
                        port=i32(9093), host="h", listener="PLAINTEXT", security_protocol=i16(0)
                    ),
                ),
                rack=None,
            ),
        ),
    )


SAMPLES: list[tuple[int, int, Any]] = [
    (4, 3, _leader_and_isr("V3")),
    (4, 4, _leader_and_isr("V4")),
    (6, 5, _update_metadata("V5")),
    (6, 6, _update_metadata("V6")),
    (
        5,
        1,
        sr.StopReplicaRequestV1(
            controller_id=BrokerId(1),
            controller_epoch=i32(2),
            delete_partitions=True,
            topics=(sr.StopReplicaTopicV1(name=TopicName("t"), partition_indexes=(i32(0),)),),
        ),
    ),
    (
        5,
        3,
        sr.StopReplicaRequestV3(
            controller_id=BrokerId(1),
            controller_epoch=i32(2),
            broker_epoch=i64(5),
            topic_states=(
                sr.StopReplicaTopicStateV3(
                    topic_name=TopicName("t"),
                    partition_states=(
                        sr.StopReplicaPartitionStateV3(
                            partition_index=i32(1), leader_epoch=i32(4), delete_partition=False
                        ),
                    ),
                ),
            ),
        ),
    ),
    (7, 1, cs.ControlledShutdownRequestV1(broker_id=BrokerId(3))),
    (7, 3, cs.ControlledShutdownRequestV3(broker_id=BrokerId(3), broker_epoch=i64(12))),
    (
        0,
        2,
        produce.ProduceRequestV0(
            acks=i16(1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(
                produce.TopicProduceData(
                    name=TopicName("t"),
                    partition_data=(
                        produce.PartitionProduceData(index=i32(0), records=Records(b"\x01\x02")),
                    ),
                ),
            ),
        ),
    ),
    (
        2,
        0,
        lo.ListOffsetsRequestV0(
            replica_id=BrokerId(-1),
            topics=(
                lo.ListOffsetsTopicV0(
                    name=TopicName("t"),
                    partitions=(
                        lo.ListOffsetsPartitionV0(
                            partition_index=i32(0), timestamp=i64(-1), max_num_offsets=i32(1)
                        ),
                    ),
                ),
            ),
        ),
    ),
]


@pytest.mark.parametrize(("api_key", "version", "message"), SAMPLES)
def test_declared_requests_round_trip(api_key: int, version: int, message: Any) -> None:
    raw = codec.encode_request(message)
    assert codec.decode_request(api_key, version, raw) == message
    # Flexible versions end every struct with an (empty) tag section; non-flexible do not.
    assert codec.is_flexible(api_key, version) == type(message).__flexible__


def test_flexible_and_legacy_encodings_differ_as_kip_482_says() -> None:
    legacy = codec.encode_request(_leader_and_isr("V3"))
    flexible = codec.encode_request(_leader_and_isr("V4"))
    assert legacy != flexible
    assert flexible.endswith(b"\x00")  # top-level tag section
    assert protocol.request_header_version(4, 4) == 2
    assert protocol.response_header_version(4, 4) == 1


def test_declared_responses_round_trip() -> None:
    samples = [
        (4, 4, lai.LeaderAndIsrResponseV4(error_code=ErrorCode.none, partition_errors=())),
        (6, 6, um.UpdateMetadataResponseV6(error_code=ErrorCode.stale_controller_epoch)),
        (
            7,
            3,
            cs.ControlledShutdownResponseV3(
                error_code=ErrorCode.none,
                remaining_partitions=(
                    cs.RemainingPartitionV3(topic_name=TopicName("t"), partition_index=i32(0)),
                ),
            ),
        ),
        (
            0,
            2,
            produce.ProduceResponseV2(
                responses=(
                    produce.TopicProduceResponseV2(
                        name=TopicName("t"),
                        partition_responses=(
                            produce.PartitionProduceResponseV2(
                                index=i32(0), error_code=ErrorCode.none, base_offset=i64(42)
                            ),
                        ),
                    ),
                )
            ),
        ),
        (
            2,
            0,
            lo.ListOffsetsResponseV0(
                topics=(
                    lo.ListOffsetsTopicResponseV0(
                        name=TopicName("t"),
                        partitions=(
                            lo.ListOffsetsPartitionResponseV0(
                                partition_index=i32(0),
                                error_code=ErrorCode.none,
                                old_style_offsets=(i64(10),),
                            ),
                        ),
                    ),
                )
            ),
        ),
    ]
    for api_key, version, message in samples:
        assert codec.decode_response(api_key, version, codec.encode_response(message)) == message


def test_every_declared_version_has_both_classes() -> None:
    assert set(DECLARED_REQUESTS) == set(DECLARED_RESPONSES)
    for api_key, version in DECLARED_REQUESTS:
        assert version in codec.known_versions(api_key)


def test_unknown_versions_and_keys() -> None:
    assert codec.request_class(1, 3) is None  # Fetch v3: deliberately not declared
    assert codec.request_class(9999, 0) is None
    with pytest.raises(codec.UnknownMessage):
        codec.decode_request(9999, 0, b"")
    assert codec.api_name(4) == "LeaderAndIsr"
    assert codec.api_name(3) == "Metadata"


def test_api_versions_v0_error_body_layout() -> None:
    supported = protocol.SupportedApis(
        [
            protocol.ApiVersionRange(18, 0, 3),
            protocol.ApiVersionRange(0, 3, 9, advertised_min_version=0),
        ]
    )
    body = protocol.api_versions_v0_error_body(supported)
    # error 35, two entries, sorted by key; Produce advertised from v0 (KAFKA-18659).
    assert body == bytes.fromhex("002300000002000000000009001200000003")
    decoded = codec.decode_response(18, 0, body)
    assert decoded.error_code == ErrorCode.unsupported_version
    assert [(a.api_key, a.min_version, a.max_version) for a in decoded.api_keys] == [
        (0, 0, 9),
        (18, 0, 3),
    ]


def test_supported_apis_names_versions_without_schema() -> None:
    fetch = protocol.SupportedApis([protocol.ApiVersionRange(1, 0, 11)])  # v0-3 undeclared
    assert fetch.missing_schemas() == ["Fetch v0", "Fetch v1", "Fetch v2", "Fetch v3"]
    assert protocol.SupportedApis([protocol.ApiVersionRange(1, 4, 11)]).missing_schemas() == []
    with pytest.raises(ValueError, match="twice"):
        protocol.SupportedApis(
            [protocol.ApiVersionRange(1, 4, 5), protocol.ApiVersionRange(1, 6, 7)]
        )
    with pytest.raises(ValueError):
        protocol.ApiVersionRange(0, 5, 3)


_ALL_REQUESTS = sorted(
    (key, version)
    for key in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 18, 19, 22)
    for version in codec.known_versions(key)
)


@settings(max_examples=300)
@given(st.sampled_from(_ALL_REQUESTS), st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(key_version: tuple[int, int], data: bytes) -> None:
    api_key, version = key_version
    try:
        codec.decode_request(api_key, version, data)
    except codec.MalformedMessage:
        pass


def test_huge_array_count_is_rejected_without_allocating() -> None:
    # Metadata v1: topics array with 2**31-1 entries claimed, 4 bytes present.
    with pytest.raises(codec.MalformedMessage):
        codec.decode_request(3, 1, b"\x7f\xff\xff\xff" + b"\x00" * 4)


@pytest.mark.slow  # imports ~450 kio schema modules
def test_every_known_request_version_survives_random_and_mutated_bodies() -> None:
    """Random bodies and byte-mutated valid bodies for every (api_key, version) we can
    decode: MalformedMessage or a value, never a crash (a crash here kills pytest)."""
    import random

    from kio.schema.index import api_key_map

    rng = random.Random(20261121)
    keys = sorted(set(api_key_map) | {4, 5, 6, 7})
    checked = 0
    for api_key in keys:
        for version in codec.known_versions(api_key):
            for _ in range(6):
                body = rng.randbytes(rng.randrange(0, 48))
                if rng.random() < 0.5:
                    # Sprinkle large varints / counts where a length is likely to be read.
                    position = rng.randrange(0, len(body) + 1)
                    body = (
                        body[:position]
                        + rng.choice(
                            [b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80\x08"]
                        )
                        + body[position:]
                    )
                try:
                    codec.decode_request(api_key, version, body)
                except codec.MalformedMessage:
                    pass
                checked += 1
    assert checked > 1000
