"""The replica manager of a node: partition logs this broker leads, append and read paths.

Single-node slice (issue 3): every partition whose leader is this broker has a local
`PartitionLog` (created on first use through the `LogManager`); the high watermark is the
log end offset because the ISR is this broker alone. Issue 5 adds followers, fetchers, ISR
and the acks=all purgatory on top of the same three entry points the handlers call:

* `append(topic, partition, records, required_acks=, timeout_ms=)` -> `AppendResult`
* `read(topic, partition, fetch_offset, max_bytes=, isolation_level=, ...)` -> `ReadResult`
* `list_offset(topic, partition, timestamp, ...)` -> `OffsetResult`

Long-poll fetches park on `append_waiter()`: a `trio.Event` that is set (and replaced) on
every successful append, so parked fetches wake and re-read.

Log errors become Kafka error codes here (trafka.log.errors -> ErrorCode), never exceptions
escaping to the connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from trafka.log import errors as log_errors
from trafka.net.framing import Chunk, FileRegion
from trafka.node.topics import TopicManager

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class AppendResult:
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ReadResult:
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: tuple[Chunk, ...] = ()
    """Whole batches: file regions (sendfile) or bytes."""
    size: int = 0


@dataclass(frozen=True, slots=True)
class OffsetResult:
    error_code: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


def _error_for(error: Exception) -> tuple[int, str]:
    name = type(error).__name__
    message = str(error) or name
    mapping: list[tuple[str, ErrorCode]] = [
        ("InvalidRecordError", ErrorCode.invalid_record),
        ("CorruptRecordError", ErrorCode.corrupt_message),
        ("RecordTooLargeError", ErrorCode.message_too_large),
        ("RecordBatchTooLargeError", ErrorCode.record_list_too_large),
        ("OutOfOrderSequenceError", ErrorCode.out_of_order_sequence_number),
        ("DuplicateSequenceError", ErrorCode.duplicate_sequence_number),
        ("InvalidProducerEpochError", ErrorCode.invalid_producer_epoch),
        ("UnknownProducerIdError", ErrorCode.unknown_producer_id),
        ("InvalidTimestampError", ErrorCode.invalid_timestamp),
        ("OffsetOutOfRangeError", ErrorCode.offset_out_of_range),
        ("LogDirFailedError", ErrorCode.kafka_storage_error),
        ("InvalidTxnStateError", ErrorCode.invalid_txn_state),
    ]
    for klass in type(error).__mro__:
        for error_name, code in mapping:
            if klass.__name__ == error_name:
                return int(code), message
    if isinstance(error, log_errors.LogError):
        return int(ErrorCode.unknown_server_error), message
    return int(ErrorCode.unknown_server_error), f"{name}: {message}"


class ReplicaManager:
    """Append/read/list-offsets over the local logs of the partitions this node leads."""

    def __init__(
        self,
        *,
        node_id: int,
        topics: TopicManager,
        log_manager: Any,
        log_config_for: Callable[[str], Any],
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self._node_id = node_id
        self._topics = topics
        self._log_manager = log_manager
        self._log_config_for = log_config_for
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._append_event = trio.Event()

    # ---- plumbing -----------------------------------------------------------------------------
    def append_waiter(self) -> trio.Event:
        """An event set by the next successful append (for parked fetches)."""
        return self._append_event

    def _wake_fetches(self) -> None:
        self._append_event.set()
        self._append_event = trio.Event()

    def _leader_log(self, topic: str, partition: int) -> tuple[int, Any, int]:
        """(error_code, log or None, leader_epoch)."""
        state = self._topics.partition(topic, partition)
        if state is None:
            return int(ErrorCode.unknown_topic_or_partition), None, -1
        if state.leader != self._node_id:
            return int(ErrorCode.not_leader_or_follower), None, state.leader_epoch
        log = self.get_or_create_log(topic, partition)
        return 0, log, state.leader_epoch

    def get_or_create_log(self, topic: str, partition: int) -> Any:
        log = self._log_manager.get(topic, partition)
        if log is None:
            state = self._topics.get(topic)
            log = self._log_manager.get_or_create(
                topic,
                partition,
                config=self._log_config_for(topic),
                topic_id=state.topic_id if state is not None else None,
            )
        return log

    # ---- produce ------------------------------------------------------------------------------
    async def append(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        required_acks: int,
        timeout_ms: int,
        transactional: bool = False,
    ) -> AppendResult:
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return AppendResult(error_code)
        if not records:
            return AppendResult(int(ErrorCode.corrupt_message), error_message="empty record set")
        try:
            info = log.append_as_leader(records, leader_epoch=leader_epoch, now_ms=self._now_ms())
        except Exception as error:  # log errors -> Kafka codes; anything else is a bug
            code, message = _error_for(error)
            return AppendResult(code, log_start_offset=log.log_start_offset, error_message=message)
        if not info.duplicate:
            # Single-node slice: the ISR is this broker, so HW = LEO (issue 5 replaces this).
            log.update_high_watermark(log.log_end_offset)
            self._wake_fetches()
        return AppendResult(
            0,
            base_offset=int(info.first_offset),
            log_append_time_ms=int(info.log_append_time_ms),
            log_start_offset=int(log.log_start_offset),
        )

    # ---- fetch --------------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        *,
        max_bytes: int,
        isolation_level: int,
        current_leader_epoch: int = -1,
        min_one_batch: bool = True,
    ) -> ReadResult:
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return ReadResult(error_code)
        if current_leader_epoch >= 0 and current_leader_epoch != leader_epoch:
            code: ErrorCode = (
                ErrorCode.fenced_leader_epoch
                if current_leader_epoch < leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return ReadResult(int(code))
        high_watermark = int(log.high_watermark)
        log_start_offset = int(log.log_start_offset)
        last_stable_offset = int(getattr(log, "last_stable_offset", high_watermark))
        upper = last_stable_offset if isolation_level == READ_COMMITTED else high_watermark
        if fetch_offset < log_start_offset or fetch_offset > int(log.log_end_offset):
            return ReadResult(
                int(ErrorCode.offset_out_of_range),
                high_watermark,
                last_stable_offset,
                log_start_offset,
            )
        if fetch_offset >= upper or (max_bytes <= 0 and not min_one_batch):
            return ReadResult(0, high_watermark, last_stable_offset, log_start_offset, (), 0)
        try:
            data = log.read(
                fetch_offset, max_bytes=max_bytes, max_offset=upper, min_one_batch=min_one_batch
            )
        except Exception as error:
            read_code, _ = _error_for(error)
            return ReadResult(read_code, high_watermark, last_stable_offset, log_start_offset)
        records, size = _fetch_payload(data)
        return ReadResult(0, high_watermark, last_stable_offset, log_start_offset, records, size)

    # ---- list offsets -------------------------------------------------------------------------
    def list_offset(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        isolation_level: int,
        current_leader_epoch: int = -1,
    ) -> OffsetResult:
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return OffsetResult(error_code)
        if current_leader_epoch >= 0 and current_leader_epoch < leader_epoch:
            return OffsetResult(int(ErrorCode.fenced_leader_epoch))
        high_watermark = int(log.high_watermark)
        if timestamp == LATEST_TIMESTAMP:
            offset = (
                int(getattr(log, "last_stable_offset", high_watermark))
                if isolation_level == READ_COMMITTED
                else high_watermark
            )
            return OffsetResult(0, offset, -1, leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetResult(0, int(log.log_start_offset), -1, leader_epoch)
        found = log.offset_for_timestamp(timestamp)
        if found is None:
            return OffsetResult(0, -1, -1, -1)
        if timestamp != MAX_TIMESTAMP and found.offset >= high_watermark:
            return OffsetResult(0, -1, -1, -1)
        found_epoch = -1 if found.leader_epoch is None else found.leader_epoch
        return OffsetResult(0, found.offset, found.timestamp, found_epoch)

    def end_offset_for_epoch(
        self, topic: str, partition: int, epoch: int, *, current_leader_epoch: int = -1
    ) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch: (error_code, epoch, end_offset)."""
        error_code, log, leader_epoch = self._leader_log(topic, partition)
        if log is None:
            return error_code, -1, -1
        if current_leader_epoch >= 0 and current_leader_epoch != leader_epoch:
            code = (
                ErrorCode.fenced_leader_epoch
                if current_leader_epoch < leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return int(code), -1, -1
        found_epoch, end_offset = log.end_offset_for_epoch(epoch)
        return 0, int(found_epoch), int(end_offset)

    # ---- admin --------------------------------------------------------------------------------
    def delete_records_before(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords: (error_code, low_watermark)."""
        error_code, log, _ = self._leader_log(topic, partition)
        if log is None:
            return error_code, -1
        high_watermark = int(log.high_watermark)
        target = high_watermark if offset == -1 else offset
        if target < 0 or target > high_watermark:
            return int(ErrorCode.offset_out_of_range), -1
        try:
            log.delete_records_before(target)
        except Exception as error:
            return _error_for(error)[0], -1
        return 0, int(log.log_start_offset)

    def delete_partition_logs(self, topic: str, partitions: list[int]) -> None:
        for partition in partitions:
            self._log_manager.delete(topic, partition)


def _fetch_payload(data: Any) -> tuple[tuple[Chunk, ...], int]:
    """(chunks, size) from the log's FetchData: file regions sent with os.sendfile.

    A region whose segment is deleted (retention) or shortened (follower truncation) before
    the response is written makes the net layer close the connection; the client retries.
    """
    if data is None or data.size == 0:
        return (), 0
    chunks = tuple(
        FileRegion(str(region.path), region.position, region.length) for region in data.regions
    )
    return chunks, int(data.size)
