"""The fetcher's side of an incremental fetch session (KIP-227), as pure logic.

Kafka's `FetchSessionHandler`, one per fetcher connection: the first request is full
(session 0, epoch 0) and names every partition; when the leader's answer carries a session
id, the following requests are incremental (that id, epoch 1, 2, ...) and name only the
partitions added or whose request data changed (fetch offset, leader epoch, log start
offset, max bytes), with the dropped ones in `forgotten_topics_data`; the answer names only
partitions with news, the others are unchanged. A top-level error, an answer that does not
fit (a full answer missing a partition, an incremental one naming a partition outside the
session) or a failed request sends the next request full again: epoch 0 with the old
session id (the leader closes it) or, after FETCH_SESSION_ID_NOT_FOUND, session 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from kio.schema.errors import ErrorCode

from trafka.node.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)

K = TypeVar("K", bound=Hashable)
D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class SessionRequest(Generic[K, D]):
    session_id: int
    epoch: int
    to_send: dict[K, D]
    """Every partition (full request) or the added and changed ones (incremental)."""
    to_forget: list[K]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionClient(Generic[K, D]):
    """Session state of one fetcher towards one leader. `D` compares equal when unchanged."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[K, D] = {}
        """What the leader's session holds, as this side last sent it."""

    def build(self, wanted: Mapping[K, D]) -> SessionRequest[K, D]:
        if self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.partitions = dict(wanted)
            return SessionRequest(self.session_id, self.epoch, dict(wanted), [])
        to_send = {
            key: data
            for key, data in wanted.items()
            if key not in self.partitions or self.partitions[key] != data
        }
        to_forget = [key for key in self.partitions if key not in wanted]
        self.partitions = dict(wanted)
        return SessionRequest(self.session_id, self.epoch, to_send, to_forget)

    def on_response(
        self, request: SessionRequest[K, D], error_code: int, session_id: int, named: Iterable[K]
    ) -> bool:
        """Whether the answer's partitions may be applied; sets up the next request."""
        if error_code != 0:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self._start_over()
            return False
        named_set = set(named)
        if request.full:
            if named_set != set(request.to_send):
                self._start_over()
                return False
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
            return True
        if not named_set <= set(self.partitions):
            self._start_over()
            return False
        if session_id == INVALID_SESSION_ID:  # the leader closed the session
            self.session_id = INVALID_SESSION_ID
            self._start_over()
            return True
        self.epoch = next_epoch(self.epoch)
        return True

    def on_error(self) -> None:
        """The request failed (connection lost, timeout): start over with a full fetch."""
        self._start_over()

    def _start_over(self) -> None:
        self.epoch = INITIAL_EPOCH
