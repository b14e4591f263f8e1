"""Requests naming thousands of elements, handled without holding the event loop (issue 12,
item 4: "any request whose handling would hold the event loop longer than ~50 ms is chunked
or moved off the loop").

The node's one trio loop also carries replication and the quorum session. A request naming
3,000 partitions or resources (the fuzzer's "maximal" counts) held it 0.2-4 s in the
handlers of DescribeConfigs, CreateTopics, Produce, IncrementalAlterConfigs/AlterConfigs,
DescribeQuorum, OffsetForLeaderEpoch, DescribeGroups and Fetch (measured on the loaded
2-core machine; docs/reliability.md). Two tools, used by those handlers:

* `LoopSlice`: the handler's per-element loop calls `await slice.tick()`; it yields to the
  loop (`trio.sleep(0)`) once `SLICE_S` has passed since the last yield. Time-based, so one
  rule fits cheap elements (a partition's offsets) and costly ones (a topic's 60 configs
  with synonyms). A handler whose side effects must stay in request order (Produce) still
  appends in order: the next request on the connection waits for its turn, not for the loop.
* `answer(request, data, elements)`: below `LARGE_ELEMENTS` elements, the kio response as
  before; above, the response is built and encoded in a worker thread (pure Python: the loop
  gets the GIL back every switch interval, 1 ms in a node) and returned encoded; the cyclic
  collector is paused meanwhile (`large_requests.gc_pause`: a full collection triggered by
  the burst of new objects scans the whole heap holding the GIL).

Metadata has its own slicing (trafka.net.large_requests, also for the decoding).
"""

from __future__ import annotations

import time
from typing import Any, Final

import trio

from trafka.net import codec, large_requests
from trafka.net.kio_shape import build, response_class
from trafka.net.server import EncodedResponse

SLICE_S: Final = 0.01
LARGE_ELEMENTS: Final = 200


class LoopSlice:
    """Yield to the event loop at most every `SLICE_S` of the caller's work."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = time.perf_counter()

    async def tick(self) -> None:
        now = time.perf_counter()
        if now - self._last >= SLICE_S:
            await trio.sleep(0)
            self._last = time.perf_counter()


async def answer(request: Any, data: dict[str, Any], elements: int) -> Any:
    """The response to `request` built from `data` (kio_shape.build); for `elements` of
    `LARGE_ELEMENTS` or more, built and encoded off the loop (an `EncodedResponse`)."""
    cls = response_class(request)
    if elements < LARGE_ELEMENTS:
        return build(cls, data)

    def build_and_encode() -> bytes:
        return codec.encode_response(build(cls, data))

    large_requests.gc_pause.acquire()  # no full collection of the heap in one go
    try:
        body = await trio.to_thread.run_sync(build_and_encode)
    finally:
        large_requests.gc_pause.release()
    return EncodedResponse((body,))
