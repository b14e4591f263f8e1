"""`metadata_encoding` writes Metadata's topics with the same bytes as kio's build and
encode, on every version the handler serves (v0-12), for random answers: error topics,
null names (v12), leaderless partitions, offline replicas, authorized operations."""

from __future__ import annotations

import importlib
import random
import uuid
from typing import Any

import pytest

from trafka.net import codec, large_requests, metadata_encoding
from trafka.net.kio_shape import build


def _response_class(version: int) -> type[Any]:
    module = importlib.import_module(f"kio.schema.metadata.v{version}.response")
    return module.MetadataResponse  # type: ignore[no-any-return]


PARTITION_FIELDS = (
    "error_code",
    "partition_index",
    "leader_id",
    "leader_epoch",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
)


def _as_kio_dict(topic: dict[str, Any]) -> dict[str, Any]:
    """The same topic as kio's build takes it: partitions as dicts."""
    partitions = [dict(zip(PARTITION_FIELDS, p, strict=True)) for p in topic["partitions"]]
    return {**topic, "partitions": partitions}


def _random_topic(rng: random.Random, version: int) -> dict[str, Any]:
    name: str | None = rng.choice(["orders", "é-topic", "t" * 200, ""])
    if version >= 12 and rng.random() < 0.2:
        name = None
    replicas = [rng.randrange(0, 5) for _ in range(rng.randrange(0, 4))]
    return {
        "error_code": rng.choice([0, 0, 3, 29]),
        "name": name,
        "topic_id": rng.choice([uuid.uuid4(), uuid.UUID(int=0)]),
        "is_internal": rng.random() < 0.3,
        "partitions": [
            (
                rng.choice([0, 5]),
                index,
                rng.choice([-1, 1, 2, 70000]),
                rng.randrange(-1, 1 << 20),
                tuple(replicas),
                tuple(replicas[: rng.randrange(0, len(replicas) + 1)]),
                tuple(replicas[:1]) if rng.random() < 0.3 else (),
            )
            for index in range(rng.randrange(0, 40))
        ],
        "topic_authorized_operations": rng.choice([-2147483648, 0, 3576]),
    }


@pytest.mark.parametrize("version", range(13))
async def test_the_topics_are_written_as_kio_writes_them(version: int) -> None:
    rng = random.Random(version)
    cls = _response_class(version)
    for _ in range(20):
        topics = [_random_topic(rng, version) for _ in range(rng.randrange(0, 6))]
        data = {
            "throttle_time": 0,
            "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": topics,
            "cluster_authorized_operations": -2147483648,
        }
        expected = codec.encode_response(
            build(cls, {**data, "topics": [_as_kio_dict(t) for t in topics]})
        )
        chunks = await large_requests.encode_in_slices(
            build(cls, {**data, "topics": []}),
            "topics",
            lambda topic, out: metadata_encoding.encode_topic(version, topic, out),
            topics,
        )
        assert b"".join(chunks) == expected
