"""The broker side of a controlled shutdown (CTL-43, EXT-12): before it stops, a broker asks
the controller to move its leaders away.

ControlledShutdown v3 with this registration's epoch, retried
`controlled.shutdown.max.retries` times while partitions remain (the backoff
`controlled.shutdown.retry.backoff.ms` capped at 1 s so SIGTERM stays prompt). Disabled by
`controlled.shutdown.enable=false`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
from kio.schema.types import BrokerId as BrokerIdWire
from kio.static.primitive import i64

from trafka.net.client import ClientError
from trafka.net.messages.controlled_shutdown import ControlledShutdownRequestV3
from trafka.node.config.broker import BrokerConfig
from trafka.node.metadata_cache import MetadataCache
from trafka.node.security.inter_broker import InterBrokerClient

log = logging.getLogger("trafka.node.broker")

CONNECT_TIMEOUT_S = 2.0
REQUEST_TIMEOUT_S = 10.0


class ControlledShutdownClient:
    def __init__(
        self,
        *,
        node_id: int,
        metadata: MetadataCache,
        config: Callable[[], BrokerConfig],
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self._node_id = node_id
        #: The inter-broker listener's security (the controller's endpoint is on it).
        self._inter_broker = inter_broker or InterBrokerClient()
        self._metadata = metadata
        self._config = config

    async def run(self) -> bool:
        """Returns whether the controller confirmed (no partitions led here remain)."""
        config = self._config()
        if not config.get_bool("controlled.shutdown.enable"):
            return False
        broker_epoch = self._metadata.broker_epoch(self._node_id)
        backoff_s = min(1.0, config.get_int("controlled.shutdown.retry.backoff.ms") / 1000)
        for attempt in range(max(1, config.get_int("controlled.shutdown.max.retries"))):
            endpoint = self._metadata.endpoint_for(self._metadata.controller_id())
            if endpoint is not None:
                try:
                    if await self._attempt(endpoint, broker_epoch, attempt):
                        log.info("controlled shutdown succeeded")
                        return True
                except ClientError as error:
                    log.info("controlled shutdown attempt %d failed: %s", attempt + 1, error)
            await trio.sleep(backoff_s)
        log.warning("controlled shutdown did not complete; shutting down anyway")
        return False

    async def _attempt(self, endpoint: tuple[str, int], broker_epoch: int, attempt: int) -> bool:
        connection = await self._inter_broker.connect(
            endpoint[0],
            endpoint[1],
            client_id=f"broker-{self._node_id}",
            connect_timeout_s=CONNECT_TIMEOUT_S,
            request_timeout_s=REQUEST_TIMEOUT_S,
        )
        try:
            response = await connection.request(
                ControlledShutdownRequestV3(
                    broker_id=BrokerIdWire(self._node_id), broker_epoch=i64(broker_epoch)
                )
            )
        finally:
            await connection.close()
        remaining = len(response.remaining_partitions)
        if int(response.error_code) == 0 and remaining == 0:
            return True
        log.info(
            "controlled shutdown attempt %d: error %s, %d partitions remaining",
            attempt + 1,
            response.error_code,
            remaining,
        )
        return False
