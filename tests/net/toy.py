"""A toy request handler for the net/ tests: ApiVersions, Metadata (one broker, no topics),
Produce (echoes base offset 0; acks=0 -> no response; topic "slow-<ms>" sleeps first).
Test-only; the real handlers live in trafka.node.handlers."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from typing import Any

import trio
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta, i64

from trafka.net import codec, protocol
from trafka.net.server import RequestContext

SUPPORTED = protocol.SupportedApis(
    [
        protocol.ApiVersionRange(18, 0, 3),
        protocol.ApiVersionRange(3, 1, 12),
        protocol.ApiVersionRange(0, 3, 9, advertised_min_version=0),
    ]
)
ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))


def build(cls: type[Any], **values: Any) -> Any:
    """Instantiate `cls` with the subset of `values` it has fields for."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(api_key: int, version: int, name: str) -> type[Any]:
    cls = codec.response_class(api_key, version)
    assert cls is not None
    module = importlib.import_module(cls.__module__)
    nested_class: type[Any] = getattr(module, name)
    return nested_class


class ToyBroker:
    def __init__(
        self, host: str = "127.0.0.1", supported: protocol.SupportedApis = SUPPORTED
    ) -> None:
        self.host = host
        self.supported = supported
        self.port = 0
        self.seen: list[tuple[int, int, int]] = []

    async def handle(self, ctx: RequestContext) -> Any:
        self.seen.append((ctx.api_key, ctx.api_version, ctx.correlation_id))
        version = ctx.api_version
        response_class = codec.response_class(ctx.api_key, version)
        assert response_class is not None
        if ctx.api_key == 18:
            entry = nested(18, version, "ApiVersion")
            return build(
                response_class,
                error_code=ErrorCode.none,
                api_keys=tuple(
                    entry(
                        api_key=i16(e.api_key),
                        min_version=i16(e.advertised_min),
                        max_version=i16(e.max_version),
                    )
                    for e in self.supported
                ),
                throttle_time=ZERO_MS,
            )
        if ctx.api_key == 3:
            broker = nested(3, version, "MetadataResponseBroker")
            return build(
                response_class,
                throttle_time=ZERO_MS,
                brokers=(broker(node_id=i32(1), host=self.host, port=i32(self.port)),),
                cluster_id="toy-cluster",
                controller_id=i32(1),
                topics=(),
            )
        if ctx.api_key == 0:
            topics = ctx.request.topic_data
            for topic in topics:
                if topic.name.startswith("slow-"):
                    await trio.sleep(int(topic.name.removeprefix("slow-")) / 1000)
                if topic.name == "explode":
                    raise RuntimeError("toy handler failure")
            if ctx.request.acks == 0:
                return None
            partition = nested(0, version, "PartitionProduceResponse")
            topic_response = nested(0, version, "TopicProduceResponse")
            return build(
                response_class,
                responses=tuple(
                    topic_response(
                        name=t.name,
                        partition_responses=tuple(
                            build(
                                partition,
                                index=p.index,
                                error_code=ErrorCode.none,
                                base_offset=i64(0),
                            )
                            for p in t.partition_data
                        ),
                    )
                    for t in topics
                ),
                throttle_time=ZERO_MS,
            )
        raise AssertionError(f"toy broker got API {ctx.api_key}")
