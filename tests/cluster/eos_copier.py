"""A consume-transform-produce copier in its own process (it can be SIGKILLed).

    python -m tests.cluster.eos_copier --bootstrap HOST:PORT --source in --target out \
        --group g --transactional-id tx [--per-transaction 200] [--idle-exit-s 20]

Reads `source` (read_committed) in group `group`, writes every value to `target` inside a
transaction together with the consumed offsets (send_offsets_to_transaction), commits,
and prints one JSON line per committed transaction: {"event": "committed", "count": n}.
An abortable error aborts the transaction and rewinds to the committed offsets; a fatal
one (e.g. fenced by a newer instance) exits with code 3. Exits 0 after `idle_exit_s`
without input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for committed in consumer.committed(assignment, timeout=30):
        offset = committed.offset if committed.offset >= 0 else -2  # OFFSET_BEGINNING
        consumer.seek(TopicPartition(committed.topic, committed.partition, offset))


def commit(producer: Producer) -> None:
    """commit_transaction, retried while librdkafka says the error is retriable."""
    for _ in range(10):
        try:
            producer.commit_transaction(60)
            return
        except KafkaException as raised:
            error = raised.args[0]
            if not error.retriable() or error.txn_requires_abort() or error.fatal():
                raise
            emit(event="retry-commit", error=str(error))
    producer.commit_transaction(60)


def abort(producer: Producer) -> bool:
    """abort_transaction, retried while retriable; False after a fatal error."""
    for _ in range(10):
        try:
            producer.abort_transaction(60)
            return True
        except KafkaException as raised:
            error = raised.args[0]
            emit(event="retry-abort", error=str(error))
            if error.fatal():
                return False
    return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--per-transaction", type=int, default=200)
    parser.add_argument("--idle-exit-s", type=float, default=20.0)
    args = parser.parse_args()
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 60000,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": 20000,
            # the transaction state machine and every request, to stderr (kept by the test)
            "debug": "eos,protocol",
            "linger.ms": 10,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([args.source])
    emit(event="ready")
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < args.idle_exit_s:
        messages = [m for m in consumer.consume(args.per_transaction, 1.0) if not m.error()]
        if not messages:
            continue
        idle_since = time.monotonic()
        try:
            producer.begin_transaction()
            for message in messages:
                producer.produce(args.target, message.value(), key=message.key())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            commit(producer)
        except KafkaException as raised:
            error = raised.args[0]
            if error.fatal():
                emit(event="fatal", error=str(error))
                return 3
            emit(event="aborted", error=str(error))
            if not abort(producer):
                return 3
            rewind(consumer)
            continue
        emit(event="committed", count=len(messages))
    consumer.close()
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
