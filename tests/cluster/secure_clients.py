"""Produce and consume (in a group) with real clients over a secured listener.

Each function takes the bootstrap address, a `Security` (Kafka's client settings) and a
topic; it produces `COUNT` records and consumes them back in a consumer group, and returns
the values read (sorted). Used by tests/cluster/test_security_*.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

COUNT = 20
REPO = Path(__file__).resolve().parents[2]
KAFKAJS = REPO / "tests" / "js" / "node_modules" / "kafkajs"
KAFKAJS_SCRIPT = Path(__file__).with_name("kafkajs_secure_client.js")


@dataclass(frozen=True)
class Security:
    protocol: str
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def librdkafka(self) -> dict[str, str]:
        conf = {"security.protocol": self.protocol.lower()}
        if self.mechanism:
            conf["sasl.mechanism"] = self.mechanism
            conf["sasl.username"] = self.username
            conf["sasl.password"] = self.password
        if self.ca:
            conf["ssl.ca.location"] = str(self.ca)
        if self.cert and self.key:
            conf["ssl.certificate.location"] = str(self.cert)
            conf["ssl.key.location"] = str(self.key)
        return conf

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.ca is None:
            return None
        context = ssl.create_default_context(cafile=str(self.ca))
        if self.cert and self.key:
            context.load_cert_chain(str(self.cert), str(self.key))
        return context

    def python_kwargs(self) -> dict[str, object]:
        kwargs: dict[str, object] = {"security_protocol": self.protocol}
        if self.mechanism:
            kwargs["sasl_mechanism"] = self.mechanism
            kwargs["sasl_plain_username"] = self.username
            kwargs["sasl_plain_password"] = self.password
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        return kwargs


def _values(prefix: str) -> list[str]:
    return [f"{prefix}-{i}" for i in range(COUNT)]


def confluent(bootstrap: str, security: Security, topic: str) -> list[str]:
    from confluent_kafka import Consumer, Producer

    conf = {"bootstrap.servers": bootstrap, **security.librdkafka()}
    producer = Producer({**conf, "acks": "all"})
    for value in _values("ck"):
        producer.produce(topic, value=value.encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(1)
            payload = None if message is None or message.error() else message.value()
            if payload is not None:
                seen.append(payload.decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return sorted(seen)


def kafka_python(bootstrap: str, security: Security, topic: str) -> list[str]:
    from kafka import KafkaConsumer, KafkaProducer

    kwargs = security.python_kwargs()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kwargs)
    for value in _values("kp"):
        producer.send(topic, value.encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **kwargs,
    )
    try:
        seen = [m.value.decode() for m in consumer]
        consumer.commit()
    finally:
        consumer.close()
    return sorted(seen)


def aiokafka(bootstrap: str, security: Security, topic: str) -> list[str]:
    async def run() -> list[str]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        kwargs = security.python_kwargs()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **kwargs)
        await producer.start()
        try:
            for value in _values("aio"):
                await producer.send_and_wait(topic, value.encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"g-{topic}",
            auto_offset_reset="earliest",
            **kwargs,
        )
        await consumer.start()
        seen: list[str] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    seen.append(message.value.decode())
                    if len(seen) >= COUNT:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return sorted(seen)

    return asyncio.run(run())


def _kcat_args(bootstrap: str, security: Security) -> list[str]:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise AssertionError("kcat is not on PATH (apt-get install kcat)")
    args = [kcat, "-b", bootstrap]
    for key, value in security.librdkafka().items():
        args += ["-X", f"{key}={value}"]
    return args


def kcat(bootstrap: str, security: Security, topic: str) -> list[str]:
    base = _kcat_args(bootstrap, security)
    produced = subprocess.run(
        [*base, "-P", "-t", topic],
        input="\n".join(_values("kcat")) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [*base, "-G", f"g-{topic}", "-o", "beginning", "-c", str(COUNT), "-e", topic],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr
    return sorted(line for line in consumed.stdout.splitlines() if line)


def kafkajs(bootstrap: str, security: Security, topic: str) -> list[str]:
    node = shutil.which("node")
    if node is None:
        raise AssertionError("kafkajs tests need Node.js: `node` is not on PATH")
    if not KAFKAJS.exists():
        raise AssertionError(f"kafkajs is not installed: run `npm install` in {KAFKAJS.parents[1]}")
    config = {
        "ssl": security.protocol in ("SSL", "SASL_SSL"),
        "ca": security.ca.read_text() if security.ca else None,
        "cert": security.cert.read_text() if security.cert else None,
        "key": security.key.read_text() if security.key else None,
        "mechanism": (security.mechanism or "").lower() or None,
        "username": security.username,
        "password": security.password,
    }
    completed = subprocess.run(
        [node, str(KAFKAJS_SCRIPT), bootstrap, str(KAFKAJS), topic, str(COUNT)],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return sorted(json.loads(completed.stdout.strip().splitlines()[-1]))


CLIENTS = {
    "confluent-kafka": confluent,
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
    "kcat": kcat,
    "kafkajs": kafkajs,
}
PREFIXES = {
    "confluent-kafka": "ck",
    "kafka-python": "kp",
    "aiokafka": "aio",
    "kcat": "kcat",
    "kafkajs": "js",
}


def expected(client: str) -> list[str]:
    return sorted(_values(PREFIXES[client]))
