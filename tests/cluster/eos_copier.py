"""A consume-transform-produce copier in its own process (it can be SIGKILLed).

    python -m tests.cluster.eos_copier --bootstrap HOST:PORT --source in --target out \
        --group g --transactional-id tx [--per-transaction 200] [--idle-exit-s 20]

Reads `source` (read_committed) in group `group`, writes every value to `target` inside a
transaction together with the consumed offsets (send_offsets_to_transaction), commits,
and prints one JSON line per committed transaction: {"event": "committed", "count": n}.
An abortable error aborts the transaction and rewinds to the committed offsets; a fatal
one (e.g. fenced by a newer instance) exits with code 3. Exits 0 after `idle_exit_s`
without input.

A watchdog exits with code 4 ({"event": "stuck"}) when a transactional call runs
`STUCK_GRACE_S` past its own timeout: librdkafka 2.16's send_offsets_to_transaction can
wait forever (and ignores its timeout) when the cached group coordinator was removed from
the cluster's metadata while it was down - confluentinc/librdkafka#5511 and #5456, open:
the coordinator request waits for a state change of a broker whose thread librdkafka
already ended. The supervisor (the test) restarts the copier with the same transactional
id, as an operator would; exactly-once must hold across that too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

API_TIMEOUT_S = 60.0
STUCK_GRACE_S = 20.0
STUCK_EXIT = 4

T = TypeVar("T")


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


class Watchdog:
    """Exits the process when one call runs STUCK_GRACE_S past API_TIMEOUT_S."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._call: tuple[str, float] | None = None

    def start(self) -> None:
        threading.Thread(target=self._watch, daemon=True).start()

    def run(self, call: Callable[..., T], *args: Any) -> T:
        with self._lock:
            self._call = (call.__name__, time.monotonic())
        try:
            return call(*args)
        finally:
            with self._lock:
                self._call = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            with self._lock:
                current = self._call
            if current is not None and time.monotonic() - current[1] > (
                API_TIMEOUT_S + STUCK_GRACE_S
            ):
                emit(event="stuck", call=current[0], seconds=round(time.monotonic() - current[1]))
                os._exit(STUCK_EXIT)


WATCHDOG = Watchdog()


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
            WATCHDOG.run(producer.commit_transaction, API_TIMEOUT_S)
            return
        except KafkaException as raised:
            error = raised.args[0]
            if not error.retriable() or error.txn_requires_abort() or error.fatal():
                raise
            emit(event="retry-commit", error=str(error))
    WATCHDOG.run(producer.commit_transaction, API_TIMEOUT_S)


def abort(producer: Producer) -> bool:
    """abort_transaction, retried while retriable; False after a fatal error."""
    for _ in range(10):
        try:
            WATCHDOG.run(producer.abort_transaction, API_TIMEOUT_S)
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
    WATCHDOG.start()
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
    WATCHDOG.run(producer.init_transactions, API_TIMEOUT_S)
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
            positions = consumer.position(consumer.assignment())
            metadata = consumer.consumer_group_metadata()
            WATCHDOG.run(producer.send_offsets_to_transaction, positions, metadata, API_TIMEOUT_S)
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
