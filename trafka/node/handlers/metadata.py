"""Metadata v0-12: brokers, cluster id, controller id, topics and partitions.

* v0: all topics when the list is empty. v1: null list = all topics, empty = none;
  controller_id, rack, is_internal. v2: cluster_id. v3: throttle_time_ms.
* v4: allow_auto_topic_creation (older versions always allow it, as Kafka does).
* v5: offline_replicas. v7: leader_epoch (KIP-320). v8: authorized operations (KIP-430:
  the bit set when asked for, else -2147483648). v9: flexible. v10: topic ids (KIP-516).
  v11: cluster authorized operations removed. v12: topics named by id only, nullable topic
  names (KIP-516; librdkafka's KIP-848 consumer needs it to resolve assigned topic ids).

Auto-creation (SEEDS PROTO-23): an unknown topic is created with `num.partitions` and
`default.replication.factor` when the request allows it and `auto.create.topics.enable` is
true; otherwise UNKNOWN_TOPIC_OR_PARTITION. An illegal name gives INVALID_TOPIC_EXCEPTION.
Internal topics are never auto-created here (the group coordinator creates
`__consumer_offsets`).

Authorization (Kafka's table): a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (by name or id);
auto-creation needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED).

Many topics (issue 12, item 4): a large request is decoded in slices by the net layer
(`trafka.net.large_requests`), the topic loop yields every few thousand topics, and the
answer's topics are written in slices, so a 200,000-topic request does not hold the event
loop. They are written from the handler's dicts by `trafka.net.metadata_encoding` (the
same bytes as kio's; issue 19: 10,000 partitions took ~0.4 s through kio's build and
write), the rest of the response by kio. A found topic's entry is written once per version
and kept until its state or the live brokers change (`EncodedTopics`), unless the request
asks for authorized operations (which depend on the principal).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Mapping
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from trafka.net import large_requests, metadata_encoding
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.net.server import EncodedResponse
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.topics import INTERNAL_TOPICS, TopicError, TopicState
from trafka.security.acl import AUTHORIZED_OPERATIONS_UNKNOWN
from trafka.security.authorizer import AclOperation, ResourceType

TOPIC = ResourceType.TOPIC


def topic_metadata(live: frozenset[int], topic: TopicState) -> dict[str, Any]:
    """A topic's answer with `live` the live brokers; its partitions as
    `metadata_encoding.Partition` tuples (no dict or list per partition: a 10,000-partition
    answer's allocations set off full garbage collections)."""
    leader_not_available = int(ErrorCode.leader_not_available)
    partitions: list[metadata_encoding.Partition] = []
    states = topic.partitions
    for index in sorted(states):
        state = states[index]
        replicas = state.replicas
        if state.leader in live:
            error_code, leader = 0, state.leader
        else:
            error_code, leader = leader_not_available, -1
        offline = () if live.issuperset(replicas) else tuple(r for r in replicas if r not in live)
        partitions.append(
            (error_code, index, leader, state.leader_epoch, replicas, state.isr, offline)
        )
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
    }


_MIN_PRUNE_AT: Final = 64


class EncodedTopics:
    """Each topic's encoded answer per Metadata version, kept while the topic's state (a
    `TopicState` is replaced, never changed, on every change) and the live brokers are the
    ones it was written from. A full Metadata of 10,000 partitions wrote them all for every
    request (44-65 ms, issue 19 S2); between changes it now copies bytes. One entry per
    topic holds its versions, and a new state replaces it; entries of deleted topics are
    dropped when the entries have doubled since the last drop (amortized: no new entry
    walks all the others)."""

    __slots__ = ("_entries", "_live", "_prune_at")

    def __init__(self) -> None:
        self._live: frozenset[int] = frozenset()
        self._entries: dict[str, tuple[TopicState, dict[int, bytes]]] = {}
        self._prune_at = _MIN_PRUNE_AT

    def encoded(
        self,
        version: int,
        live: frozenset[int],
        topic: TopicState,
        current: Mapping[str, TopicState],
    ) -> bytes:
        """`topic`'s entry of a Metadata answer of `version` (authorized operations
        unknown); `current`: every topic's state now (for dropping stale entries)."""
        if live != self._live:
            self._entries.clear()
            self._live = live
        entry = self._entries.get(topic.name)
        if entry is None or entry[0] is not topic:
            if len(self._entries) >= self._prune_at:
                self._entries = {n: e for n, e in self._entries.items() if current.get(n) is e[0]}
                self._prune_at = 2 * len(self._entries) + _MIN_PRUNE_AT
            entry = self._entries[topic.name] = (topic, {})
        versions = entry[1]
        encoded = versions.get(version)
        if encoded is None:
            out = bytearray()
            metadata_encoding.encode_topic(version, topic_metadata(live, topic), out)
            encoded = versions[version] = bytes(out)
        return encoded


_ENCODED: weakref.WeakKeyDictionary[object, EncodedTopics] = weakref.WeakKeyDictionary()
"""One `EncodedTopics` per node (keyed by its topics manager)."""


def _error_topic(name: str | None, error: ErrorCode, topic_id: uuid.UUID | None = None) -> Any:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": topic_id or uuid.UUID(int=0),
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_UNKNOWN,
    }


@register(api_key=ApiKey.METADATA, name="Metadata", min_version=0, max_version=12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    topics_manager = services.topics
    version = ctx.api_version
    requested = request.topics
    allow_auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
    live = frozenset(services.metadata.live_broker_ids())
    with_operations = bool(getattr(request, "include_topic_authorized_operations", False))
    if with_operations:
        encoded = None
    else:
        encoded = _ENCODED.get(topics_manager)
        if encoded is None:
            encoded = _ENCODED[topics_manager] = EncodedTopics()
    current = topics_manager.topics

    def found(topic: TopicState) -> dict[str, Any] | bytes:
        """A found topic's answer: its encoded bytes unless operations are asked for."""
        if encoded is None:
            return topic_metadata(live, topic)
        return encoded.encoded(version, live, topic, current)

    answer: list[dict[str, Any] | bytes] = []
    if requested is None or (version == 0 and not requested):
        everything = sorted(current.items())
        visible = ctx.authorized_names(AclOperation.DESCRIBE, TOPIC, (n for n, _ in everything))
        answer = [found(t) for n, t in everything if n in visible]
    else:
        for index, wanted in enumerate(requested):
            if index and index % large_requests.ELEMENTS_PER_SLICE == 0:
                await trio.sleep(0)  # a huge topic list must not hold the event loop
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            # A response topic name is nullable from v12 only (found by the fuzzer: a null
            # name in a v10/v11 answer failed to encode and closed the connection).
            no_name = None if version >= 12 else ""
            if name is None and topic_id is not None and topic_id.int != 0:
                by_id = topics_manager.by_id(topic_id)
                if by_id is None:
                    answer.append(_error_topic(no_name, ErrorCode.unknown_topic_id, topic_id))
                elif not ctx.authorize(AclOperation.DESCRIBE, TOPIC, by_id.name):
                    answer.append(
                        _error_topic(no_name, ErrorCode.topic_authorization_failed, topic_id)
                    )
                else:
                    answer.append(found(by_id))
                continue
            if name is None:
                answer.append(_error_topic(no_name, ErrorCode.invalid_request))
                continue
            if not ctx.authorize(AclOperation.DESCRIBE, TOPIC, name):
                answer.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                continue
            state = topics_manager.get(name)
            if state is None and allow_auto_create and name not in INTERNAL_TOPICS:
                if not (
                    ctx.authorize(AclOperation.CREATE)
                    or ctx.authorize(AclOperation.CREATE, TOPIC, name)
                ):
                    answer.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                    continue
                try:
                    state = await services.topic_admin.auto_create_topic(name)
                except TopicError as error:
                    answer.append(_error_topic(name, error.error_code))
                    continue
            if state is None:
                answer.append(_error_topic(name, ErrorCode.unknown_topic_or_partition))
            else:
                answer.append(found(state))
    if with_operations:
        for topic in answer:
            assert isinstance(topic, dict)
            if topic["error_code"] == 0 and topic["name"] is not None:
                topic["topic_authorized_operations"] = ctx.authorized_operations(
                    TOPIC, topic["name"]
                )
    cluster_operations = AUTHORIZED_OPERATIONS_UNKNOWN
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER)
    cls = response_class(request)
    data = {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in services.metadata.live_brokers(ctx.listener_name)
        ],
        "cluster_id": services.cluster_id,
        "controller_id": services.metadata.controller_id(),
        "topics": answer,
        "cluster_authorized_operations": cluster_operations,
    }
    # The topics are written from the dicts (trafka.net.metadata_encoding: kio's build and
    # write cost ~40 us per partition), in slices with yields for many topics; the rest
    # of the response is kio's.
    chunks = await large_requests.encode_in_slices(
        build(cls, {**data, "topics": []}),
        "topics",
        lambda topic, out: _write_topic(version, topic, out),
        answer,
    )
    while answer:  # freed in slices too, not in one burst when the handler returns
        del answer[-large_requests.ELEMENTS_PER_SLICE :]
        await trio.sleep(0)
    return EncodedResponse(tuple(chunks))


def _write_topic(version: int, topic: dict[str, Any] | bytes, out: bytearray) -> None:
    if isinstance(topic, bytes):
        out += topic
    else:
        metadata_encoding.encode_topic(version, topic, out)
