"""LocalLogs restores each partition's high watermark from `replication-offset-checkpoint`
at open instead of raising it to the log end offset (records above the checkpointed HW may
never have been committed); a sole-ISR leader then advances it to the LEO (REP-15)."""

from __future__ import annotations

from pathlib import Path

from trafka.log.config import LogConfig
from trafka.log.records import NewRecord, build_batch
from trafka.node.local_logs import LocalLogs
from trafka.node.replication.ids import (
    BrokerId,
    ControllerEpoch,
    LeaderEpoch,
    Offset,
    TopicPartition,
    ZkVersion,
)
from trafka.node.replication.leader import PartitionLeaderState

NOW = 1_700_000_000_000


def open_logs(log_dir: Path) -> LocalLogs:
    return LocalLogs([log_dir], LogConfig(), now_ms=NOW, node_id=1, cluster_id="c1")


def write(log_dir: Path, records: int, high_watermark: int) -> None:
    logs = open_logs(log_dir)
    log = logs.get_or_create("orders", 0, config=LogConfig())
    for _ in range(records):
        log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(high_watermark)
    logs.close()


def test_open_restores_checkpointed_high_watermark_below_log_end(tmp_path: Path) -> None:
    write(tmp_path, records=5, high_watermark=2)
    logs = open_logs(tmp_path)
    log = logs.get("orders", 0)
    assert log is not None
    assert log.log_end_offset == 5
    assert log.high_watermark == 2
    logs.close()


def test_open_without_checkpoint_entry_starts_at_log_start(tmp_path: Path) -> None:
    write(tmp_path, records=3, high_watermark=3)
    (tmp_path / "replication-offset-checkpoint").unlink()
    logs = open_logs(tmp_path)
    log = logs.get("orders", 0)
    assert log is not None
    assert (log.log_end_offset, log.high_watermark) == (3, 0)
    logs.close()


def test_sole_isr_leader_advances_restored_high_watermark_to_log_end() -> None:
    me = BrokerId(1)
    state = PartitionLeaderState.become_leader(
        TopicPartition("orders", 0),
        me,
        leader_epoch=LeaderEpoch(1),
        controller_epoch=ControllerEpoch(1),
        replicas=(me,),
        isr=(me,),
        zk_version=ZkVersion(0),
        log_end_offset=Offset(5),
        high_watermark=Offset(2),
        now_ms=NOW,
    )
    assert state.high_watermark == 5


def test_leader_with_other_isr_member_keeps_restored_high_watermark() -> None:
    me, other = BrokerId(1), BrokerId(2)
    state = PartitionLeaderState.become_leader(
        TopicPartition("orders", 0),
        me,
        leader_epoch=LeaderEpoch(1),
        controller_epoch=ControllerEpoch(1),
        replicas=(me, other),
        isr=(me, other),
        zk_version=ZkVersion(0),
        log_end_offset=Offset(5),
        high_watermark=Offset(2),
        now_ms=NOW,
    )
    assert state.high_watermark == 2
