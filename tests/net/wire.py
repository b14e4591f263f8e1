"""Raw-socket helpers for the server tests: build frames, read frames, detect a closed peer."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import trio
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from trafka.net import codec, headers, protocol


def request_frame(request: Any, correlation_id: int, api_version: int | None = None) -> bytes:
    api_key = int(type(request).__api_key__)
    version = int(type(request).__version__) if api_version is None else api_version
    header = headers.encode_request_header(
        api_key,
        version,
        correlation_id,
        "wire-test",
        protocol.request_header_version(api_key, version),
    )
    payload = header + codec.encode_request(request)
    return struct.pack(">i", len(payload)) + payload


def raw_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def metadata_v1() -> MetadataRequestV1:
    return MetadataRequestV1(topics=None)


def produce_v3(topic: str, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(PartitionProduceData(index=i32(0), records=Records(b"r")),),
            ),
        ),
    )


class WireClient:
    """A deliberately dumb client: writes whatever bytes it is told to."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    @classmethod
    async def connect(cls, port: int) -> WireClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _fill(self, count: int) -> bool:
        while len(self.buffer) < count:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, ConnectionResetError):
                return False
            if not data:
                return False
            self.buffer += data
        return True

    async def read_frame(self, timeout_s: float = 5.0) -> bytes | None:
        """The next response frame's payload, or None if the server closed the connection."""
        with trio.fail_after(timeout_s):
            if not await self._fill(4):
                return None
            (size,) = struct.unpack(">i", self.buffer[:4])
            if not await self._fill(4 + size):
                return None
            payload = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
            return payload

    async def assert_closed_by_server(self, timeout_s: float = 5.0) -> None:
        frame = await self.read_frame(timeout_s)
        assert frame is None, f"expected the server to close; got a {len(frame)}-byte frame"

    async def aclose(self) -> None:
        await self.stream.aclose()
