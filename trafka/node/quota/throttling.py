"""What a request costs against its client's quotas, and the throttle time in its response.

Kafka (`KafkaApis`, KIP-124, KIP-219), per request of a client that has a quota:

* Produce: the request's size counts against `producer_byte_rate`;
* Fetch from a consumer (not a follower: replication has its own quotas, KIP-73): the
  response's size counts against `consumer_byte_rate`;
* every API but the exempt ones: the time its handler ran counts against
  `request_percentage` (percent of one thread over the window, `nanosToPercentage`);
* the response carries the larger throttle time in `throttle_time_ms` and is sent at once;
  the connection is then muted for that time (`trafka.net.server.ChannelThrottle`).

Exempt from the request-time quota (Kafka's `ApiKeys.clusterAction` APIs and those it
answers with `sendResponseExemptThrottle`): the inter-broker APIs (LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, the quorum and AlterPartition
APIs), ApiVersions and the SASL APIs, and trafka's own non-Kafka APIs (key >= 1000); a
follower's Fetch is exempt from every client quota.

"Time its handler ran" is the wall time from the handler's start until it released its
turn (the end of its local work: Produce after its appends, before waiting for acks=all) or
returned: Kafka counts request-thread time, which excludes purgatory waits; a handler that
waits for I/O before releasing is counted for that wait (an approximation).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any, Final

from trafka.net.api_keys import ApiKey
from trafka.net.framing import chunks_size
from trafka.net.server import EncodedResponse

EXEMPT_FROM_REQUEST_QUOTA: Final = frozenset(
    int(key)
    for key in (
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    )
) | frozenset(
    int(getattr(ApiKey, name))
    for name in (
        "ALTER_PARTITION",
        "VOTE",
        "BEGIN_QUORUM_EPOCH",
        "END_QUORUM_EPOCH",
        "FETCH_SNAPSHOT",
        "ENVELOPE",
        "BROKER_REGISTRATION",
        "BROKER_HEARTBEAT",
        "UNREGISTER_BROKER",
        "ALLOCATE_PRODUCER_IDS",
        "CONTROLLER_REGISTRATION",
        "ADD_RAFT_VOTER",
        "REMOVE_RAFT_VOTER",
        "UPDATE_RAFT_VOTER",
        "ASSIGN_REPLICAS_TO_DIRS",
    )
    if hasattr(ApiKey, name)
)
FIRST_NON_KAFKA_KEY: Final = 1000
_I32: Final = struct.Struct(">i")
_MAX_THROTTLE_MS: Final = 2**31 - 1


def is_replica_fetch(request: Any) -> bool:
    """A follower's Fetch (replica_id >= 0; v15+ carries it in replica_state)."""
    replica_id = getattr(request, "replica_id", None)
    if replica_id is None:
        state = getattr(request, "replica_state", None)
        replica_id = getattr(state, "replica_id", -1) if state is not None else -1
    try:
        return int(replica_id) >= 0
    except (TypeError, ValueError):
        return False


def exempt_from_request_quota(api_key: int, request: Any) -> bool:
    if api_key in EXEMPT_FROM_REQUEST_QUOTA or api_key >= FIRST_NON_KAFKA_KEY:
        return True
    return api_key == ApiKey.FETCH and is_replica_fetch(request)


def response_size(response: object) -> int:
    """Bytes of a pre-encoded response (Fetch); 0 for other responses."""
    if isinstance(response, EncodedResponse):
        return chunks_size(response.chunks)
    return 0


_THROTTLE_TIME_FIRST_SINCE: Final[dict[int, int]] = {ApiKey.FETCH: 1, ApiKey.METADATA: 3}
"""Pre-encoded responses whose body starts with throttle_time_ms, from these versions."""


def with_throttle_time(
    api_key: int, api_version: int, response: object, throttle_ms: int
) -> object:
    """`response` with `throttle_time_ms` set (responses of versions without the field,
    and responses with a larger throttle already, are returned as they are)."""
    throttle_ms = min(throttle_ms, _MAX_THROTTLE_MS)
    if isinstance(response, EncodedResponse):
        # Fetch v1+ and Metadata v3+ bodies start with throttle_time_ms
        # (trafka.net.fetch_encoding, trafka.net.metadata_encoding).
        since = _THROTTLE_TIME_FIRST_SINCE.get(api_key)
        if since is None or api_version < since or not response.chunks:
            return response
        first = response.chunks[0]
        if not isinstance(first, (bytes, bytearray)) or len(first) < 4:
            return response
        patched = _I32.pack(max(throttle_ms, _I32.unpack_from(first)[0])) + bytes(first[4:])
        return EncodedResponse((patched, *response.chunks[1:]))
    if not dataclasses.is_dataclass(response) or isinstance(response, type):
        return response
    names = {f.name for f in dataclasses.fields(response)}
    if "throttle_time" in names:
        current = response.throttle_time  # type: ignore[attr-defined]
        current_ms = (
            int(current.total_seconds() * 1000)
            if isinstance(current, datetime.timedelta)
            else int(current)
        )
        if current_ms >= throttle_ms:
            return response
        value: object = (
            datetime.timedelta(milliseconds=throttle_ms)
            if isinstance(current, datetime.timedelta)
            else throttle_ms
        )
        return dataclasses.replace(response, throttle_time=value)
    if "throttle_time_ms" in names:
        if int(response.throttle_time_ms) >= throttle_ms:  # type: ignore[attr-defined]
            return response
        return dataclasses.replace(response, throttle_time_ms=throttle_ms)
    return response
