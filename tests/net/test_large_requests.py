"""Large requests decoded and answered in slices (trafka.net.large_requests, issue 12 item 4):
the same objects and bytes as kio, on every Metadata version."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest

from trafka.net import codec
from trafka.net.kio_shape import build, response_class
from trafka.net.large_requests import (
    LargeRequestError,
    decode_metadata_request,
    element_class,
    encode_in_slices,
)

VERSIONS = list(range(12))


def metadata_request(version: int, count: int) -> object:
    cls = codec.request_class(3, version)
    assert cls is not None
    topic_cls = element_class(cls, "topics")
    topics = []
    for index in range(count):
        fields: dict[str, object] = {"name": f"topic-{index}-ü"}
        if version >= 10:
            fields["topic_id"] = uuid.UUID(int=index + 1)
        topics.append(topic_cls(**fields))
    values: dict[str, object] = {"topics": tuple(topics)}
    if version >= 4:
        values["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        values["include_cluster_authorized_operations"] = True
    if version >= 8:
        values["include_topic_authorized_operations"] = True
    return cls(**values)


@pytest.mark.parametrize("version", VERSIONS)
async def test_slice_decoding_builds_what_kio_builds(version: int) -> None:
    request = metadata_request(version, 4500)
    body = codec.encode_request(request)
    assert await decode_metadata_request(version, body, 0) == codec.decode_request(3, version, body)


@pytest.mark.parametrize("version", [1, 9])
async def test_a_null_topic_list_and_truncations(version: int) -> None:
    cls = codec.request_class(3, version)
    assert cls is not None
    values: dict[str, object] = {"topics": None}
    if version >= 4:
        values.update(
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    body = codec.encode_request(cls(**values))
    assert (await decode_metadata_request(version, body, 0)).topics is None
    full = codec.encode_request(metadata_request(version, 10))
    for cut in range(len(full)):
        with pytest.raises((LargeRequestError, UnicodeDecodeError)):
            await decode_metadata_request(version, full[:cut], 0)


@pytest.mark.parametrize("version", VERSIONS)
async def test_sliced_encoding_equals_kio(version: int) -> None:
    request = metadata_request(version, 1)
    response_cls = response_class(request)
    topic_cls = element_class(response_cls, "topics")
    data = {
        "throttle_time": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "cluster_authorized_operations": -(2**31),
    }
    topics = [
        {"error_code": 3, "name": f"t{i}", "topic_id": uuid.UUID(int=i), "is_internal": False,
         "partitions": [], "topic_authorized_operations": -(2**31)}
        for i in range(4500)
    ]  # fmt: skip
    whole = codec.encode_response(build(response_cls, {**data, "topics": topics}))
    empty = build(response_cls, {**data, "topics": []})
    writer = codec.entity_writer(topic_cls)

    def write_with_kio(topic: Any, out: bytearray) -> None:
        buffer = io.BytesIO()
        writer(buffer, build(topic_cls, topic))
        out += buffer.getvalue()

    chunks = await encode_in_slices(empty, "topics", write_with_kio, topics)
    assert b"".join(chunks) == whole
