"""`ktool log-dirs`: Kafka's JSON report from DescribeLogDirs results (logdirs_cmd.report)."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from trafka.tools.logdirs_cmd import parse_ids, report
from trafka.tools.offsets_cmd import OffsetsCommandError


def _result(error: int, topics: list[tuple[str, int, int]]) -> NS:
    return NS(
        error_code=error,
        log_dir="/data/1",
        topics=[
            NS(
                name=t,
                partitions=[
                    NS(partition_index=p, partition_size=s, offset_lag=0, is_future_key=False)
                ],
            )
            for t, p, s in topics
        ],
    )


def test_report_filters_topics_and_keeps_kafkas_key_order() -> None:
    document = report({1: [_result(0, [("a", 0, 10), ("b", 1, 20)])]}, {"a"})
    assert json.dumps(document, separators=(",", ":")) == (
        '{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"a-0","size":10,'
        '"offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data/1"}]}],"version":1}'
    )
    failed = report({2: [_result(56, [])]}, None)  # KAFKA_STORAGE_ERROR
    assert failed["brokers"][0]["logDirs"][0]["error"] == (
        "org.apache.kafka.common.errors.KafkaStorageException"
    )


def test_broker_ids() -> None:
    assert parse_ids("1, 2,3") == [1, 2, 3]
    assert parse_ids(None) is None
    with pytest.raises(OffsetsCommandError):
        parse_ids("one")
