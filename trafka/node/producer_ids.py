"""Producer ids for InitProducerId: cluster-unique, handed out from blocks of the tree.

Kafka's ZooKeeper-era `ProducerIdManager`: a broker takes `PRODUCER_ID_BLOCK_SIZE` ids at a
time from `/latest_producer_id_block` with a conditional write, so two brokers are never
handed the same block, and serves them locally until the block is used up.
"""

from __future__ import annotations

import trio

from trafka.metadata_quorum import znodes
from trafka.node.metadata_store import MetadataStore

PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids a broker takes from /latest_producer_id_block at a time (Kafka's size)."""


class ProducerIdManager:
    def __init__(self, store: MetadataStore, *, node_id: int) -> None:
        self._store = store
        self._node_id = node_id
        self._next_producer_id = 0
        self._block_end = -1
        self._lock = trio.Lock()

    async def allocate(self) -> int:
        """A cluster-unique producer id."""
        async with self._lock:
            if self._next_producer_id > self._block_end:
                block = znodes.ProducerIdBlock.from_json(
                    await self._store.update(znodes.LATEST_PRODUCER_ID_BLOCK, self._next_block)
                )
                self._next_producer_id = block.block_start
                self._block_end = block.block_end
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id

    def _next_block(self, raw: bytes | None) -> bytes:
        start = znodes.ProducerIdBlock.from_json(raw).block_end + 1 if raw else 0
        return znodes.ProducerIdBlock(
            self._node_id, start, start + PRODUCER_ID_BLOCK_SIZE - 1
        ).to_json()
