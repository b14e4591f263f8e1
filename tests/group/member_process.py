"""A consumer-group member in its own process, for cluster tests (it can be SIGKILLed).

    python -m tests.group.member_process --bootstrap HOST:PORT --group g --topic t \
        [--client confluent|kafka-python|aiokafka] [--instance-id i] [--strategy s]

Prints one JSON object per line on stdout: {"event": "assigned", "partitions": [...]}
after every rebalance, {"event": "message", "partition": p, "offset": o, "value": v} for
each record *after* committing offset+1 synchronously (process, then commit: at least
once, GRP-23), and {"event": "ready"} once subscribed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": 1000,
        "partition.assignment.strategy": args.strategy or "range,roundrobin",
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)

    def on_assign(_consumer: Any, partitions: Any) -> None:
        emit(event="rebalance", kind="assign", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(_consumer: Any, partitions: Any) -> None:
        emit(event="rebalance", kind="revoke", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    emit(event="ready")
    reported: list[int] | None = None
    try:
        while True:
            message = consumer.poll(0.2)
            current = sorted(tp.partition for tp in consumer.assignment())
            if current != reported:
                reported = current
                emit(event="assigned", partitions=current)
            if message is None or message.error():
                continue
            consumer.commit(
                offsets=[
                    TopicPartition(message.topic(), message.partition(), message.offset() + 1)
                ],
                asynchronous=False,
            )
            emit(
                event="message",
                partition=message.partition(),
                offset=message.offset(),
                value=message.value().decode(),
            )
    finally:
        consumer.close()


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=1000,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer.subscribe([args.topic], listener=Listener())
    emit(event="ready")
    while True:
        batches = consumer.poll(timeout_ms=200)
        for tp, records in batches.items():
            for record in records:
                consumer.commit(
                    {
                        TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(
                            record.offset + 1, "", -1
                        )
                    }
                )
                emit(
                    event="message",
                    partition=tp.partition,
                    offset=record.offset,
                    value=record.value.decode(),
                )


async def run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=1000,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    await consumer.start()
    consumer.subscribe([args.topic], listener=Listener())
    emit(event="ready")
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    await consumer.commit(
                        {TopicPartition(tp.topic, tp.partition): record.offset + 1}
                    )
                    emit(
                        event="message",
                        partition=tp.partition,
                        offset=record.offset,
                        value=record.value.decode(),
                    )
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client", default="confluent")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--strategy", default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    try:
        if args.client == "confluent":
            run_confluent(args)
        elif args.client == "kafka-python":
            run_kafka_python(args)
        elif args.client == "aiokafka":
            asyncio.run(run_aiokafka(args))
        else:
            raise SystemExit(f"unknown client {args.client}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
