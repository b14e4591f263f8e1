"""The controller's channel to one broker (Kafka's ControllerChannelManager, CTL-11, D8).

A bounded queue and one task with one `KafkaConnection`: a request that cannot be delivered
is retried on a new connection while the broker stays registered (a lost request only
delays: brokers also re-learn on the next request). The answers of StopReplica with
deletion go back to the controller as `StopReplicaResponse` events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import trio
from kio.schema.errors import ErrorCode

from trafka.net.client import ClientError, KafkaConnection
from trafka.node.controller.effects import BrokerRequest, StopReplicaRequest
from trafka.node.controller.events import ControllerEvent, StopReplicaResponse
from trafka.node.controller.payloads import BrokerInfo
from trafka.node.controller.wire import encode_request, endpoint_of
from trafka.node.replication.ids import TopicPartition
from trafka.node.security.inter_broker import InterBrokerClient

log = logging.getLogger("trafka.node.controller")

CHANNEL_QUEUE_MAX = 1_000
REQUEST_TIMEOUT_S = 30.0
"""Kafka's `controller.socket.timeout.ms` (30 s). A LeaderAndIsr that creates 1,000 logs
(a topic of 1,000 partitions RF=3: every broker holds them all) takes a broker seconds of
fsyncs; with 10 s it timed out under load and was sent again, twice the work (issue 19, S2)."""
RECONNECT_BACKOFF_S = 0.2


class ControllerChannel(Protocol):
    """The controller's channel to one broker: requests in order, answers as events."""

    info: BrokerInfo
    cancel_scope: trio.CancelScope

    def enqueue(self, request: BrokerRequest) -> None: ...

    async def run(self) -> None: ...


ChannelFactory = Callable[[int, BrokerInfo, Callable[[ControllerEvent], None]], ControllerChannel]
"""(controller's node id, the broker, where answers go) -> its channel."""


class BrokerChannel:
    """One broker's queue and sender task (ControllerChannelManager, CTL-11)."""

    def __init__(
        self,
        node_id: int,
        info: BrokerInfo,
        submit: Callable[[ControllerEvent], None],
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self.node_id = node_id
        #: The inter-broker listener's name and security (issue 12 item 2, issue 14).
        self.inter_broker = inter_broker or InterBrokerClient()
        self.info = info
        self._submit = submit
        self.send_channel, self.receive_channel = trio.open_memory_channel[BrokerRequest](
            CHANNEL_QUEUE_MAX
        )
        self.cancel_scope = trio.CancelScope()

    def enqueue(self, request: BrokerRequest) -> None:
        try:
            self.send_channel.send_nowait(request)
        except trio.WouldBlock:
            log.warning(
                "controller channel to broker %d full: request dropped", self.info.broker_id
            )

    async def run(self) -> None:
        connection: KafkaConnection | None = None
        with self.cancel_scope:
            try:
                async for request in self.receive_channel:
                    while True:
                        endpoint = endpoint_of(self.info, self.inter_broker.listener_name)
                        if endpoint is None:
                            break
                        try:
                            if connection is None or connection.closed:
                                connection = await self.inter_broker.connect(
                                    endpoint[0],
                                    endpoint[1],
                                    client_id=f"controller-{self.node_id}",
                                    request_timeout_s=REQUEST_TIMEOUT_S,
                                )
                            response = await connection.request(encode_request(request))
                        except (ClientError, OSError) as error:
                            log.info(
                                "controller -> broker %d: %s; retrying", self.info.broker_id, error
                            )
                            if connection is not None:
                                await connection.close()
                            connection = None
                            await trio.sleep(RECONNECT_BACKOFF_S)
                            continue
                        self._answered(request, response)
                        break
            finally:
                if connection is not None:
                    await connection.close()

    def _answered(self, request: BrokerRequest, response: Any) -> None:
        if not isinstance(request, StopReplicaRequest) or not request.delete_partitions:
            return
        errors: dict[TopicPartition, ErrorCode] = {
            tp: ErrorCode(int(response.error_code)) for tp in request.partitions
        }
        for entry in response.partition_errors:
            errors[TopicPartition(str(entry.topic_name), int(entry.partition_index))] = ErrorCode(
                int(entry.error_code)
            )
        self._submit(StopReplicaResponse(self.info.broker_id, errors))
