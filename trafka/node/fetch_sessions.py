"""Incremental fetch sessions (KIP-227): the broker's session cache, as pure logic.

A Fetch request (v7+) carries `session_id` and `session_epoch` (Kafka's
`FetchManager.newContext`):

    session 0, epoch -1   sessionless full fetch: every partition named and answered
    session 0, epoch 0    full fetch asking for a session: answered in full with a new
                          session id (0 when the cache has no room)
    session S, epoch 0    full fetch closing session S and asking for a new one
    session S, epoch -1   full fetch closing session S, no new session
    session S, epoch n>0  incremental fetch in session S: names only the partitions added or
                          changed since the last request (`forgotten_topics_data` removes
                          some); the answer names only the partitions with something new

An incremental request whose session is unknown gets FETCH_SESSION_ID_NOT_FOUND; whose
epoch is not the session's next one INVALID_FETCH_SESSION_EPOCH (also when a duplicate
request advanced the epoch while this one waited); whose version disagrees with the session
about topic ids (a session created with v13+ keys partitions by topic id, one created below
by topic name) FETCH_SESSION_TOPIC_ID_ERROR. The client then starts over with a full fetch.
The epoch after 2^31-1 is 1.

An incremental answer names a partition when it has records, its high watermark, last stable
offset or log start offset changed since the last answer that named it, it has an error (the
cached high watermark is then forgotten, so the partition is named again once the error is
gone), a preferred read replica or a diverging epoch. A partition that returned records moves
to the end of the session's order, so the next request reads the others first (Kafka's
fairness under `max_bytes`). The last stable offset is our addition to Kafka's list (Kafka
names the partition for a new high watermark or log start only): a READ_COMMITTED consumer
then learns a commit that moved only the LSO.

The cache (Kafka's `FetchSessionCache`): at most `max.incremental.fetch.session.cache.slots`
sessions (0: no sessions at all, every full fetch is answered sessionless). A new session
when the cache is full evicts, as Kafka does, (1) the least recently used session if unused
for `EVICTION_MS` (Kafka's fixed 120 s), else (2) the least valuable evictable one if the new
session is worth more: sessions order by (privileged, partition count, id), followers'
sessions (privileged) above consumers', bigger above smaller. A consumer session becomes
evictable by a follower at once and by anyone after `EVICTION_MS` of age; a follower session
only after `EVICTION_MS` of age. Otherwise no session is created (session id 0).

Bounds (our addition, written down where Kafka has none): all sessions together cache at most
`max_cached_partitions` partitions. A full fetch whose partitions do not fit is answered
sessionless (after stale sessions are evicted); an incremental fetch that would grow its
session past the bound closes the session with FETCH_SESSION_ID_NOT_FOUND (what a client sees
when Kafka evicts its session), and the client's next full fetch is answered sessionless. The
work of an incremental request is linear in the partitions it names plus the session's size,
which a full fetch of the same partitions costs anyway.

Sessions are not bound to a connection or a principal (Kafka binds them to nothing); the
handler authorizes every partition of every request, session partitions included.

Time (`now_ms`) and the session-id randomness are inputs; counters for the metrics endpoint
are kept here (`FetchSessionStats`).
"""

from __future__ import annotations

import enum
import heapq
import random
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
MAX_EPOCH: Final = 0x7FFFFFFF
DEFAULT_SLOTS: Final = 1000
"""Kafka's default `max.incremental.fetch.session.cache.slots`."""
EVICTION_MS: Final = 120_000
"""Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: a session unused this long may be
evicted by anyone; a session younger than this is protected (see the module docstring)."""
MAX_CACHED_PARTITIONS: Final = 500_000
"""Partitions cached by all sessions together (~100-200 bytes each in Python)."""

TopicKey = str | uuid.UUID
"""A topic's name (sessions of Fetch v7-12) or its id (sessions of v13+)."""
PartitionKey = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    """Kafka's `FetchMetadata.nextEpoch`: -1 stays -1, 2^31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1


class PartitionRequest(NamedTuple):
    """What a fetch request (or the session, for partitions it leaves out) asks of one
    partition."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    """The fetcher's own log start offset (followers send it; consumers -1)."""


class PartitionAnswer(Protocol):
    """What the handler answers for one partition (`fetch_encoding.FetchPartition`)."""

    @property
    def error_code(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def records(self) -> object: ...
    @property
    def preferred_read_replica(self) -> int: ...
    @property
    def diverging_epoch(self) -> object: ...


class CachedPartition:
    """One partition of a session: the last request data and what was last answered."""

    __slots__ = ("high_watermark", "last_stable_offset", "log_start_offset", "request")

    def __init__(self, request: PartitionRequest) -> None:
        self.request = request
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    def must_answer(self, answer: PartitionAnswer) -> bool:
        """Kafka's `maybeUpdateResponseData` (plus the LSO): remember and report a change."""
        changed = bool(answer.records)
        if self.high_watermark != answer.high_watermark:
            self.high_watermark = answer.high_watermark
            changed = True
        if self.last_stable_offset != answer.last_stable_offset:
            self.last_stable_offset = answer.last_stable_offset
            changed = True
        if self.log_start_offset != answer.log_start_offset:
            self.log_start_offset = answer.log_start_offset
            changed = True
        if answer.preferred_read_replica >= 0 or answer.diverging_epoch is not None:
            changed = True
        if answer.error_code != 0:
            self.high_watermark = -1  # named again once the error is gone
            changed = True
        return changed

    def remember(self, answer: PartitionAnswer) -> None:
        self.high_watermark = -1 if answer.error_code else answer.high_watermark
        self.last_stable_offset = answer.last_stable_offset
        self.log_start_offset = answer.log_start_offset


@dataclass(slots=True)
class QuietPartitions:
    """A follower's session on its leader: the partitions its last reads found caught up
    (fetch offset = the leader's log end, no error), read when the leader's change counter
    stood at `seq`. While a partition is not named by the request and has not changed
    since `seq` (no append, HW, log start or leadership change), its read would give the
    same empty answer: the leader answers it from the session (the handler's business,
    `trafka.node.handlers.fetch`); every `ReplicaManager.quiet_walk_ms` it reads them all,
    which refreshes the follower's caught-up time (replica.lag.time.max.ms)."""

    keys: set[PartitionKey]
    seq: int
    leadership_epoch: int
    """`ReplicaManager.leadership_epoch` at the reads (a leadership change voids all)."""
    walked_all_ms: int


@dataclass(slots=True, eq=False)
class FetchSession:
    session_id: int
    privileged: bool
    """Created by a follower (Kafka: sessions of followers outrank those of consumers)."""
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    """The epoch the next incremental request must carry."""
    partitions: OrderedDict[PartitionKey, CachedPartition]
    cached_size: int = -1
    """The size the cache accounted for at the last touch (-1: not in the cache)."""
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False
    quiet: QuietPartitions | None = None

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.session_id)


class ContextKind(enum.Enum):
    """What the handler does with a request."""

    SESSION_ERROR = "answer the top-level error and no partitions"
    SESSIONLESS = "read and answer every partition of the request, session id 0"
    FULL = "read and answer every partition of the request, then try to create a session"
    INCREMENTAL = "read every partition of the session, answer the changed ones"


@dataclass(slots=True)
class FetchContext:
    kind: ContextKind
    partitions: list[tuple[PartitionKey, PartitionRequest]]
    """The partitions to read, in this order (the request's or the session's)."""
    privileged: bool
    uses_topic_ids: bool
    error_code: int = 0
    session: FetchSession | None = None
    expected_epoch: int = 0
    """INCREMENTAL: the session's epoch once this request has been taken."""
    named: frozenset[PartitionKey] = frozenset()
    """INCREMENTAL: the partitions the request names (added or changed since the last)."""


@dataclass(frozen=True, slots=True)
class Completion:
    error_code: int
    session_id: int
    selected: list[int]
    """Indexes into `FetchContext.partitions` of the partitions to answer, in order."""


@dataclass(slots=True)
class FetchSessionStats:
    """Counters for the metrics endpoint; keys are (fetcher, kind): fetcher `consumer` or
    `follower`, kind one of `sessionless`, `full`, `incremental`, `error`."""

    requests: dict[tuple[str, str], int] = field(default_factory=dict)
    request_partitions: dict[tuple[str, str], int] = field(default_factory=dict)
    """Partitions named in the requests (what an incremental session saves)."""
    response_partitions: dict[tuple[str, str], int] = field(default_factory=dict)
    evictions: int = 0

    def copy(self) -> FetchSessionStats:
        return FetchSessionStats(
            dict(self.requests),
            dict(self.request_partitions),
            dict(self.response_partitions),
            self.evictions,
        )


_KIND_NAMES: Final = {
    ContextKind.SESSIONLESS: "sessionless",
    ContextKind.FULL: "full",
    ContextKind.INCREMENTAL: "incremental",
    ContextKind.SESSION_ERROR: "error",
}


def _add(counter: dict[tuple[str, str], int], key: tuple[str, str], amount: int) -> None:
    counter[key] = counter.get(key, 0) + amount


class FetchSessionCache:
    """Kafka's FetchSessionCache + FetchManager; see the module docstring for the rules."""

    def __init__(
        self,
        max_slots: int,
        *,
        rng: random.Random,
        eviction_ms: int = EVICTION_MS,
        max_cached_partitions: int = MAX_CACHED_PARTITIONS,
    ) -> None:
        self.max_slots = max(0, max_slots)
        self.eviction_ms = eviction_ms
        self.max_cached_partitions = max_cached_partitions
        self._rng = rng
        self._sessions: dict[int, FetchSession] = {}
        self._last_used: OrderedDict[int, FetchSession] = OrderedDict()
        """Least recently used first (touches happen in time order)."""
        self._by_all: list[tuple[bool, int, int]] = []
        self._by_privileged: list[tuple[bool, int, int]] = []
        """Min-heaps of evictable keys; stale entries are skipped and pruned lazily."""
        self.total_partitions = 0
        self.stats = FetchSessionStats()

    # ---- queries ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    # ---- the request's context ----------------------------------------------------------
    def new_context(
        self,
        session_id: int,
        epoch: int,
        *,
        privileged: bool,
        uses_topic_ids: bool,
        fetch_data: list[tuple[PartitionKey, PartitionRequest]],
        forgotten: Iterable[PartitionKey],
        now_ms: int,
    ) -> FetchContext:
        """Kafka's `FetchManager.newContext`: decide how to serve one Fetch request."""
        context = self._new_context(
            session_id, epoch, privileged, uses_topic_ids, fetch_data, forgotten, now_ms
        )
        key = ("follower" if privileged else "consumer", _KIND_NAMES[context.kind])
        _add(self.stats.requests, key, 1)
        _add(self.stats.request_partitions, key, len(fetch_data))
        return context

    def _new_context(
        self,
        session_id: int,
        epoch: int,
        privileged: bool,
        uses_topic_ids: bool,
        fetch_data: list[tuple[PartitionKey, PartitionRequest]],
        forgotten: Iterable[PartitionKey],
        now_ms: int,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            kind = ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS
            return FetchContext(kind, fetch_data, privileged, uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            return self._error(ErrorCode.fetch_session_id_not_found, privileged, uses_topic_ids)
        if session.epoch != epoch:
            return self._error(ErrorCode.invalid_fetch_session_epoch, privileged, uses_topic_ids)
        if session.uses_topic_ids != uses_topic_ids:
            return self._error(ErrorCode.fetch_session_topic_id_error, privileged, uses_topic_ids)
        partitions = session.partitions
        for key, request in fetch_data:
            cached = partitions.get(key)
            if cached is None:
                partitions[key] = CachedPartition(request)
            else:
                cached.request = request
        for key in forgotten:
            partitions.pop(key, None)
        grown = len(partitions) - max(0, session.cached_size)
        if self.total_partitions + grown > self.max_cached_partitions:
            self.remove(session_id)
            return self._error(ErrorCode.fetch_session_id_not_found, privileged, uses_topic_ids)
        if not partitions:
            self.remove(session_id)  # Kafka: nothing left, the session closes
            return FetchContext(ContextKind.SESSIONLESS, fetch_data, privileged, uses_topic_ids)
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(
            ContextKind.INCREMENTAL,
            [(key, cached.request) for key, cached in partitions.items()],
            privileged,
            uses_topic_ids,
            session=session,
            expected_epoch=session.epoch,
            named=frozenset(key for key, _ in fetch_data),
        )

    @staticmethod
    def _error(code: ErrorCode, privileged: bool, uses_topic_ids: bool) -> FetchContext:
        return FetchContext(
            ContextKind.SESSION_ERROR, [], privileged, uses_topic_ids, error_code=int(code)
        )

    def complete(
        self, context: FetchContext, answers: Sequence[PartitionAnswer], now_ms: int
    ) -> Completion:
        """The answer's session id, error and partitions, once `context.partitions` were read
        (`answers[i]` answers `context.partitions[i]`)."""
        completion = self._complete(context, answers, now_ms)
        key = ("follower" if context.privileged else "consumer", _KIND_NAMES[context.kind])
        _add(self.stats.response_partitions, key, len(completion.selected))
        return completion

    def _complete(
        self, context: FetchContext, answers: Sequence[PartitionAnswer], now_ms: int
    ) -> Completion:
        kind = context.kind
        if kind is ContextKind.SESSION_ERROR:
            return Completion(context.error_code, INVALID_SESSION_ID, [])
        everything = list(range(len(context.partitions)))
        if kind is ContextKind.SESSIONLESS:
            return Completion(0, INVALID_SESSION_ID, everything)
        if kind is ContextKind.FULL:
            session_id = self._maybe_create(context, answers, now_ms)
            return Completion(0, session_id, everything)
        session = context.session
        assert session is not None
        if session.epoch != context.expected_epoch:
            # a duplicate request took the session meanwhile (Kafka: "possible duplicate")
            return Completion(int(ErrorCode.invalid_fetch_session_epoch), session.session_id, [])
        partitions = session.partitions
        selected: list[int] = []
        for index, ((key, _), answer) in enumerate(zip(context.partitions, answers, strict=True)):
            cached = partitions.get(key)
            if cached is None or not cached.must_answer(answer):
                continue
            selected.append(index)
            if answer.records:
                partitions.move_to_end(key)
        return Completion(0, session.session_id, selected)

    # ---- the cache ----------------------------------------------------------------------
    def _maybe_create(
        self, context: FetchContext, answers: Sequence[PartitionAnswer], now_ms: int
    ) -> int:
        partitions: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
        for (key, request), answer in zip(context.partitions, answers, strict=True):
            cached = CachedPartition(request)
            cached.remember(answer)
            partitions[key] = cached
        size = len(partitions)
        if size == 0 or self.max_slots == 0:
            return INVALID_SESSION_ID
        while self.total_partitions + size > self.max_cached_partitions:
            if not self._evict_stale(now_ms):
                return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots and not self._try_evict(
            context.privileged, (context.privileged, size, 0), now_ms
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            session_id=self._new_session_id(),
            privileged=context.privileged,
            uses_topic_ids=context.uses_topic_ids,
            creation_ms=now_ms,
            last_used_ms=now_ms,
            epoch=next_epoch(INITIAL_EPOCH),
            partitions=partitions,
        )
        self._sessions[session.session_id] = session
        self._touch(session, now_ms)
        return session.session_id

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def _evict_stale(self, now_ms: int) -> bool:
        if not self._last_used:
            return False
        oldest = next(iter(self._last_used.values()))
        if now_ms - oldest.last_used_ms <= self.eviction_ms:
            return False
        self.remove(oldest.session_id)
        self.stats.evictions += 1
        return True

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Kafka's `tryEvict`: a stale session, else the least valuable evictable one if
        the new session (`key`) is worth at least as much."""
        if self._evict_stale(now_ms):
            return True
        heap = self._by_privileged if privileged else self._by_all
        victim = self._peek(heap, privileged)
        if victim is None or key < victim.evictable_key():
            return False
        self.remove(victim.session_id)
        self.stats.evictions += 1
        return True

    def _peek(self, heap: list[tuple[bool, int, int]], privileged: bool) -> FetchSession | None:
        while heap:
            entry = heap[0]
            session = self._sessions.get(entry[2])
            member = session is not None and (
                session.evictable_by_privileged if privileged else session.evictable_by_all
            )
            if session is not None and member and session.evictable_key() == entry:
                return session
            heapq.heappop(heap)
        return None

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        """Kafka's `touch`: last used now, size and evictability re-accounted."""
        session.last_used_ms = now_ms
        self._last_used[session.session_id] = session
        self._last_used.move_to_end(session.session_id)
        old_key = session.evictable_key()
        self.total_partitions += len(session.partitions) - max(0, session.cached_size)
        session.cached_size = len(session.partitions)
        key = session.evictable_key()
        old_enough = now_ms - session.creation_ms > self.eviction_ms
        if (not session.privileged or old_enough) and (
            key != old_key or not session.evictable_by_privileged
        ):
            session.evictable_by_privileged = True
            self._push(self._by_privileged, key)
        if old_enough and (key != old_key or not session.evictable_by_all):
            session.evictable_by_all = True
            self._push(self._by_all, key)

    def _push(self, heap: list[tuple[bool, int, int]], key: tuple[bool, int, int]) -> None:
        heapq.heappush(heap, key)
        if len(heap) > 2 * len(self._sessions) + 16:  # drop stale entries (amortized O(1))
            privileged = heap is self._by_privileged
            live = [
                s.evictable_key()
                for s in self._sessions.values()
                if (s.evictable_by_privileged if privileged else s.evictable_by_all)
            ]
            heapq.heapify(live)
            heap[:] = live

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return None
        self._last_used.pop(session_id, None)
        self.total_partitions -= max(0, session.cached_size)
        session.cached_size = -1
        return session
