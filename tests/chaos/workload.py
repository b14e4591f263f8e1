"""The chaos workload (Jepsen's Kafka workload, without transactions for now): producers
and consumers in threads of the harness process, each recording into its own lists.

* `ProducerWorker`: confluent-kafka, acks=all, idempotent or not; values `<name>-<seq>`
  (unique), sent to partition seq % partitions at a steady rate; every delivery report
  recorded with partition and offset. A fatal error (an idempotent producer's sequence
  state broken) is recorded and the producer replaced by a new one.
* `ConsumerWorker`: a group member (subscribe; every assignment callback starts a new
  unbroken assignment) or a manually assigned consumer (every partition from the
  beginning); every polled record recorded.
* `MetadataWorker`: creates a small topic (RF=3, a unique `retention.ms`) every few seconds
  and records whether the creation was acknowledged; the harness checks at the end that
  every acknowledged one still exists with its config.
* Transactions: `TRANSACTIONAL_WORKLOAD` is the hook. trafka answers a transactional
  InitProducerId with TRANSACTIONAL_ID_AUTHORIZATION_FAILED today (docs/status.md), so no
  transactional producer runs; when transactions land, a worker that produces in
  transactions (some aborted) and a read_committed consumer go here, and the checker gains
  aborted-read and uncommitted-read checks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.history import ClientError, Read, Write

CLIENT_LOGGER = logging.getLogger("tests.chaos.clients")
"""librdkafka's log lines of every harness client (the runner sends them to clients.log)."""
CLIENT_LOGGER.propagate = False


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """Settings every harness client shares: short connection set-up, logs to CLIENT_LOGGER."""
    return {
        "bootstrap.servers": bootstrap,
        "socket.connection.setup.timeout.ms": 5_000,
        "topic.metadata.refresh.interval.ms": 1000,
        "logger": CLIENT_LOGGER,
        **extra,
    }


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap))


TRANSACTIONAL_WORKLOAD: Callable[..., threading.Thread] | None = None
"""Hook for a transactional producer/consumer pair (not implemented: no transactions)."""


IDEMPOTENT_MAX_IN_FLIGHT = 1
"""The idempotent producers send one request at a time per broker. librdkafka (2.16.0,
the version confluent-kafka 2.16.1 ships) answers OUT_OF_ORDER_SEQUENCE_NUMBER on request
*n*+1 after request *n* failed with a retriable error (NOT_LEADER_OR_FOLLOWER,
NOT_ENOUGH_REPLICAS: the gap is expected, the broker answers as Kafka does) by draining
and bumping its producer epoch, and then re-sends every unacknowledged message of every
partition under the new epoch from sequence 0, including messages that were written but
whose answer was lost (a connection closed by a restarting leader): no broker can tell them
from new ones, so they are written twice. That is librdkafka issue #4953 (reproduced
against Apache Kafka; Kafka's Java producer retries without a bump in that case), not a
broker fault. With one request in flight there is no request *n*+1 to be refused, so an
epoch bump, and with it a duplicate, can only come from a broker that lost or mis-tracked
producer state, which is what this harness is after (docs/reliability.md)."""

PLAIN_MAX_IN_FLIGHT = 5


def max_in_flight(*, idempotent: bool) -> int:
    return IDEMPOTENT_MAX_IN_FLIGHT if idempotent else PLAIN_MAX_IN_FLIGHT


class Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.start


class ProducerWorker(threading.Thread):
    def __init__(
        self,
        name: str,
        *,
        idempotent: bool,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        clock: Clock,
        message_timeout_ms: int,
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.producer_name = name
        self.idempotent = idempotent
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.clock = clock
        self.message_timeout_ms = message_timeout_ms
        self.writes: list[Write] = []
        self.errors: list[ClientError] = []
        self.stopping = threading.Event()
        self.flush_timeout_s = 30.0
        self.unflushed = 0
        self.fatal_pending = False

    def _producer(self) -> Producer:
        config: dict[str, Any] = client_config(
            self.bootstrap,
            **{
                "acks": "all",
                "enable.idempotence": self.idempotent,
                "linger.ms": 5,
                "message.timeout.ms": self.message_timeout_ms,
                "request.timeout.ms": 10_000,
                "client.id": self.producer_name,
                "retry.backoff.ms": 100,
                "error_cb": self._on_error,
            },
        )
        if self.idempotent:
            config["debug"] = "eos"  # PID/epoch changes and their reasons, into clients.log
        config["max.in.flight.requests.per.connection"] = max_in_flight(idempotent=self.idempotent)
        return Producer(config)

    def _on_error(self, error: KafkaError) -> None:
        fatal = bool(error.fatal()) or error.code() == KafkaError._FATAL
        if fatal:
            self.fatal_pending = True
        self.errors.append(
            ClientError(
                time=self.clock.now(), client=self.producer_name, error=str(error), fatal=fatal
            )
        )

    def _delivered(self, write: Write) -> Callable[[KafkaError | None, Message], None]:
        def callback(error: KafkaError | None, message: Message) -> None:
            now = self.clock.now()
            if error is None:
                write.acked = now
                write.offset = message.offset()
                partition = message.partition()
                if partition is not None and partition != write.partition:
                    write.error = f"acked on partition {partition}"
            else:
                write.failed = now
                write.error = str(error)

        return callback

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # recorded, never an unhandled thread exception
            self.errors.append(
                ClientError(self.clock.now(), self.producer_name, f"worker crashed: {error!r}")
            )

    def _run(self) -> None:
        producer = self._producer()
        seq = 0
        interval = 1.0 / self.rate
        next_send = time.monotonic()
        while not self.stopping.is_set():
            if self.fatal_pending:
                self.fatal_pending = False
                # the producer is unusable: collect its reports, then start a new one
                producer.flush(5)
                self.errors.append(
                    ClientError(self.clock.now(), self.producer_name, "replaced after fatal")
                )
                producer = self._producer()
            value = f"{self.producer_name}-{seq}"
            partition = seq % self.partitions
            write = Write(
                value=value,
                producer=self.producer_name,
                idempotent=self.idempotent,
                partition=partition,
                sent=self.clock.now(),
            )
            try:
                producer.produce(
                    self.topic, value.encode(), partition=partition,
                    on_delivery=self._delivered(write),
                )  # fmt: skip
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as error:  # a fatal producer refuses produce()
                cause = error.args[0] if error.args else None
                if isinstance(cause, KafkaError):
                    self._on_error(cause)
                else:
                    self.errors.append(
                        ClientError(self.clock.now(), self.producer_name, str(error))
                    )
                time.sleep(0.1)
                continue
            self.writes.append(write)
            seq += 1
            producer.poll(0)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                producer.poll(min(delay, 0.5))
            else:
                next_send = time.monotonic()
        self.unflushed = producer.flush(self.flush_timeout_s)


class ConsumerWorker(threading.Thread):
    def __init__(
        self,
        name: str,
        *,
        group: bool,
        bootstrap: str,
        topic: str,
        partitions: int,
        clock: Clock,
        group_id: str,
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.consumer_name = name
        self.group = group
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.clock = clock
        self.group_id = group_id
        self.reads: list[Read] = []
        self.errors: list[ClientError] = []
        self.assignment = 0
        self.stopping = threading.Event()
        self.positions: dict[int, int] = {}

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assignment += 1

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assignment += 1

    def _on_error(self, error: KafkaError) -> None:
        self.errors.append(ClientError(self.clock.now(), self.consumer_name, str(error)))

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # recorded, never an unhandled thread exception
            self.errors.append(
                ClientError(self.clock.now(), self.consumer_name, f"worker crashed: {error!r}")
            )

    def _run(self) -> None:
        consumer = Consumer(
            client_config(
                self.bootstrap,
                **{
                    "client.id": self.consumer_name,
                    "group.id": self.group_id,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": self.group,
                    "auto.commit.interval.ms": 1000,
                    "session.timeout.ms": 10_000,
                    "heartbeat.interval.ms": 1_000,
                    "error_cb": self._on_error,
                },
            )
        )
        try:
            if self.group:
                consumer.subscribe(
                    [self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                    on_lost=self._on_revoke,
                )  # fmt: skip
            else:
                consumer.assign(
                    [
                        TopicPartition(self.topic, p, OFFSET_BEGINNING)
                        for p in range(self.partitions)
                    ]
                )
            while not self.stopping.is_set():
                for message in consumer.consume(num_messages=500, timeout=0.5):
                    error = message.error()
                    if error is not None:
                        self._on_error(error)
                        continue
                    partition = message.partition() or 0
                    offset = message.offset() or 0
                    raw = message.value()
                    self.reads.append(
                        Read(
                            consumer=self.consumer_name,
                            assignment=self.assignment,
                            time=self.clock.now(),
                            partition=partition,
                            offset=offset,
                            value=raw.decode() if isinstance(raw, bytes) else str(raw),
                        )
                    )
                    self.positions[partition] = offset + 1
        finally:
            consumer.close()


class MetadataWorker(threading.Thread):
    """Creates `<prefix>-<i>` (1 partition, RF=3, retention.ms=<unique>) every `interval_s`."""

    def __init__(self, *, bootstrap: str, prefix: str, interval_s: float, clock: Clock) -> None:
        super().__init__(name="chaos-metadata", daemon=True)
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.interval_s = interval_s
        self.clock = clock
        self.ops: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        admin = admin_client(self.bootstrap)
        index = 0
        while not self.stopping.wait(self.interval_s):
            name = f"{self.prefix}-{index}"
            retention = str(86_400_000 + index)
            op: dict[str, Any] = {
                "op": "create_topic",
                "name": name,
                "config": {"retention.ms": retention},
                "sent": round(self.clock.now(), 3),
                "acked": False,
            }
            index += 1
            try:
                futures = admin.create_topics(
                    [NewTopic(name, 1, 3, config={"retention.ms": retention})],
                    operation_timeout=10,
                    request_timeout=15,
                )
                futures[name].result(timeout=20)
                op["acked"] = True
            except Exception as error:
                op["error"] = str(error)[:200]
            op["done"] = round(self.clock.now(), 3)
            self.ops.append(op)
