"""No silent weakening (issue 12, item 6): log errors carry their Kafka code as data, a failed
`min.insync.replicas` lookup never turns acks=all into acks=1, and followers adopt the
leader's log start offset from every fetch answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.node.nodes import NodeUnderTest
from trafka.log import errors as log_errors
from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.metadata_store import memory_store
from trafka.node.replication.follower import follower_log_start_offset
from trafka.node.replication.replica_manager import (
    AppendResult,
    PartitionStateUpdate,
    PendingAppend,
    ReplicaManager,
    _error_for,
)

ME = 1


def all_log_errors() -> list[type[log_errors.LogError]]:
    found: list[type[log_errors.LogError]] = []
    pending: list[type[log_errors.LogError]] = [log_errors.LogError]
    while pending:
        klass = pending.pop()
        found.append(klass)
        pending.extend(klass.__subclasses__())
    return found


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (log_errors.RecordListTooLargeError("big"), ErrorCode.record_list_too_large),
        (log_errors.CorruptRecordError("crc"), ErrorCode.corrupt_message),
        (log_errors.InvalidRecordError("key"), ErrorCode.invalid_record),
        (log_errors.RecordTooLargeError("big"), ErrorCode.message_too_large),
        (log_errors.LogDirFailedError("io"), ErrorCode.kafka_storage_error),
        (log_errors.OutOfOrderSequenceError("seq"), ErrorCode.out_of_order_sequence_number),
        (log_errors.InvalidProducerEpochError("epoch"), ErrorCode.invalid_producer_epoch),
        (log_errors.OffsetOutOfRangeError("off"), ErrorCode.offset_out_of_range),
        (
            log_errors.UnsupportedForMessageFormatError("v0"),
            ErrorCode.unsupported_for_message_format,
        ),
    ],
)
def test_log_errors_answer_their_own_kafka_code(error: Exception, code: ErrorCode) -> None:
    assert _error_for(error) == (int(code), str(error))


def test_every_log_error_names_a_code_and_other_exceptions_are_unknown_server_errors() -> None:
    for klass in all_log_errors():
        assert isinstance(klass.error_code, int), klass
    code, message = _error_for(KeyError("boom"))
    assert code == int(ErrorCode.unknown_server_error) and message.startswith("KeyError")


# ---- min.insync.replicas ------------------------------------------------------------------


class FlakyConfigs:
    """`log_config_for` whose lookups fail while `failing` is set."""

    def __init__(self, min_insync_replicas: int) -> None:
        self.config = LogConfig(min_insync_replicas=min_insync_replicas)
        self.failing = False

    def __call__(self, topic: str) -> LogConfig:
        if self.failing:
            raise ValueError("config store unavailable")
        return self.config


@asynccontextmanager
async def leading(
    tmp_path: Path, configs: FlakyConfigs, isr: tuple[int, ...], *, fail_from_now: bool = False
) -> AsyncIterator[ReplicaManager]:
    async with memory_store() as store:
        node = NodeUnderTest(
            store, ME, tmp_path / "logs", live_brokers=lambda: [1, 2, 3], log_config_for=configs
        )
        manager = node.replica_manager
        manager.get_or_create_log("orders", 0)  # a log that exists already (e.g. from before)
        configs.failing = fail_from_now
        errors = manager.apply_leader_and_isr(
            [PartitionStateUpdate("orders", 0, 1, ME, 1, isr, 0, (1, 2, 3))]
        )
        assert errors == {("orders", 0): 0}
        yield manager


def one_batch() -> bytes:
    return build_batch([NewRecord(value=b"v", key=b"k")], now_ms=0)


async def test_a_failed_lookup_keeps_the_value_in_force(tmp_path: Path) -> None:
    configs = FlakyConfigs(min_insync_replicas=2)
    async with leading(tmp_path, configs, isr=(1, 2)) as manager:
        check_kept(manager, configs)


def check_kept(manager: ReplicaManager, configs: FlakyConfigs) -> None:
    assert isinstance(manager.append_records("orders", 0, one_batch(), required_acks=-1),
                      PendingAppend)  # fmt: skip
    manager.leaders[next(iter(manager.leaders))].isr = (1,)  # type: ignore[assignment]
    configs.failing = True
    step = manager.append_records("orders", 0, one_batch(), required_acks=-1)
    assert isinstance(step, AppendResult)
    assert step.error_code == int(ErrorCode.not_enough_replicas)


async def test_a_new_leader_whose_lookup_fails_requires_every_replica(tmp_path: Path) -> None:
    configs = FlakyConfigs(min_insync_replicas=2)
    async with leading(tmp_path, configs, isr=(1, 2), fail_from_now=True) as manager:
        check_strictest(manager)


def check_strictest(manager: ReplicaManager) -> None:
    step = manager.append_records("orders", 0, one_batch(), required_acks=-1)
    assert isinstance(step, AppendResult)
    assert step.error_code == int(ErrorCode.not_enough_replicas)  # 2 in sync, 3 required
    acks_one = manager.append_records("orders", 0, one_batch(), required_acks=1)
    assert isinstance(acks_one, AppendResult) and acks_one.error_code == 0


async def test_without_a_value_in_force_the_lookup_error_propagates(tmp_path: Path) -> None:
    configs = FlakyConfigs(min_insync_replicas=2)
    async with leading(tmp_path, configs, isr=(1, 2, 3)) as manager:
        configs.failing = True
        with pytest.raises(ValueError, match="unavailable"):
            manager._min_insync_replicas("orders")


# ---- the follower's log start offset --------------------------------------------------------


@pytest.mark.parametrize(
    ("leader_start", "local_start", "local_high_watermark", "adopted"),
    [
        (60, 0, 100, 60),  # DeleteRecords on the leader: adopted
        (60, 60, 100, None),  # already there
        (10, 60, 100, None),  # never moves back
        (60, 0, 40, 40),  # not past the follower's own HW
        (-1, 0, 100, None),  # an error answer carries -1
    ],
)
def test_followers_adopt_the_leaders_log_start_offset(
    leader_start: int, local_start: int, local_high_watermark: int, adopted: int | None
) -> None:
    assert follower_log_start_offset(leader_start, local_start, local_high_watermark) == adopted
