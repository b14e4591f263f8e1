"""The Fetch response fast encoder writes exactly kio's bytes, for every version 4-16; the
follower's Fetch request encoder kio's v12 request bytes."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from trafka.net import codec
from trafka.net.fetch_encoding import (
    AbortedTransaction,
    FetchPartition,
    FetchResponseData,
    FetchTopic,
    encode_fetch_response,
    encode_follower_fetch_request,
    materialize,
)
from trafka.net.framing import FileRegion

from .toy import build, nested

_ERRORS = st.sampled_from(
    [ErrorCode.none, ErrorCode.offset_out_of_range, ErrorCode.not_leader_or_follower]
)
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_PAIR32_64 = st.tuples(_I32, _I64)

partitions = st.builds(
    FetchPartition,
    partition_index=st.integers(0, 2**31 - 1),
    error_code=_ERRORS,
    high_watermark=_I64,
    last_stable_offset=_I64,
    log_start_offset=_I64,
    aborted_transactions=st.none()
    | st.lists(st.builds(AbortedTransaction, _I64, _I64), max_size=3).map(tuple),
    preferred_read_replica=_I32,
    records=st.none() | st.lists(st.binary(max_size=40), max_size=3).map(tuple),
    diverging_epoch=st.none() | _PAIR32_64,
    current_leader=st.none() | st.tuples(_I32, _I32),
)
topics = st.builds(
    FetchTopic,
    name=st.text(max_size=20),
    partitions=st.lists(partitions, max_size=3).map(tuple),
    topic_id=st.uuids(),
)
responses = st.builds(
    FetchResponseData,
    topics=st.lists(topics, max_size=3).map(tuple),
    throttle_time_ms=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([ErrorCode.none, ErrorCode.fetch_session_id_not_found]),
    session_id=_I32,
)


def to_kio(version: int, data: FetchResponseData) -> Any:
    """The same response as kio's FetchResponse of `version`."""
    response_class = codec.response_class(1, version)
    assert response_class is not None

    def partition(p: FetchPartition) -> Any:
        values: dict[str, Any] = {
            "partition_index": p.partition_index,
            "error_code": ErrorCode(p.error_code),
            "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset,
            "log_start_offset": p.log_start_offset,
            "aborted_transactions": None
            if p.aborted_transactions is None
            else tuple(
                nested(1, version, "AbortedTransaction")(
                    producer_id=t.producer_id, first_offset=t.first_offset
                )
                for t in p.aborted_transactions
            ),
            "preferred_read_replica": p.preferred_read_replica,
            "records": None if p.records is None else b"".join(bytes(c) for c in p.records),  # type: ignore[arg-type]
        }
        if version >= 12:
            if p.diverging_epoch is not None:
                values["diverging_epoch"] = nested(1, version, "EpochEndOffset")(
                    epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1]
                )
            if p.current_leader is not None:
                values["current_leader"] = nested(1, version, "LeaderIdAndEpoch")(
                    leader_id=p.current_leader[0], leader_epoch=p.current_leader[1]
                )
        return build(nested(1, version, "PartitionData"), **values)

    return build(
        response_class,
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=data.throttle_time_ms)),
        error_code=ErrorCode(data.error_code),
        session_id=data.session_id,
        responses=tuple(
            build(
                nested(1, version, "FetchableTopicResponse"),
                topic=t.name,
                topic_id=t.topic_id,
                partitions=tuple(partition(p) for p in t.partitions),
            )
            for t in data.topics
        ),
    )


@settings(max_examples=60)
@given(data=responses, version=st.integers(4, 16))
def test_fast_encoder_matches_kio(data: FetchResponseData, version: int) -> None:
    fast = materialize(encode_fetch_response(version, data).chunks)
    assert fast == codec.encode_with_kio(to_kio(version, data))


def test_file_regions_stand_in_for_record_bytes(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"HEADER" + b"batch-bytes" + b"TAIL")
    data = FetchResponseData(
        topics=(
            FetchTopic(
                name="orders",
                partitions=(
                    FetchPartition(
                        partition_index=0,
                        high_watermark=10,
                        last_stable_offset=10,
                        log_start_offset=0,
                        records=(FileRegion(str(segment), 6, 11),),
                    ),
                ),
            ),
        )
    )
    for version in (11, 12):
        chunks = encode_fetch_response(version, data).chunks
        assert any(isinstance(c, FileRegion) for c in chunks)
        decoded = codec.decode_response(1, version, materialize(chunks))
        assert decoded.responses[0].partitions[0].records == b"batch-bytes"


def test_version_bounds() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(3, FetchResponseData(topics=()))
    with pytest.raises(ValueError):
        encode_fetch_response(17, FetchResponseData(topics=()))


def test_fast_encoder_is_faster_than_kio() -> None:
    data = FetchResponseData(
        topics=(
            FetchTopic(
                name="t",
                partitions=tuple(
                    FetchPartition(
                        partition_index=p,
                        high_watermark=100,
                        last_stable_offset=100,
                        log_start_offset=0,
                        records=(b"x" * 1000,),
                    )
                    for p in range(8)
                ),
                topic_id=uuid.uuid4(),
            ),
        )
    )
    reference = to_kio(12, data)

    def best_of(function: Any) -> float:
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                function()
            timings.append(time.perf_counter() - start)
        return min(timings)

    fast = best_of(lambda: encode_fetch_response(12, data))
    slow = best_of(lambda: codec.encode_with_kio(reference))
    # Typically 3-5x faster; only "faster" is asserted because the CI machine is shared.
    assert fast < slow, (fast, slow)


_I32S = st.integers(-(2**31), 2**31 - 1)
_NAMES = st.text(min_size=0, max_size=12)


@settings(max_examples=80)
@given(
    replica_id=st.integers(0, 2**31 - 1),
    max_wait_ms=st.integers(0, 2**31 - 1),
    min_bytes=_I32S,
    max_bytes=_I32S,
    session_id=_I32S,
    session_epoch=_I32S,
    topics=st.lists(
        st.tuples(
            _NAMES,
            st.lists(st.tuples(_I32S, _I32S, st.integers(-(2**63), 2**63 - 1), _I32S), max_size=4),
        ),
        max_size=3,
    ),
    forgotten=st.lists(st.tuples(_NAMES, st.lists(_I32S, max_size=4)), max_size=3),
)
def test_follower_request_encoder_matches_kio(
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    topics: list[tuple[str, list[tuple[int, int, int, int]]]],
    forgotten: list[tuple[str, list[int]]],
) -> None:
    from kio.schema.fetch.v12 import request as v12
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i32, i64

    expected = codec.encode_request(
        v12.FetchRequest(
            replica_id=BrokerId(replica_id),
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),  # type: ignore[arg-type]
            min_bytes=i32(min_bytes),
            max_bytes=i32(max_bytes),
            session_id=i32(session_id),
            session_epoch=i32(session_epoch),
            topics=tuple(
                v12.FetchTopic(
                    topic=TopicName(name),
                    partitions=tuple(
                        v12.FetchPartition(
                            partition=i32(p),
                            current_leader_epoch=i32(epoch),
                            fetch_offset=i64(offset),
                            partition_max_bytes=i32(limit),
                        )
                        for p, epoch, offset, limit in partitions
                    ),
                )
                for name, partitions in topics
            ),
            forgotten_topics_data=tuple(
                v12.ForgottenTopic(topic=TopicName(name), partitions=tuple(map(i32, indexes)))
                for name, indexes in forgotten
            ),
        )
    )
    assert (
        encode_follower_fetch_request(
            replica_id=replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            session_id=session_id,
            session_epoch=session_epoch,
            topics=topics,
            forgotten=forgotten,
        )
        == expected
    )
