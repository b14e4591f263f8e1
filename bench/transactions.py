"""Transactional produce cost on one knode (issue 15).

    .venv/bin/python bench/transactions.py [--messages 200000] [--per-transaction 1000]
                                           [--small 300] [--repeat 3] [--py-spy FILE]

Starts one `knode` (tests/support/cluster.py, temporary data dir), then, in ONE run and
`--repeat` times:

* idempotent: one confluent-kafka producer (`enable.idempotence`, acks=all, linger 5 ms,
  100-byte values, partition 0) sends `--messages`; rate = messages / (flush done - first
  produce);
* transactional: the same load from a transactional producer, `--per-transaction` records
  per transaction (begin, produce, commit); the ratio transactional / idempotent is the
  figure of merit (goal >= 0.8);
* small transactions: `--small` transactions of one record each, committed one after the
  other: commits per second (each is AddPartitionsToTxn, Produce, EndTxn and the marker).

Median and range over the repeats are printed. `--py-spy FILE` records the knode with
py-spy (`pip install py-spy`) during the first repeat's transactional phase and prints its
hot spots (as bench/produce_consume.py does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_consume import py_spy

from tests.support.cluster import KnodeCluster

VALUE = b"x" * 100


def _producer(bootstrap: str, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            **extra,
        }
    )


def _produce(producer: Producer, topic: str, count: int) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)


def idempotent_rate(bootstrap: str, topic: str, messages: int) -> float:
    producer = _producer(bootstrap, **{"enable.idempotence": True})
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    started = time.monotonic()
    _produce(producer, topic, messages)
    producer.flush(120)
    return messages / (time.monotonic() - started)


def transactional_rate(bootstrap: str, topic: str, messages: int, per_txn: int, tid: str) -> float:
    producer = _producer(bootstrap, **{"transactional.id": tid})
    producer.init_transactions(60)
    started = time.monotonic()
    sent = 0
    while sent < messages:
        count = min(per_txn, messages - sent)
        producer.begin_transaction()
        _produce(producer, topic, count)
        producer.commit_transaction(60)
        sent += count
    return messages / (time.monotonic() - started)


def commits_per_second(bootstrap: str, topic: str, transactions: int, tid: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(60)
    started = time.monotonic()
    for _ in range(transactions):
        producer.begin_transaction()
        producer.produce(topic, VALUE, partition=0)
        producer.commit_transaction(60)
    return transactions / (time.monotonic() - started)


def _summary(name: str, values: list[float], unit: str) -> str:
    return (
        f"{name}: median {statistics.median(values):,.0f} {unit} "
        f"(range {min(values):,.0f}-{max(values):,.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--per-transaction", type=int, default=1000)
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--py-spy", metavar="FILE")
    args = parser.parse_args()
    settings = [
        "transaction.state.log.num.partitions=4",
        "offsets.topic.num.partitions=4",
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        KnodeCluster(Path(tmp), node_count=1, settings=settings) as cluster,
    ):
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = ["bench-idem", "bench-txn", "bench-small"]
        for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
            future.result(60)
        idempotent: list[float] = []
        transactional: list[float] = []
        ratios: list[float] = []
        commits: list[float] = []
        for repeat in range(args.repeat):
            idem = idempotent_rate(bootstrap, "bench-idem", args.messages)
            process = cluster.nodes[1].process
            assert process is not None
            with py_spy(process.pid, args.py_spy if repeat == 0 else None):
                txn = transactional_rate(
                    bootstrap, "bench-txn", args.messages, args.per_transaction, f"bench-{repeat}"
                )
            small = commits_per_second(bootstrap, "bench-small", args.small, f"small-{repeat}")
            idempotent.append(idem)
            transactional.append(txn)
            ratios.append(txn / idem)
            commits.append(small)
            print(
                f"repeat {repeat + 1}: idempotent {idem:,.0f} msgs/s, transactional "
                f"({args.per_transaction}/txn) {txn:,.0f} msgs/s, ratio {txn / idem:.2f}, "
                f"{small:,.0f} commits/s (1 record/txn)",
                flush=True,
            )
        print(_summary("idempotent", idempotent, "msgs/s"))
        print(_summary("transactional", transactional, "msgs/s"))
        print(
            f"ratio transactional/idempotent: median {statistics.median(ratios):.2f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )
        print(_summary("small transactions", commits, "commits/s"))


if __name__ == "__main__":
    main()
